"""A benchmark run's records and summary, and the ONE report format written by the CLI and the app.

The JSON report (schema ``localchat-bench/1``, documented in docs/BENCHMARKS.md)::

    {"schema": "localchat-bench/1", "complete": true,
     "created": ISO time, "target": path, "draft": path or null, "backend": "CPU", "threads": 2,
     "max_tokens": 128, "draft_tokens": 4, "modes": [...], "prompts": [{id, category, prompt}],
     "peak_rss_mb": MiB of the process that ran the models,
     "records": [{id, category, mode, tokens, seconds, tokens_per_s, speedup_vs_off,
                  acceptance_length, acceptance_rate, acceptance_rate_by_position,
                  matches_off, first_mismatch, forced_tokens, grammar_cut_drafts,
                  grammar_masked_tokens, grammar_seconds, verify_passes, draft_passes}],
     "summary": [{category, mode, tokens_per_s, speedup_vs_off, acceptance_length,
                  acceptance_rate, matches_off, forced_share, grammar_share}],
     "skipped": [{id, reason}],
     "oracle": [{category, adaptive_vs_oracle, beats_every_fixed, best_fixed_mode}]  (runs with
               adaptive and fixed modes only; see bench/oracle.py)
     "oracle_prompts": [{id, category, best_mode, best_tokens_per_s, adaptive_tokens_per_s,
                         adaptive_vs_oracle}],
     "costs": {verify_s: {batch: seconds}, draft_pass_s}  (the curve measured at the start and end of
              the run; each record then has "modelled_seconds", and "oracle_modelled" is "oracle" on
              them: bench/modelled.py),
     "oracle_modelled": [as "oracle"],
     "routes": [{route: "api", client: "openai", server_tokens_per_s: {mode: x},
                 first_turn_ttft_ms, follow_up_ttft_ms},
                {route: "rpc+5ms", delay_ms, round_trip_ms}]  (``localchat bench --through-api`` or
               ``--link-latency`` only: a mode measured on a route is labelled MODE@ROUTE, and its
               speedup_vs_off and matches_off are against off@ROUTE; see bench/modes.py)}

The CSV export holds the records, one row each, with the same field names.
"""

from __future__ import annotations

import csv
import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from localchat.bench.modelled import CostCurve, modelled_records, modelled_seconds
from localchat.bench.modes import BenchMode, is_off, off_labels
from localchat.bench.oracle import oracle_rows, oracle_summary
from localchat.bench.prompts import BenchPrompt
from localchat.engine.stats import GenerationStats, combine

SCHEMA = "localchat-bench/1"


@dataclass(frozen=True)
class BenchRecord:
    id: str
    category: str
    mode: str
    tokens: int
    seconds: float
    tokens_per_s: float
    acceptance_length: float
    acceptance_rate: float
    matches_off: bool | None
    # Index of the first token that differs from the off run; None where the texts match, or where
    # only the texts are known (a reply through the API) and they differ.
    first_mismatch: int | None
    stats: GenerationStats
    text: str
    token_ids: tuple[int, ...] = ()

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "category": self.category,
            "mode": self.mode,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 4),
            "tokens_per_s": round(self.tokens_per_s, 3),
            "acceptance_length": round(self.acceptance_length, 3),
            "acceptance_rate": round(self.acceptance_rate, 3),
            "acceptance_rate_by_position": [round(x, 3) for x in self.stats.acceptance_rate_by_position],
            "matches_off": self.matches_off,
            "first_mismatch": self.first_mismatch,
            "forced_tokens": self.stats.forced_tokens,
            "grammar_cut_drafts": self.stats.grammar_cut_drafts,
            "grammar_masked_tokens": self.stats.grammar_masked_tokens,
            "grammar_seconds": round(self.stats.grammar_seconds, 4),
            "verify_passes": self.stats.verify_passes,
            "draft_passes": self.stats.draft_passes,
        }


@dataclass(frozen=True)
class SummaryRow:
    category: str
    mode: str
    tokens_per_s: float
    speedup_vs_off: float | None
    acceptance_length: float
    acceptance_rate: float
    matches_off: str  # "5/5"
    forced_share: float = 0.0  # of the generated tokens, forced by a grammar (prompts with a schema)
    grammar_share: float = 0.0  # of generation time, grammar work

    def as_json(self) -> dict[str, object]:
        return {
            "category": self.category,
            "mode": self.mode,
            "tokens_per_s": round(self.tokens_per_s, 3),
            "speedup_vs_off": None if self.speedup_vs_off is None else round(self.speedup_vs_off, 3),
            "acceptance_length": round(self.acceptance_length, 3),
            "acceptance_rate": round(self.acceptance_rate, 3),
            "matches_off": self.matches_off,
            "forced_share": round(self.forced_share, 4),
            "grammar_share": round(self.grammar_share, 4),
        }


@dataclass
class BenchReport:
    records: list[BenchRecord] = field(default_factory=list)
    # (prompt id, why): prompts the engine could not run (longer than the context...); the rest go on.
    skipped: list[tuple[str, str]] = field(default_factory=list)
    # Of the benchmark process, which ran the models (a route's engine process aside); None if unknown.
    peak_rss_mb: float | None = None
    # This machine's verification curve and drafter pass, measured in the run (bench/modelled.py); None
    # where the engine could not measure them (no draft model, a route, a machine too busy).
    costs: CostCurve | None = None

    def summary(self) -> list[SummaryRow]:
        rows: list[SummaryRow] = []
        cats = sorted({r.category for r in self.records})
        modes = list(dict.fromkeys(r.mode for r in self.records))
        for cat in [*cats, "all"]:
            rates: dict[str, float] = {}
            start = len(rows)
            for mode in modes:
                recs = [r for r in self.records if r.mode == mode and (cat == "all" or r.category == cat)]
                if not recs:
                    continue
                s = combine([r.stats for r in recs])
                rates[mode] = s.tokens_per_s
                compared = [r for r in recs if r.matches_off is not None]
                same = f"{sum(1 for r in compared if r.matches_off)}/{len(compared)}" if compared else "-"
                rows.append(SummaryRow(cat, mode, s.tokens_per_s, None, s.acceptance_length,
                                       s.acceptance_rate, same, s.forced_share, s.grammar_share))
            # Speed-up against plain decoding of the same category, route and fast-forward, same run.
            for i in range(start, len(rows)):
                off_tps = next((rates[o] for o in off_labels(rows[i].mode) if o in rates), None)
                if off_tps:
                    rows[i] = replace(rows[i], speedup_vs_off=rows[i].tokens_per_s / off_tps)
        return rows


def first_mismatch(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The index of the first token that differs (None: the same tokens)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


@dataclass(frozen=True)
class ResultRow:
    record: BenchRecord
    speedup: float | None  # tokens/s over the same prompt's "off" run on the same route


def result_rows(records: Sequence[BenchRecord]) -> list[ResultRow]:
    off = {(r.id, r.mode): r.tokens_per_s for r in records if is_off(r.mode)}
    rows = []
    for r in records:
        base = next((off[(r.id, o)] for o in off_labels(r.mode) if (r.id, o) in off), None)
        rows.append(ResultRow(r, r.tokens_per_s / base if base else None))
    return rows


def same_text(record: BenchRecord) -> str:
    if record.matches_off is None:
        return "—"
    if record.matches_off:
        return "yes"
    return "no" if record.first_mismatch is None else f"no (from token {record.first_mismatch})"


def run_meta(
    *,
    target: str,
    draft: str | None,
    max_tokens: int,
    draft_tokens: int,
    modes: Sequence[BenchMode],
    prompts: Sequence[BenchPrompt],
    backend: str | None = None,
    threads: int | None = None,
) -> dict[str, object]:
    """What a report says about the run that made it (the same keys from the CLI and the app)."""
    return {
        "created": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "target": target,
        "draft": draft,
        "backend": backend,
        "threads": threads,
        "max_tokens": max_tokens,
        "draft_tokens": draft_tokens,
        "modes": [m.name for m in modes],
        "prompts": [{"id": p.id, "category": p.category, "prompt": p.prompt} for p in prompts],
    }


def report_json(report: BenchReport, meta: dict[str, object], *, complete: bool = True) -> dict[str, object]:
    """The report in the one JSON schema (``SCHEMA``, see the module docstring)."""
    out: dict[str, object] = {"schema": SCHEMA, "complete": complete, **meta}
    out["peak_rss_mb"] = None if report.peak_rss_mb is None else round(report.peak_rss_mb, 1)
    costs = report.costs
    records: list[dict[str, object]] = []
    for row in result_rows(report.records):
        speedup = None if row.speedup is None else round(row.speedup, 3)
        data = {**row.record.as_json(), "speedup_vs_off": speedup}
        if costs is not None:
            data["modelled_seconds"] = round(modelled_seconds(row.record.stats, costs), 4)
        records.append(data)
    out["records"] = records
    out["summary"] = [s.as_json() for s in report.summary()]
    out["skipped"] = [{"id": pid, "reason": why} for pid, why in report.skipped]
    rows = oracle_rows(report.records)
    if rows:
        out["oracle"] = [s.as_json() for s in oracle_summary(report.records)]
        out["oracle_prompts"] = [r.as_json() for r in rows]
    if costs is not None:
        out["costs"] = costs.as_json()
        if rows:
            out["oracle_modelled"] = [s.as_json() for s in oracle_summary(modelled_records(report.records,
                                                                                             costs))]
    return out


CSV_FIELDS = (
    "id",
    "category",
    "mode",
    "tokens",
    "seconds",
    "tokens_per_s",
    "speedup_vs_off",
    "acceptance_length",
    "acceptance_rate",
    "acceptance_rate_by_position",
    "matches_off",
    "first_mismatch",
)


def write_csv(report: BenchReport, path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for row in result_rows(report.records):
            data = row.record.as_json()
            data["speedup_vs_off"] = "" if row.speedup is None else round(row.speedup, 3)
            data["acceptance_rate_by_position"] = " ".join(
                f"{x:.3f}" for x in row.record.stats.acceptance_rate_by_position
            )
            writer.writerow({k: "" if data.get(k) is None else data[k] for k in CSV_FIELDS})
