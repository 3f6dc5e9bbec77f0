"""The first reply of a fresh engine process, with and without the pair's saved speculation profile.

    python tools/first_reply.py --model T.gguf --draft D.gguf [--max-tokens 96] [--prompt TEXT]

Three engine processes, one after the other, each in a new Python process (as the
app, ``localchat bench`` and ``localchat serve`` start one):

- ``learn``: no profile and no calibration (how every process started before
  profiles): the first reply learns the costs while it runs;
- ``calibrate``: no saved profile yet (the first process ever on this machine):
  the short calibration at load; it saves the profile at close;
- ``saved``: the profile the previous process saved.

Each process answers the same prompt with adaptive speculation first (its first
reply), then with plain decoding for the speed-up in the same process. Greedy, so
the texts can be compared. Profiles go to a temporary folder, never the user's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPT = "Write a Python function that returns the n-th Fibonacci number iteratively, with a docstring."


def child(args: argparse.Namespace) -> None:
    from localchat.engine.engine import Engine
    from localchat.engine.types import (
        ChatMessage,
        DrafterKind,
        EngineConfig,
        GenerationRequest,
        SamplingParams,
        SpeculationConfig,
    )

    learn = args.child == "learn"
    t0 = time.perf_counter()
    cfg = EngineConfig(args.model, draft_path=args.draft, n_ctx=2048, use_profile=not learn,
                       calibrate=not learn)
    with Engine(cfg) as eng:
        load_s = time.perf_counter() - t0
        report = eng.profile.calibration if eng.profile is not None else None

        def ask(spec: SpeculationConfig) -> GenerationRequest:
            return GenerationRequest(messages=(ChatMessage("user", args.prompt),),
                                     max_tokens=args.max_tokens, sampling=SamplingParams(temperature=0.0),
                                     speculation=spec, session="first")

        spec = eng.generate(ask(SpeculationConfig(drafter=DrafterKind.AUTO, adaptive=True)))
        eng.reset()
        plain = eng.generate(ask(SpeculationConfig(enabled=False)))
        out = {
            "mode": args.child, "load_s": round(load_s, 2),
            "loaded_profile": bool(eng.profile is not None and eng.profile.loaded),
            "calibration_ms": round(report.seconds * 1000) if report else None,
            "calibration_disturbed": report.disturbed if report else None,
            "calibrated_curve_ms": ({b: round(t * 1000, 1) for b, t in report.verify_s.items()}
                                    if report else None),
            "adaptive_tok_s": round(spec.stats.tokens_per_s, 2),
            "plain_tok_s": round(plain.stats.tokens_per_s, 2),
            "speedup": round(spec.stats.tokens_per_s / plain.stats.tokens_per_s, 3),
            "acceptance_length": round(spec.stats.acceptance_length, 2),
            "started_paused": spec.speculation.paused and spec.stats.drafted == 0,
            "same_text": spec.token_ids == plain.token_ids,
        }
    print("RESULT " + json.dumps(out), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("--child", choices=["learn", "calibrate", "saved"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return 0
    with tempfile.TemporaryDirectory(prefix="localchat-profiles-") as folder:
        env = {**os.environ, "LOCALCHAT_PROFILES_DIR": folder}
        root = Path(__file__).resolve().parent.parent
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
        for mode in ("learn", "calibrate", "saved"):
            cmd = [sys.executable, __file__, "--model", args.model, "--draft", args.draft,
                   "--max-tokens", str(args.max_tokens), "--prompt", args.prompt, "--child", mode]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                print(f"{mode}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
                return 1
            r = json.loads(line[7:])
            print(f"{mode:9s} load {r['load_s']:5.2f} s  calibration {r['calibration_ms']} ms"
                  f"{' (' + r['calibration_disturbed'] + ')' if r['calibration_disturbed'] else ''}  "
                  f"adaptive {r['adaptive_tok_s']:6.2f} tok/s  plain {r['plain_tok_s']:6.2f}  "
                  f"{r['speedup']:.3f}x  acc.len {r['acceptance_length']:.2f}  "
                  f"started paused: {r['started_paused']}  same text: {r['same_text']}", flush=True)
            if r["calibrated_curve_ms"]:
                print(f"          curve ms by batch {r['calibrated_curve_ms']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
