"""Each run's time modelled on one cost curve measured in the same run: the policies' decisions compared
without the machine's noise.

A shared or virtual machine changes speed by 10-30% from one minute to the next, so two runs of plain
decoding of one prompt, a minute apart, can differ by more than the few percent that separate two draft
policies; and the oracle (bench/oracle.py), the fastest of several fixed choices per prompt, is then the
luckiest of several noisy runs. Greedy decoding makes every run's steps repeatable, though: which tokens
were drafted, how many were verified per pass, how many drafter passes were paid. So a run's time can
also be computed from its steps on one curve measured in the same run:

    modelled seconds = sum over verification passes of t(batch size) + drafter passes * drafter pass
                       + the drafter's measured catch-up batches

where ``t`` and the drafter's pass are this machine's (the fastest undisturbed passes of a calibration
at the start and the end of the run, ``Engine.measure_costs``). The figure leaves out what every mode
pays alike per token (sampling, streaming) and a grammar's work; it keeps what separates the policies:
how long they draft and how often they look. The measured figures stay the benchmark's verdict; the
modelled ones say whether a difference between them is the policy or the machine.

Verification batch sizes are the batches the target ran (``GenerationStats.verify_batches``: a draft's
batch padded to a size this machine runs faster at that size, a grammar's forced tokens in it); for
statistics kept before those were recorded, from ``drafted_per_position`` (a draft of k tokens is a pass
of k + 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from localchat.catalog.starter_choice import pass_seconds
from localchat.engine.stats import GenerationStats
from localchat.settings.options import DRAFT_TOKENS_MAX

if TYPE_CHECKING:  # report.py writes modelled figures; this module needs only the type
    from localchat.bench.report import BenchRecord

# Every batch a draft makes (1 + up to DRAFT_TOKENS_MAX), and lookups' longer ones; plain speed twice.
MEASURED_SIZES = (*range(1, DRAFT_TOKENS_MAX + 2), 12, 2 * DRAFT_TOKENS_MAX + 1, 1)
MEASURE_BUDGET_S = 6.0


@dataclass(frozen=True)
class CostCurve:
    """This machine's verification seconds by batch size and the drafter's seconds per pass."""

    verify_s: Mapping[int, float]
    pass_s: float

    def t(self, batch: int) -> float:
        """Seconds of a verification pass of ``batch`` tokens: measured, else on the line between the
        nearest measured sizes (beyond the largest, along its last segment; starter_choice.pass_seconds,
        as the machine measurement predicts a pass)."""
        return pass_seconds(self.verify_s, batch)

    def as_json(self) -> dict[str, object]:
        return {"verify_s": {str(b): round(s, 6) for b, s in sorted(self.verify_s.items())},
                "draft_pass_s": round(self.pass_s, 6)}


def merged(curves: Sequence[tuple[Mapping[int, float], float | None]]) -> CostCurve | None:
    """One curve from several measurements, (verify seconds by batch, drafter seconds per pass): the
    fastest pass of each size (another program only ever slows a pass down); None without a complete
    measurement (every size, and the drafter's pass)."""
    whole = [(v, p) for v, p in curves if p is not None and v]
    if not whole:
        return None
    sizes = set.intersection(*(set(v) for v, _ in whole))
    if 1 not in sizes:
        return None
    verify = {b: min(v[b] for v, _ in whole) for b in sorted(sizes)}
    return CostCurve(verify, min(p for _, p in whole if p is not None))


def batch_counts(stats: GenerationStats) -> dict[int, int]:
    """Verification passes by batch size: as the target ran them, where recorded; else a draft of k
    tokens is a pass of k + 1, and a pass without a draft, of 1."""
    if stats.verify_batches:
        return {size: n for size, n in enumerate(stats.verify_batches, start=1) if n > 0}
    dpp = stats.drafted_per_position
    counts: dict[int, int] = {}
    plain = stats.verify_passes - (dpp[0] if dpp else 0)
    if plain > 0:
        counts[1] = plain
    for k in range(1, len(dpp) + 1):
        n = dpp[k - 1] - (dpp[k] if k < len(dpp) else 0)
        if n > 0:
            counts[k + 1] = n
    return counts


def modelled_seconds(stats: GenerationStats, curve: CostCurve) -> float:
    """The run's time on ``curve``: its verification passes, its drafter passes and its measured
    catch-up batches (see the module's docstring). The first token (the prompt's pass) is not counted,
    as generation time does not count it."""
    verify = sum(n * curve.t(b) for b, n in batch_counts(stats).items())
    return verify + stats.draft_passes * curve.pass_s + stats.catch_up_seconds


def modelled_records(records: Sequence[BenchRecord], curve: CostCurve) -> list[BenchRecord]:
    """``records`` with their seconds and tokens/s modelled on ``curve`` (runs with no tokens as they
    are), for the oracle and the summaries to read as they read the measured ones."""
    out = []
    for r in records:
        seconds = modelled_seconds(r.stats, curve) if r.tokens > 0 else 0.0
        out.append(replace(r, seconds=seconds, tokens_per_s=r.tokens / seconds) if seconds > 0 else r)
    return out
