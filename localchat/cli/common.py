"""Options shared by the headless commands that run the engine."""

from __future__ import annotations

import argparse
import sys

from localchat.engine.types import EngineConfig, SpeculationConfig
from localchat.settings.options import DRAFT_TOKENS_DEFAULT, DRAFT_TOKENS_MAX, DRAFT_TOKENS_MIN


def add_engine_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="target GGUF file")
    p.add_argument("--draft", help="draft model GGUF file (same vocabulary as the target)")
    p.add_argument("--ctx", type=int, default=4096, help="context length in tokens (default 4096)")
    p.add_argument(
        "--draft-tokens",
        type=int,
        default=DRAFT_TOKENS_DEFAULT,
        help=f"draft length, {DRAFT_TOKENS_MIN}-{DRAFT_TOKENS_MAX} (default {DRAFT_TOKENS_DEFAULT})",
    )
    p.add_argument("--p-min", type=float, default=SpeculationConfig().p_min,
                   help="the draft model stops when its top probability falls below this")
    p.add_argument("--max-tokens", type=int, default=256)
    add_placement_options(p)


def add_placement_options(p: argparse.ArgumentParser) -> None:
    """Where and how the models run: the options ``engine_config`` and ``localchat serve`` read."""
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: physical cores)")
    p.add_argument("--gpu-layers", type=int, default=-1, help="layers to offload (-1: all on a GPU)")
    p.add_argument("--rpc", default="", metavar="HOST:PORT[,HOST:PORT...]",
                   help="spread the target over these `localchat worker`s (the drafter stays here)")
    p.add_argument("--tensor-split", default="", metavar="LOCAL,W1[,W2...]",
                   help="shares of the target: this computer, then each worker (default: free memory)")
    p.add_argument("--exact", action="store_true",
                   help="identical text with and without speculation also for quantized models on a CPU "
                        "(keeps the weights' stored layout: plain decoding is slower), and with and "
                        "without saved conversation states (each turn reads the previous reply again)")


def worker_options(args: argparse.Namespace) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """--rpc and --tensor-split as the engine takes them; ValueError with a sentence when wrong."""
    from localchat.engine.rpc_wire import parse_endpoints

    rpc = getattr(args, "rpc", "") or ""
    workers = tuple(str(e) for e in parse_endpoints(rpc)) if rpc else ()
    split_text = getattr(args, "tensor_split", "") or ""
    try:
        split = tuple(float(v) for v in split_text.split(",") if v.strip())
    except ValueError:
        raise ValueError(f"--tensor-split takes numbers separated by commas, not {split_text!r}.") from None
    if split and not workers:
        raise ValueError("--tensor-split needs --rpc: it shares the target between here and workers.")
    return workers, split


def engine_config(args: argparse.Namespace) -> EngineConfig:
    """The engine's config from the shared options; ValueError with a sentence for a bad worker list."""
    workers, split = worker_options(args)
    return EngineConfig(
        target_path=args.model,
        draft_path=args.draft,
        n_ctx=args.ctx,
        n_threads=args.threads,
        gpu_layers=args.gpu_layers,
        rpc_servers=workers,
        tensor_split=split,
        exact=getattr(args, "exact", False),
    )


def speculation_for_mode(mode: str, args: argparse.Namespace) -> SpeculationConfig:
    """off | draft | ngram | auto | adaptive -> SpeculationConfig (see bench.modes.bench_mode)."""
    from localchat.bench.modes import bench_mode

    return bench_mode(mode, args.draft_tokens, args.p_min).speculation


def fail(message: str) -> int:
    print(f"localchat: {message}", file=sys.stderr)
    return 1
