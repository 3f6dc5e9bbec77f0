"""Where adaptive speculation under-drafts, and why: its decisions next to what verification found.

    python tools/adaptive_trace.py --model T.gguf --draft D.gguf [--prompts heldout] [--category code]
        [--limit 2] [--max-tokens 64] [--threads N] [--exact] [--modes nofloor,adaptive] [--fresh]
        [--fixed 4] [--steps]

Each prompt runs, interleaved in one process, as a new conversation: with a fixed length
(``--fixed``, 4 by default: ``auto:4``, the fixed choice the issue compares with) and under the
adaptive policy with its decisions recorded (engine/decision_trace.py), without the floor
(``nofloor``, the policy before issue 27) and with it (``adaptive``), and with a pause that listens to
the target (``listen``, opt-in). The costs come from a
calibration at load, as on a fresh install (profiles go to a temporary folder, never the user's);
plain decoding runs beside them for reference.
Printed per run, then over all runs of a mode:

- speed: tokens/s, against ``auto:4`` run beside it, and tokens per verification step;
- acceptance: the calibrated chance the stop rule gave each token it weighed against how often such
  tokens were accepted (drafted tokens up to the first rejection, and the declined token that
  verification judges after a draft accepted whole). Predicted well below found: the drafter is
  unsure but right, and the rule under-drafts;
- costs: measured over predicted, for verification passes and drafter seconds (median), and the
  measured verification curve t(k)/t(1); a prediction far from 1 misprices every token;
- stops: why each draft ended short of 4 tokens (a token the rule did not take, a look it did not
  pay for, the draft model's end), and how often the token after such a draft was accepted anyway;
- pauses: steps paused, steps that skipped the look, plain steps that measure plain speed;
- with ``--steps``, every step: its state, the floor, drafted and accepted tokens, the rule's chance
  for each token it weighed (``*`` kept by the floor, ``x`` refused) and the window's speed-up.

Prompts are those of ``--prompts`` (a shipped set's name or a file); the second held-out set
(``heldout2``) is for benchmarks only, never for this diagnosis.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from localchat.engine.decision_trace import StepRecord
    from localchat.engine.engine import Engine

FIXED = 4
BINS = ((0.0, 0.3), (0.3, 0.6), (0.6, 0.8), (0.8, 0.95), (0.95, 1.01))


def judged(steps: Sequence[StepRecord]) -> list[tuple[float, float]]:
    """(predicted chance, verdict) of every token verification judged whose chance the rule weighed."""
    out: list[tuple[float, float]] = []
    for s in steps:
        takes = [d for d in s.decisions if d.kind == "take"]
        kept = [d for d in takes if d.kept][: s.drafted]
        for i, d in enumerate(kept):
            if i > s.accepted:
                break
            out.append((d.chance, 1.0 if i < s.accepted else 0.0))
        refused = [d for d in takes if not d.kept]
        if s.declined is not None and refused and s.accepted == s.drafted:
            out.append((refused[0].chance, s.declined[1]))
    return out


def stop_reason(s: StepRecord) -> str:
    if s.state != "draft":
        return s.state
    if not s.decisions:
        return "lookup draft" if s.source and "gram" in s.source else "no rule"
    last = s.decisions[-1]
    if not last.kept:
        return f"{last.kind} refused"
    return "drafter's end"


def report(name: str, steps: Sequence[StepRecord], tps: float, fixed_tps: float, tokens: int) -> None:
    drafting = [s for s in steps if s.state == "draft" and s.source]
    states = Counter(s.state for s in steps)
    print(f"  {name:9s} {tps:6.2f} tok/s = {tps / fixed_tps if fixed_tps else 0:4.2f}x auto:{FIXED};"
          f" {tokens / max(1, len(steps)):4.2f} tok/step; drafted/step "
          f"{statistics.fmean([s.drafted for s in drafting]) if drafting else 0:4.2f};"
          f" states {dict(states)}; floor>0 in {sum(1 for s in steps if s.floor)} steps;"
          f" sources {dict(Counter(s.source for s in steps if s.source))}")
    pairs = judged(drafting)
    row = []
    for lo, hi in BINS:
        inbin = [(q, y) for q, y in pairs if lo <= q < hi]
        if inbin:
            row.append(f"q {lo:.2f}-{min(hi, 1):.2f}: pred {statistics.fmean(q for q, _ in inbin):.2f} "
                       f"found {statistics.fmean(y for _, y in inbin):.2f} (n={len(inbin)})")
    print("    acceptance  " + "; ".join(row))
    ratios_v = [s.verify_s / s.predicted_verify_s for s in steps if s.predicted_verify_s]
    ratios_d = [s.draft_s / s.predicted_draft_s for s in drafting if s.predicted_draft_s]
    by_size: dict[int, list[float]] = {}
    for s in steps:
        by_size.setdefault(s.drafted + 1, []).append(s.verify_s)
    t1 = statistics.median(by_size[1]) if 1 in by_size else None
    curve = ", ".join(f"t({k})={statistics.median(v) / t1:.2f}" for k, v in sorted(by_size.items())
                      if t1 and k > 1)
    inside = sum(s.draft_s + s.verify_s for s in steps)
    total = tokens / tps if tps else 0.0
    print(f"    time        steps' own seconds {inside:.2f} of {total:.2f} s"
          f" ({inside / total if total else 0:.0%}): the rest is the drafter catching up, sampling, I/O")
    print(f"    costs       verify measured/predicted {statistics.median(ratios_v) if ratios_v else 0:.2f}"
          f" (n={len(ratios_v)}), drafter {statistics.median(ratios_d) if ratios_d else 0:.2f}"
          f" (n={len(ratios_d)}); t(1)={t1 * 1000 if t1 else 0:.0f} ms, {curve}")
    short = [s for s in steps if s.drafted < FIXED and (s.state != "draft" or s.source)]
    reasons = Counter(stop_reason(s) for s in short)
    next_hit = [s.declined[1] for s in short if s.declined is not None and s.accepted == s.drafted]
    floored = sum(1 for s in drafting for d in s.decisions if d.floor and d.kind == "take")
    print(f"    stops <{FIXED}   {len(short)} of {len(steps)} steps: {dict(reasons)}; the token after a "
          f"short "
          f"draft accepted whole was right {sum(next_hit):.0f}/{len(next_hit)}; tokens kept by the floor "
          f"{floored}")
    refused = [d for s in drafting for d in s.decisions if not d.kept and d.kind == "take"]
    if refused:
        print(f"    refused     take: chance {statistics.fmean(d.chance for d in refused):.2f}, all-chance "
              f"{statistics.fmean(d.all_chance for d in refused):.2f} against price "
              f"{statistics.fmean(d.value * d.seconds for d in refused):.2f} tokens")
    reasons_paused = {s.reason for s in steps if s.reason}
    if reasons_paused:
        print(f"    paused      {'; '.join(sorted(reasons_paused))}")


def print_steps(steps: Sequence[StepRecord]) -> None:
    """One line per step: state, floor, drafted/accepted, the chances weighed, the window's gain."""
    for s in steps:
        marks = " ".join(f"{d.chance:.2f}{'*' if d.floor else '' if d.kept else 'x'}"
                         for d in s.decisions if d.kind == "take")
        gain = f"{s.gain:.2f}" if s.gain is not None else "-"
        print(f"      {s.index:3d} {s.state:6s} floor {s.floor} {s.accepted}/{s.drafted} gain {gain}"
              f"  {marks}")


def run(eng: Engine, prompt: str, mode: str, max_tokens: int) -> tuple[float, int, list[StepRecord], float]:
    from dataclasses import replace

    from localchat.bench.modes import bench_mode
    from localchat.engine.decision_trace import DecisionTrace
    from localchat.engine.types import ChatMessage, GenerationRequest, SamplingParams

    adaptive = "adaptive" if mode in ("adaptive", "model") else f"adaptive-{mode}"  # bench_mode's variants
    spec = (bench_mode("auto", FIXED).speculation if mode == "fixed"
            else bench_mode("off").speculation if mode == "off"
            else bench_mode(adaptive, FIXED).speculation)
    if mode == "model":  # the draft model alone, no n-gram lookup
        from localchat.engine.types import DrafterKind
        spec = replace(spec, drafter=DrafterKind.MODEL)
    eng.reset()
    trace = DecisionTrace()
    eng.decision_trace = trace
    req = GenerationRequest(messages=(ChatMessage("user", prompt),), max_tokens=max_tokens,
                            sampling=SamplingParams(temperature=0.0), speculation=spec,
                            session=f"trace:{mode}:{id(trace)}")
    res = eng.generate(req)
    eng.decision_trace = None
    return res.stats.tokens_per_s, res.stats.generated_tokens, trace.steps, res.stats.acceptance_length


def main() -> None:
    global FIXED
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--prompts", default="heldout", help="a shipped set's name or a JSON Lines file")
    ap.add_argument("--category", action="append")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--exact", action="store_true", help="identical text with a quantized target")
    ap.add_argument("--modes", default="nofloor,adaptive",
                    help="adaptive runs beside auto:4: nofloor, previous (the last release's), "
                         "listen (a pause that listens to the target), earlyalways (any clear loss in a "
                         "reply's first steps pauses at once), earlynever, earlycost (skipped looks to the "
                         "warm-up's end), stickyskip (a look that pays does not end skipped looks), "
                         "model (the draft model alone), adaptive")
    ap.add_argument("--fixed", type=int, default=FIXED, help="the fixed length run beside (auto:N)")
    ap.add_argument("--steps", action="store_true", help="print every step of the adaptive runs")
    ap.add_argument("--fresh", action="store_true",
                    help="no calibration at load: costs learnt in the replies, as where a calibration "
                         "at load is declined as disturbed (`localchat bench --fresh` calibrates at load "
                         "and ignores a saved profile)")
    args = ap.parse_args()
    FIXED = args.fixed
    os.environ.setdefault("LOCALCHAT_PROFILES_DIR", tempfile.mkdtemp())  # never the user's profiles
    from localchat.bench.prompts import prompts_from, select
    from localchat.engine.engine import Engine
    from localchat.engine.types import EngineConfig

    modes = ["fixed", *[m.strip() for m in args.modes.split(",") if m.strip()], "off"]
    prompts = [p for p in select(prompts_from(args.prompts), args.category, args.limit) if not p.schema]
    cfg = EngineConfig(args.model, draft_path=args.draft, n_ctx=2048, use_profile=False,
                       calibrate=not args.fresh, state_memory_bytes=0, n_threads=args.threads,
                       exact=args.exact)
    every: dict[str, list[StepRecord]] = {m: [] for m in modes}
    totals: dict[str, list[float]] = {m: [0.0, 0.0] for m in modes}  # tokens, seconds
    with Engine(cfg) as eng:
        if eng.model_drafter is None:
            raise SystemExit(f"the draft model did not load: {eng.draft_problem}")
        run(eng, prompts[0].prompt, "fixed", 8)  # page the weights in
        for i, p in enumerate(prompts):
            order = modes[i % len(modes):] + modes[: i % len(modes)]
            got = {m: run(eng, p.prompt, m, args.max_tokens) for m in order}
            fixed_tps = got["fixed"][0]
            print(f"{p.category:8s} {p.id}: auto:{FIXED} {fixed_tps:.2f} tok/s, acceptance length "
                  f"{got['fixed'][3]:.2f}; plain {got['off'][0]:.2f} tok/s", flush=True)
            for m in modes[1:-1]:
                tps, tokens, steps, _ = got[m]
                report(m, steps, tps, fixed_tps, tokens)
                if args.steps:
                    print_steps(steps)
                every[m] += steps
            for m in modes:
                tps, tokens, _, _ = got[m]
                totals[m][0] += tokens
                totals[m][1] += tokens / tps if tps else 0.0
    print("\nall prompts")
    fixed_rate = totals["fixed"][0] / max(totals["fixed"][1], 1e-9)
    plain_rate = totals["off"][0] / max(totals["off"][1], 1e-9)
    print(f"  plain {plain_rate:.2f} tok/s, auto:{FIXED} {fixed_rate:.2f}")
    for m in modes[1:-1]:
        rate = totals[m][0] / max(totals[m][1], 1e-9)
        report(m, every[m], rate, fixed_rate, int(totals[m][0]))


if __name__ == "__main__":
    main()
