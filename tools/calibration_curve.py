"""How often the target accepts the draft model's next token, by the drafter's confidence in it.

    python tools/calibration_curve.py --model T.gguf --draft D.gguf [--prompts FILE] [--max-tokens 96]

Every step drafts exactly one token whatever its confidence (so no bin is left out, unlike
adaptive speculation, which drafts only the tokens it expects to pay), greedy, over the built-in
bench prompts and, with --prompts, those of a bench prompts file (JSON Lines). Prints, per
confidence bin of 0.1, how many first tokens were judged and the share accepted: a drafter whose
tokens are accepted more often than its confidence says is underconfident, and adaptive
speculation's calibration (engine/adaptive.py) has to learn that.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from localchat.engine.adaptive import DraftPolicy


class OneToken:
    """Keep the first draft token whatever its confidence; never look further."""

    def take(self, position: int, confidence: float) -> bool:
        return position == 0

    def look_further(self, position: int, decode_seconds: float) -> bool:
        return False


class Recorder:
    """A draft policy: one token every step; records (confidence, accepted) of each."""

    paused = False
    reason = ""
    paused_speedup = None

    def __init__(self) -> None:
        self.judged: list[tuple[float, bool]] = []

    def draft_length(self) -> int:
        return 1

    def stop_rule(self) -> OneToken:
        return OneToken()

    def observe(self, drafted: int, accepted: int, draft_s: float, verify_s: float, source: str,
                confidence: Sequence[float] = ()) -> None:
        if drafted and confidence:
            self.judged.append((confidence[0], accepted > 0))

    def observe_declined(self, source: str, confidence: float, hit: float) -> None:
        pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--prompts", type=Path, help="also the prompts of this bench file (JSON Lines)")
    ap.add_argument("--max-tokens", type=int, default=96)
    args = ap.parse_args()

    import os

    os.environ.setdefault("LOCALCHAT_PROFILES_DIR", tempfile.mkdtemp())  # never the user's profiles
    from localchat.bench.prompts import builtin_prompts, load_prompts
    from localchat.engine.engine import Engine
    from localchat.engine.speculative import DecodeLoop
    from localchat.engine.stats import StatsRecorder
    from localchat.engine.types import ChatMessage, EngineConfig, SamplingParams

    prompts = list(builtin_prompts()) + (list(load_prompts(args.prompts)) if args.prompts else [])
    cfg = EngineConfig(args.model, draft_path=args.draft, n_ctx=2048, use_profile=False, calibrate=False,
                       state_memory_bytes=0)
    bins = [[0, 0] for _ in range(10)]
    mid: dict[str, list[int]] = {}  # per category: [accepted, judged] of confidences 0.4-0.7
    with Engine(cfg) as eng:
        if eng.model_drafter is None:
            print(f"the draft model did not load: {eng.draft_problem}", file=sys.stderr)
            return 1
        for p in prompts:
            eng.reset()
            tokens, _ = eng.formatter.tokens_for((ChatMessage("user", p.prompt),))
            rec = Recorder()
            # The loop asks its policy for adaptive's StopRule; the drafter needs only take/look_further.
            policy = cast("DraftPolicy", rec)
            loop = DecodeLoop(eng.target, eng.model_drafter, policy, SamplingParams(temperature=0.0),
                              StatsRecorder(), lambda: False, args.max_tokens)
            for _ in loop.run(tokens):
                pass
            for conf, ok in rec.judged:
                b = min(9, int(conf * 10))
                bins[b][0] += int(ok)
                bins[b][1] += 1
                if 0.4 <= conf < 0.7:
                    m = mid.setdefault(p.category, [0, 0])
                    m[0] += int(ok)
                    m[1] += 1
            accepted = sum(ok for _, ok in rec.judged)
            print(f"{p.id:24s} {len(rec.judged):3d} first tokens, {accepted:3d} accepted", flush=True)
    print()
    print("confidence  judged  accepted")
    for b, (hits, seen) in enumerate(bins):
        share = f"{hits / seen:8.2f}" if seen else "       -"
        print(f"{b / 10:.1f}-{(b + 1) / 10:.1f}   {seen:7d}  {share}")
    print()
    for category, (hits, seen) in sorted(mid.items()):
        print(f"{category:10s} confidence 0.4-0.7: {seen:4d} judged, {hits / seen:.2f} accepted")
    rows = [{"from": b / 10, "judged": seen, "accepted": hits} for b, (hits, seen) in enumerate(bins)]
    print(json.dumps({"bins": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
