"""The oracle: for each prompt, the best fixed choice in hindsight (off, or a fixed draft length), and
how close the adaptive policy came to it (``adaptive / oracle``).

The adaptive policy chooses its draft length while it writes; the oracle sees every fixed length's
finished run of the same prompt and picks the fastest. A category's ratio compares total times over
the same prompts (oracle seconds over adaptive seconds at equal token counts), so a long reply weighs
as much as the time it takes. Only the bench's own engine is judged: modes run on a route
(``MODE@api``, bench/modes.py) are left out.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from localchat.bench.modes import ROUTE_MARK

if TYPE_CHECKING:  # report.py writes the oracle into the report; this module needs only the type
    from localchat.bench.report import BenchRecord

ADAPTIVE = "adaptive"


@dataclass(frozen=True)
class OracleRow:
    id: str
    category: str
    best_mode: str  # the fastest fixed choice for this prompt ("off", "draft:4", ...)
    best_tokens_per_s: float
    adaptive_tokens_per_s: float

    @property
    def ratio(self) -> float:
        return self.adaptive_tokens_per_s / self.best_tokens_per_s if self.best_tokens_per_s else 0.0

    def as_json(self) -> dict[str, object]:
        return {"id": self.id, "category": self.category, "best_mode": self.best_mode,
                "best_tokens_per_s": round(self.best_tokens_per_s, 3),
                "adaptive_tokens_per_s": round(self.adaptive_tokens_per_s, 3),
                "adaptive_vs_oracle": round(self.ratio, 3)}


@dataclass(frozen=True)
class OracleSummary:
    category: str  # or "all"
    ratio: float  # adaptive / oracle over the category's prompts
    beats_every_fixed: bool  # adaptive's total time is no worse than any single fixed choice's
    best_fixed_mode: str  # the single fixed choice that was fastest over the whole category

    def as_json(self) -> dict[str, object]:
        return {"category": self.category, "adaptive_vs_oracle": round(self.ratio, 3),
                "beats_every_fixed": self.beats_every_fixed, "best_fixed_mode": self.best_fixed_mode}


def oracle_rows(records: Sequence[BenchRecord], adaptive: str = ADAPTIVE) -> list[OracleRow]:
    """One row per prompt that ran adaptive and at least one fixed choice."""
    records = _unrouted(records)
    rows: list[OracleRow] = []
    for pid in dict.fromkeys(r.id for r in records):
        mine = [r for r in records if r.id == pid]
        chosen = [r for r in mine if r.mode == adaptive]
        fixed = [r for r in mine if not _adaptive(r.mode) and r.tokens_per_s > 0]
        if not chosen or not fixed:
            continue
        # Several repetitions of one mode pool their tokens and time.
        by_mode: dict[str, tuple[int, float]] = {}
        for r in fixed:
            tokens, seconds = by_mode.get(r.mode, (0, 0.0))
            by_mode[r.mode] = (tokens + r.tokens, seconds + r.seconds)
        best_mode, (tokens, seconds) = max(by_mode.items(), key=lambda kv: kv[1][0] / max(kv[1][1], 1e-9))
        a_tokens = sum(r.tokens for r in chosen)
        a_seconds = sum(r.seconds for r in chosen)
        rows.append(OracleRow(pid, mine[0].category, best_mode, tokens / max(seconds, 1e-9),
                              a_tokens / max(a_seconds, 1e-9)))
    return rows


def _adaptive(mode: str) -> bool:
    """An adaptive mode (``adaptive`` or one of ``modes.ADAPTIVE_VARIANTS``): never a fixed choice for
    the oracle."""
    return mode.startswith(ADAPTIVE)


def _unrouted(records: Sequence[BenchRecord]) -> list[BenchRecord]:
    return [r for r in records if ROUTE_MARK not in r.mode]


def oracle_summary(records: Sequence[BenchRecord], adaptive: str = ADAPTIVE) -> list[OracleSummary]:
    records = _unrouted(records)
    rows = oracle_rows(records, adaptive)
    out: list[OracleSummary] = []
    cats = sorted({r.category for r in rows})
    for cat in [*cats, "all"]:
        chosen = [r for r in rows if cat == "all" or r.category == cat]
        if not chosen:
            continue
        ids = {r.id for r in chosen}
        recs = [r for r in records if r.id in ids]
        oracle = sum(1 / r.best_tokens_per_s for r in chosen) / len(chosen)
        adapt = sum(1 / r.adaptive_tokens_per_s for r in chosen) / len(chosen)
        fixed_modes = [m for m in dict.fromkeys(r.mode for r in recs) if not _adaptive(m)]
        fixed_costs = {m: c for m in fixed_modes if (c := _seconds_per_token(recs, ids, m)) is not None}
        best_fixed = min(fixed_costs, key=lambda m: fixed_costs[m]) if fixed_costs else "-"
        beats = all(adapt <= c for c in fixed_costs.values())
        out.append(OracleSummary(cat, oracle / adapt if adapt else 0.0, beats, best_fixed))
    return out


def _seconds_per_token(records: Sequence[BenchRecord], ids: Collection[str], mode: str) -> float | None:
    """Mean seconds per token of ``mode`` over the prompts ``ids``, each prompt weighing alike; None if
    one of them did not run in that mode."""
    per_prompt = []
    for pid in ids:
        runs = [r for r in records if r.id == pid and r.mode == mode]
        if not runs:
            return None
        per_prompt.append(sum(r.seconds for r in runs) / max(1, sum(r.tokens for r in runs)))
    return sum(per_prompt) / len(per_prompt)
