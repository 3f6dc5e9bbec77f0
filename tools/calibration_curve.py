"""How often the target accepts the draft model's next token, by the drafter's confidence in it.

    python tools/calibration_curve.py --model T.gguf --draft D.gguf [--prompts heldout|FILE]
        [--max-tokens 96]

Every step drafts exactly one token whatever its confidence (so no bin is left out, unlike
adaptive speculation, which drafts only the tokens it expects to pay), greedy, over the built-in
bench prompts and, with --prompts, those of the held-out set (``heldout``) or a bench prompts file
(JSON Lines). Prints, per confidence bin of 0.1, how many first tokens were judged and the share
accepted: a drafter whose tokens are accepted more often than its confidence says is underconfident,
and adaptive speculation's calibration (engine/calibration.py) has to learn that.
"""

from __future__ import annotations

import argparse
import json

from recorded_drafts import add_arguments, chosen_prompts, drafting_engine, record


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(ap, max_tokens=96)
    args = ap.parse_args()

    bins = [[0, 0] for _ in range(10)]
    mid: dict[str, list[int]] = {}  # per category: [accepted, judged] of confidences 0.4-0.7
    with drafting_engine(args, calibrate=False) as eng:
        for p in chosen_prompts(args):
            judged = [(confs[0], accepted > 0) for confs, accepted in record(eng, p, 1, args.max_tokens)]
            for conf, ok in judged:
                b = min(9, int(conf * 10))
                bins[b][0] += int(ok)
                bins[b][1] += 1
                if 0.4 <= conf < 0.7:
                    m = mid.setdefault(p.category, [0, 0])
                    m[0] += int(ok)
                    m[1] += 1
            accepted = sum(ok for _, ok in judged)
            print(f"{p.id:24s} {len(judged):3d} first tokens, {accepted:3d} accepted", flush=True)
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
