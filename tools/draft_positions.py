"""Whether a draft token's position matters, and what a look at the next token finds.

    python tools/draft_positions.py --model T.gguf --draft D.gguf [--prompts heldout|FILE] [--max-tokens 64]

Every step the draft model drafts 6 tokens whatever their confidence (greedy, over the built-in
bench prompts and, with --prompts, those of the held-out set (``heldout``) or a bench prompts file).
Recorded per step: each token's confidence and how many were accepted. Printed, for code and edits
apart from chat and stories:

1. the share accepted by confidence, at the first position of a draft and at later ones (given that
   the tokens before were accepted): adaptive speculation's calibration (engine/calibration.py) has
   one curve for every position;
2. the mean confidence of the next token after a token of each confidence: ``CostStopRule.look_further``
   guesses the next token's chance from the last kept one;
3. the speed that the stop rule reaches over the recorded steps, on this machine's measured costs
   (the calibration at load) and the recorded acceptance as its calibration, against the same rule
   guessing the next token's chance from (2), and against fixed draft lengths 1-6.

The steps of (3) are the recorded ones, each treated as a fresh start: a simulation to compare
rules side by side, not a benchmark.
"""

from __future__ import annotations

import argparse
import itertools
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from recorded_drafts import Step, add_arguments, chosen_prompts, drafting_engine, record

if TYPE_CHECKING:
    from localchat.engine.costs import CostModel

DRAFT = 6


def group(category: str) -> str:
    return "code and edits" if category in ("code", "edit") else "chat and stories"


def simulate(steps: Sequence[Step], cost: CostModel, calibration: object, look_s: float,
             guess: Callable[[float, float], float] | None) -> float:
    """Tokens per second of the stop rule over ``steps``; ``guess(confidence, q)`` replaces the last
    kept token's chance as the guess for the next token's (None: the rule as it is)."""
    from localchat.engine.calibration import Calibration
    from localchat.engine.stop_rule import CostStopRule

    cal = cast(Calibration, calibration)
    t1 = cost.t_verify(1)
    assert t1 is not None
    tokens = seconds = 0.0
    for confs, accepted in steps:
        rule = CostStopRule(cost, cal, 1.0 / t1, look_s)
        kept, spent = 0, look_s  # the first look is paid every speculative step
        for i, conf in enumerate(confs):
            if not rule.take(i, conf):
                break
            kept = i + 1
            if guess is not None:
                rule._q = guess(conf, rule._q)
            if i + 1 >= len(confs) or not rule.look_further(i, look_s):
                break
            spent += look_s
        tv = cost.t_verify(kept + 1)
        assert tv is not None
        tokens += min(kept, accepted) + 1
        seconds += spent + tv
    return tokens / seconds


def fixed(steps: Sequence[Step], cost: CostModel, look_s: float, n: int) -> float:
    tokens = seconds = 0.0
    for confs, accepted in steps:
        k = min(n, len(confs))
        tv = cost.t_verify(k + 1)
        assert tv is not None
        tokens += min(k, accepted) + 1
        seconds += k * look_s + tv
    return tokens / seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(ap, max_tokens=64)
    args = ap.parse_args()

    from localchat.engine.calibration import Calibration

    by_group: dict[str, list[Step]] = defaultdict(list)
    with drafting_engine(args, calibrate=True) as eng:
        cost = eng.cost
        assert eng.model_drafter is not None
        look_s = cost.draft_token_s.get(eng.model_drafter.name)
        if cost.t_verify(1) is None or look_s is None:
            raise SystemExit("the calibration at load measured nothing")
        for p in chosen_prompts(args):
            steps = record(eng, p, DRAFT, args.max_tokens)
            by_group[group(p.category)].extend(steps)
            print(f"{p.id:24s} {len(steps):3d} steps", flush=True)

    curve = {b: cost.t_verify(b) for b in (1, 2, 4, 8)}
    print(f"\ncosts: verification ms by batch {({b: round(1000 * (t or 0), 1) for b, t in curve.items()})}, "
          f"drafter {1000 * look_s:.1f} ms a token")
    calibration = Calibration()
    for steps in by_group.values():
        for confs, accepted in steps:
            calibration.observe(confs, accepted)
    for name, steps in sorted(by_group.items()):
        print(f"\n== {name}: {len(steps)} steps")
        table: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
        after: dict[int, list[float]] = defaultdict(list)
        for confs, accepted in steps:
            for i, conf in enumerate(confs[: accepted + 1]):
                cell = table[(min(4, int(conf * 5)), min(i, 1))]
                cell[0] += int(i < accepted)
                cell[1] += 1
            for prev, following in itertools.pairwise(confs):
                after[min(4, int(prev * 5))].append(following)
        print("confidence  accepted at the first position  at later positions  next token's mean confidence")
        for b in range(5):
            cells = [table.get((b, pos)) for pos in (0, 1)]
            shares = [f"{c[0]:4d}/{c[1]:<4d} {c[0] / c[1]:.2f}" if c else "         -   " for c in cells]
            nxt = after.get(b)
            mean = f"{sum(nxt) / len(nxt):.2f} ({len(nxt)})" if nxt else "-"
            print(f"{b / 5:.1f}-{(b + 1) / 5:.1f}     {shares[0]:>20s}  {shares[1]:>20s}  {mean:>16s}")

        def successor(conf: float, q: float, after: dict[int, list[float]] = after) -> float:
            seen = after.get(min(4, int(conf * 5)))
            return sum(calibration.q(c) for c in seen) / len(seen) if seen else q

        as_is = simulate(steps, cost, calibration, look_s, None)
        learned = simulate(steps, cost, calibration, look_s, successor)
        fixed_speeds = " ".join(f"n={n} {fixed(steps, cost, look_s, n):.2f}" for n in range(1, DRAFT + 1))
        print(f"simulated tok/s: the stop rule {as_is:.2f}; guessing the next token from what followed "
              f"{learned:.2f} ({learned / as_is:.3f}x); fixed {fixed_speeds}; plain {1 / curve[1]:.2f}"
              if curve[1] else "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
