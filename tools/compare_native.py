"""Compare localchat's speculative loop with llama.cpp's own draft-simple on the same prompts.

llama.cpp's example ``llama-speculative-simple`` is built from the sources
vendored in the llama-cpp-python sdist (not shipped, not committed):

    pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d /tmp/sdist
    tar xf /tmp/sdist/llama_cpp_python-0.3.36.tar.gz -C /tmp/sdist
    cd /tmp/sdist/llama_cpp_python-0.3.36/vendor/llama.cpp
    cmake -B /tmp/native-build -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DGGML_NATIVE=ON
    cmake --build /tmp/native-build -j2 --target llama-speculative-simple

then

    python tools/compare_native.py --native /tmp/native-build/bin/llama-speculative-simple \\
        --model T.gguf --draft D.gguf [--prompts heldout2] --category code --max-tokens 96 [--threads N]

Per prompt, in rotating order: localchat off, localchat draft (fixed n), localchat
adaptive, and the native example with the same draft length and p_min, all greedy, on
the same chat-formatted prompt. Prints generation tokens/s and acceptance per run and
the averages; the speed-ups are against localchat's plain decoding in the same run.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from localchat.bench.modes import bench_mode
from localchat.bench.prompts import prompts_from, select
from localchat.engine.engine import Engine
from localchat.engine.types import ChatMessage, EngineConfig, GenerationRequest, SamplingParams

_DECODED = re.compile(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds")
_DRAFTED = re.compile(r"n_drafted\s*=\s*(\d+)")
_ACCEPT = re.compile(r"n_accept\s*=\s*(\d+)")


def run_native(binary: str, args: argparse.Namespace, prompt_text: str, threads: int) -> tuple[float, float]:
    """(tokens/s, acceptance rate) of one native run."""
    cmd = [
        binary, "-m", args.model, "-md", args.draft, "--spec-type", "draft-simple",
        "--spec-draft-n-max", str(args.draft_tokens), "--spec-draft-n-min", "0",
        "--spec-draft-p-min", str(args.p_min), "-n", str(args.max_tokens), "-c", str(args.ctx),
        "-t", str(threads), "-td", str(threads), "-ngl", "0", "-ngld", "0", "--temp", "0",
        "-p", prompt_text,
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    log = out.stdout + out.stderr
    m = _DECODED.search(log)
    if out.returncode != 0 or m is None:
        raise SystemExit(f"native run failed ({out.returncode}):\n{log[-3000:]}")
    drafted = int(_DRAFTED.search(log).group(1))  # type: ignore[union-attr]
    accepted = int(_ACCEPT.search(log).group(1))  # type: ignore[union-attr]
    return int(m.group(1)) / float(m.group(2)), (accepted / drafted if drafted else 0.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--native", required=True, help="path to llama-speculative-simple")
    ap.add_argument("--model", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--prompts", default="builtin", help="a shipped set (builtin, heldout, heldout2), a file")
    ap.add_argument("--category", default="code", help="category: code, chat, creative, edit")
    ap.add_argument("--threads", type=int, default=None, help="CPU threads for both (default: the engine's)")
    ap.add_argument("--limit", type=int, default=0, help="at most this many prompts (0: all)")
    ap.add_argument("--draft-tokens", type=int, default=4)
    ap.add_argument("--p-min", type=float, default=0.5)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--ctx", type=int, default=2048)
    args = ap.parse_args()
    os.environ.setdefault("LOCALCHAT_PROFILES_DIR", tempfile.mkdtemp())  # never the user's profiles
    prompts = [p for p in select(prompts_from(args.prompts), [args.category], args.limit) if not p.schema]
    if not prompts:
        raise SystemExit(f"no prompts in category {args.category!r} of {args.prompts!r}")
    greedy = SamplingParams(temperature=0.0)
    modes = [bench_mode("off"), bench_mode("draft", args.draft_tokens, args.p_min),
             bench_mode("adaptive", args.draft_tokens, args.p_min)]
    names = ["off", f"draft n={args.draft_tokens}", "adaptive", f"native n={args.draft_tokens}"]
    rates: dict[str, list[float]] = {n: [] for n in names}
    config = EngineConfig(args.model, draft_path=args.draft, n_ctx=args.ctx, n_threads=args.threads)
    with Engine(config) as eng:
        threads = eng.info.n_threads
        print(f"# {Path(args.model).name} + {Path(args.draft).name}, {threads} threads, "
              f"{args.max_tokens} tokens, category {args.category}", flush=True)
        for mode in modes:  # warm-up: weights paged in before anything is timed
            eng.reset()
            eng.generate(GenerationRequest(messages=(ChatMessage("user", prompts[0].prompt),), max_tokens=8,
                                           sampling=greedy, speculation=mode.speculation))
        print(f"{'prompt':<18}" + "".join(f"{n:>16}" for n in names) + f"{'acc ours/native':>18}")
        for i, bp in enumerate(prompts):
            messages = (ChatMessage("user", bp.prompt),)
            text = eng.formatter.text_for(messages)
            tps: dict[str, float] = {}
            acc: dict[str, float] = {}
            order = list(range(len(names)))
            order = order[i % len(order):] + order[: i % len(order)]
            for k in order:
                name = names[k]
                if name.startswith("native"):
                    tps[name], acc[name] = run_native(args.native, args, text, threads)
                    continue
                eng.reset()
                res = eng.generate(GenerationRequest(messages=messages, max_tokens=args.max_tokens,
                                                     sampling=greedy, speculation=modes[k].speculation,
                                                     session=f"cmp:{bp.id}:{name}"))
                tps[name], acc[name] = res.stats.tokens_per_s, res.stats.acceptance_rate
            for n in names:
                rates[n].append(tps[n])
            print(f"{bp.id:<18}" + "".join(f"{tps[n]:>16.2f}" for n in names)
                  + f"{acc[names[1]]:>11.2f}/{acc[names[3]]:.2f}", flush=True)
    off = statistics.mean(rates["off"])
    print(f"{'mean tok/s':<18}" + "".join(f"{statistics.mean(rates[n]):>16.2f}" for n in names))
    print(f"{'vs off':<18}" + "".join(f"{statistics.mean(rates[n]) / off:>15.2f}x" for n in names))
    ours, native = statistics.mean(rates[names[1]]), statistics.mean(rates[names[3]])
    print(f"localchat draft / native draft-simple: {ours / native:.2f}x; "
          f"adaptive / native: {statistics.mean(rates['adaptive']) / native:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
