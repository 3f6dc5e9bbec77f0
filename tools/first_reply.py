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

    python tools/first_reply.py --model T --draft D --prompts heldout|FILE [--category C]

runs that for every prompt of a bench prompt set (``heldout``, ``builtin``) or file (JSON Lines),
each prompt in processes of its own with a profiles folder of its own (``calibrate``, then
``saved``), and adds up tokens and seconds per mode.

    python tools/first_reply.py --model T --draft D --replies 10 [--modes calibrate]

answers the prompt 10 times in one process (a new conversation each, adaptive,
then plain), to compare the first reply's speed-up with the tenth's (plain speed
averaged over the process's plain replies).
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
from typing import Any

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

        def ask(spec: SpeculationConfig, session: str = "first") -> GenerationRequest:
            return GenerationRequest(messages=(ChatMessage("user", args.prompt),),
                                     max_tokens=args.max_tokens, sampling=SamplingParams(temperature=0.0),
                                     speculation=spec, session=session)

        spec = eng.generate(ask(SpeculationConfig(drafter=DrafterKind.AUTO, adaptive=True)))
        eng.reset()
        plain = eng.generate(ask(SpeculationConfig(enabled=False)))
        replies = []  # (adaptive tok/s, plain tok/s, tokens, adaptive s, plain s) per reply
        for i in range(args.replies):
            if i:
                eng.reset()
                spec_i = eng.generate(ask(SpeculationConfig(drafter=DrafterKind.AUTO, adaptive=True),
                                          session=f"reply-{i}"))
                eng.reset()
                plain_i = eng.generate(ask(SpeculationConfig(enabled=False), session=f"reply-{i}"))
            else:
                spec_i, plain_i = spec, plain
            replies.append((spec_i.stats.tokens_per_s, plain_i.stats.tokens_per_s,
                            spec_i.stats.generated_tokens, spec_i.stats.generation_seconds,
                            plain_i.stats.generation_seconds, spec_i.token_ids == plain_i.token_ids))
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
            "tokens": spec.stats.generated_tokens,
            "adaptive_s": spec.stats.generation_seconds,
            "plain_s": plain.stats.generation_seconds,
            "replies": replies,
        }
    print("RESULT " + json.dumps(out), flush=True)


def run_child(args: argparse.Namespace, mode: str, prompt: str, env: dict[str, str]) -> dict[str, Any] | None:
    cmd = [sys.executable, __file__, "--model", args.model, "--draft", args.draft,
           "--max-tokens", str(args.max_tokens), "--prompt", prompt, "--child", mode,
           "--replies", str(args.replies)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        print(f"{mode}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    result: dict[str, Any] = json.loads(line[7:])
    return result


def print_result(mode: str, r: dict[str, Any]) -> None:
    print(f"{mode:9s} load {r['load_s']:5.2f} s  calibration {r['calibration_ms']} ms"
          f"{' (' + r['calibration_disturbed'] + ')' if r['calibration_disturbed'] else ''}  "
          f"adaptive {r['adaptive_tok_s']:6.2f} tok/s  plain {r['plain_tok_s']:6.2f}  "
          f"{r['speedup']:.3f}x  acc.len {r['acceptance_length']:.2f}  "
          f"started paused: {r['started_paused']}  same text: {r['same_text']}", flush=True)
    if r["calibrated_curve_ms"]:
        print(f"          curve ms by batch {r['calibrated_curve_ms']}", flush=True)
    replies = r["replies"]
    if len(replies) > 1:
        plain = sum(p[2] for p in replies) / sum(p[4] for p in replies)  # tokens / plain seconds
        ups = [a / plain for a, *_ in replies]
        print("          speed-up by reply (plain averaged over the process): "
              + " ".join(f"{u:.2f}" for u in ups), flush=True)
        print(f"          first {ups[0]:.3f}x, last {ups[-1]:.3f}x: first / last {ups[0] / ups[-1]:.3f}; "
              f"same text {sum(1 for *_, same in replies if same)}/{len(replies)}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("--prompts", help="a bench prompt set (heldout, builtin) or file (JSON Lines): every "
                                      "prompt in processes of its own")
    ap.add_argument("--category", action="append", help="only prompts of this category (repeatable)")
    ap.add_argument("--modes", default="learn,calibrate,saved",
                    help="which processes to run, in order (default learn,calibrate,saved)")
    ap.add_argument("--replies", type=int, default=1, help="replies per process (a new conversation each)")
    ap.add_argument("--child", choices=["learn", "calibrate", "saved"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return 0
    modes = [m for m in args.modes.split(",") if m]
    prompts = [("prompt", "", args.prompt)]
    if args.prompts:
        from localchat.bench.prompts import prompts_from, select

        prompts = [(p.id, p.category, p.prompt) for p in select(prompts_from(args.prompts), args.category)]
    root = Path(__file__).resolve().parent.parent
    totals: dict[str, list[float]] = {m: [0.0, 0.0, 0.0] for m in modes}  # tokens, adaptive s, plain s
    for pid, category, prompt in prompts:
        if len(prompts) > 1:
            print(f"== {category} {pid}", flush=True)
        with tempfile.TemporaryDirectory(prefix="localchat-profiles-") as folder:
            env = {**os.environ, "LOCALCHAT_PROFILES_DIR": folder}
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
            for mode in modes:
                r = run_child(args, mode, prompt, env)
                if r is None:
                    return 1
                print_result(mode, r)
                t = totals[mode]
                t[0] += r["tokens"]
                t[1] += r["adaptive_s"]
                t[2] += r["plain_s"]
    if len(prompts) > 1:
        for mode, (tokens, a_s, p_s) in totals.items():
            print(f"all prompts, {mode}: adaptive {tokens / a_s:.2f} tok/s, plain {tokens / p_s:.2f} tok/s, "
                  f"{p_s / a_s:.3f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
