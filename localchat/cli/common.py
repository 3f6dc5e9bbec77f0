"""Options shared by the headless commands that run the engine."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable

from localchat.engine.types import EngineConfig, EngineInfo, SpeculationConfig
from localchat.host.events import Failure
from localchat.host.failure_words import Audience
from localchat.settings.options import DRAFT_TOKENS_DEFAULT, DRAFT_TOKENS_MAX, DRAFT_TOKENS_MIN


def whole(lo: int, hi: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number from ``lo`` (to ``hi``); else argparse's error naming the option."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            bound = f"at least {lo}" if hi is None else f"between {lo} and {hi}"
            raise argparse.ArgumentTypeError(f"must be {bound}, not {text}")
        return value

    return parse


def number(
    lo: float, hi: float = math.inf, *, above: bool = False, below: bool = False
) -> Callable[[str], float]:
    """An argparse type: a finite number from ``lo`` to ``hi`` (``above``/``below``: excluding that end).
    float() reads "nan" and "inf", and a NaN compares false with every bound."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
        low_ok = value > lo if above else value >= lo
        high_ok = value < hi if below else value <= hi
        if not (math.isfinite(value) and low_ok and high_ok):
            low = f"above {lo:g}" if above else f"of at least {lo:g}"
            bound = low if hi == math.inf else f"{low} and {'below' if below else 'at most'} {hi:g}"
            raise argparse.ArgumentTypeError(f"must be a finite number {bound}; {text} is not")
        return value

    return parse


def add_engine_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="target GGUF file")
    p.add_argument("--draft", help="draft model GGUF file (same vocabulary as the target)")
    p.add_argument("--ctx", type=whole(1), default=4096, help="context length in tokens (default 4096)")
    p.add_argument(
        "--draft-tokens",
        type=int,
        default=DRAFT_TOKENS_DEFAULT,
        help=f"draft length, {DRAFT_TOKENS_MIN}-{DRAFT_TOKENS_MAX} (default {DRAFT_TOKENS_DEFAULT})",
    )
    p.add_argument("--p-min", type=number(0.0, 1.0, below=True), default=SpeculationConfig().p_min,
                   help="the draft model stops when its top probability falls below this")
    p.add_argument("--max-tokens", type=whole(1), default=256, help="most tokens of the reply (default 256)")
    add_placement_options(p)


def add_placement_options(p: argparse.ArgumentParser) -> None:
    """Where and how the models run: the options ``engine_config`` and ``localchat serve`` read."""
    p.add_argument("--threads", type=whole(1), default=None, help="CPU threads (default: physical cores)")
    p.add_argument("--gpu-layers", type=whole(-1), default=-1, help="layers to offload (-1: all on a GPU)")
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


def model_name(path: str) -> str:
    """A model file as the window names it: the catalog's name and quantization, else the file name
    (never the GGUF's general.name, which calls the starter's drafter "... AWQ")."""
    from localchat.catalog.names import shipped_model_name

    return shipped_model_name(path)


def drafter_name(drafter: str, info: EngineInfo) -> str:
    """What drafts, as ``SpeculationState.drafter`` says it, with the draft model called by its catalog
    name ("n-gram", "off" and the like are kept)."""
    if info.draft is not None and drafter == info.draft.name:
        return model_name(info.draft.path)
    return drafter


def fail(message: str) -> int:
    print(f"localchat: {message}", file=sys.stderr)
    return 1


def engine_log() -> str | None:
    """Where a headless command's engine process writes its log (and llama.cpp's own messages, an
    abort's included): cli-engine.log in the user's log folder; None when that folder cannot be made.
    The supervisor's own warnings are left out of the terminal: the command says what went wrong."""
    import logging

    from localchat.settings import folders

    logging.getLogger("localchat.host").addHandler(logging.NullHandler())
    logging.getLogger("localchat.host").propagate = False
    try:
        path = folders.log_dir() / "cli-engine.log"
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return str(path)


def engine_failure(failure: Failure, audience: Audience, log_path: str | None) -> str:
    """A failure of a headless command's engine process in one sentence, with where its log is when
    the process itself ended."""
    from localchat.host.events import FailureKind
    from localchat.host.failure_words import sentence

    text = sentence(failure, audience)
    if log_path and failure.kind in (FailureKind.ENGINE_DIED, FailureKind.WORKER_LOST, FailureKind.HUNG):
        text += f" What the engine said is in {log_path}."
    return text
