"""How often the draft model guesses the token the target writes, by the target's confidence in it.

    python tools/target_confidence.py --model T.gguf --draft D.gguf [--prompts builtin,heldout]
        [--category chat] [--max-tokens 128] [--threads N] [--window 16]

For each prompt the target writes a greedy reply alone (plain decoding), recording its top probability
at every token; the drafter then reads the prompt and the reply in one batch, and its greedy guess at
each position is compared with the token the target wrote. Printed per reply: how often the drafter
agreed, the target's mean confidence, their correlation, and both means over windows of ``--window``
tokens; then, over all replies, the drafter's agreement by the target's confidence. This is the
evidence for a pause that listens to the target (engine/adaptive.py ``AdaptivePolicy.listen``,
docs/SPECULATION.md). Profiles go to a temporary folder, never the user's; the second held-out set
(``heldout2``) is for benchmarks only, never for this diagnosis.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

BINS = (0.0, 0.5, 0.8, 0.95, 0.99, 1.01)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--prompts", default="builtin,heldout", help="comma-separated shipped sets or files")
    ap.add_argument("--category", action="append", help="only these (default: chat, creative, edit)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--window", type=int, default=16)
    args = ap.parse_args()
    os.environ.setdefault("LOCALCHAT_PROFILES_DIR", tempfile.mkdtemp())  # never the user's profiles
    from localchat.bench.prompts import prompts_from, select
    from localchat.engine.draft_sources import sync_context
    from localchat.engine.engine import Engine
    from localchat.engine.sampling import top_probability
    from localchat.engine.types import ChatMessage, EngineConfig, GenerationRequest

    cfg = EngineConfig(args.model, draft_path=args.draft, n_ctx=2048, use_profile=False, calibrate=False,
                       state_memory_bytes=0, n_threads=args.threads)
    agreed = np.zeros(len(BINS) - 1)
    seen = np.zeros(len(BINS) - 1)
    with Engine(cfg) as eng:
        if eng.model_drafter is None:
            raise SystemExit(f"the draft model did not load: {eng.draft_problem}")
        drafter = eng.model_drafter.ctx
        for spec in args.prompts.split(","):
            for p in select(prompts_from(spec), args.category or ["chat", "creative", "edit"], 0):
                if p.schema or p.tools:
                    continue
                req = GenerationRequest(messages=(ChatMessage("user", p.prompt),), max_tokens=args.max_tokens)
                prompt = eng.prompt_tokens(req)[0]
                target = eng.target
                sync_context(target, prompt)
                reply: list[int] = []
                sure: list[float] = []
                for _ in range(args.max_tokens):
                    logits = target.logits(0)
                    tok = int(np.argmax(logits))
                    reply.append(tok)
                    sure.append(top_probability(logits))
                    if target.model.is_eog(tok):
                        break
                    target.decode([tok])
                sync_context(drafter, prompt[:-1])
                rows = drafter.decode([prompt[-1], *reply[:-1]], logits_for="all")
                agree = np.array([int(np.argmax(drafter.logits(i))) == reply[i] for i in range(rows)], float)
                conf = np.array(sure[:rows])
                for b in range(len(BINS) - 1):
                    mask = (conf >= BINS[b]) & (conf < BINS[b + 1])
                    agreed[b] += agree[mask].sum()
                    seen[b] += mask.sum()
                corr = (float(np.corrcoef(agree, conf)[0, 1]) if agree.std() > 0 and conf.std() > 0
                        else float("nan"))
                w = args.window
                windows = " ".join(f"{agree[j:j + w].mean():.2f}/{conf[j:j + w].mean():.2f}"
                                   for j in range(0, rows, w))
                print(f"{p.id:22s} n={rows:3d} agree={agree.mean():.2f} target={conf.mean():.2f} "
                      f"corr={corr:.2f} | {windows}", flush=True)
    print("\nthe drafter's agreement by the target's confidence (all replies)")
    for b in range(len(BINS) - 1):
        share = agreed[b] / seen[b] if seen[b] else float("nan")
        print(f"  target top probability {BINS[b]:.2f}-{min(BINS[b + 1], 1.0):.2f}: agrees {share:.2f} "
              f"(n={int(seen[b])})")


if __name__ == "__main__":
    main()
