"""Benchmark results as rows, JSON and CSV; prompts typed by the user. No widgets here."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from localchat.engine.bench import BenchError, BenchPrompt, BenchRecord, BenchReport, parse_prompts
from localchat.settings import folders


def typed_prompts(text: str) -> list[BenchPrompt]:
    """Prompts typed or pasted by the user: JSON Lines if every line is an object, else one per line."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise BenchError("Type at least one prompt, one per line.")
    if all(line.lstrip().startswith("{") for line in lines):
        return parse_prompts(text, "The typed prompts")
    return [BenchPrompt(f"typed-{i}", "typed", line.strip()) for i, line in enumerate(lines, start=1)]


def limit_per_category(prompts: Sequence[BenchPrompt], limit: int) -> list[BenchPrompt]:
    if limit <= 0:
        return list(prompts)
    kept: dict[str, int] = {}
    out: list[BenchPrompt] = []
    for p in prompts:
        if kept.get(p.category, 0) < limit:
            kept[p.category] = kept.get(p.category, 0) + 1
            out.append(p)
    return out


@dataclass(frozen=True)
class ResultRow:
    record: BenchRecord
    speedup: float | None  # tokens/s over the same prompt's "off" run


def result_rows(records: Sequence[BenchRecord]) -> list[ResultRow]:
    off = {r.id: r.tokens_per_s for r in records if r.mode == "off"}
    rows = []
    for r in records:
        base = off.get(r.id)
        rows.append(ResultRow(r, r.tokens_per_s / base if base else None))
    return rows


def same_text(record: BenchRecord) -> str:
    if record.matches_off is None:
        return "—"
    return "yes" if record.matches_off else f"no (from token {record.first_mismatch})"


def report_json(report: BenchReport, meta: dict[str, object]) -> dict[str, object]:
    out: dict[str, object] = dict(meta)
    out["records"] = [
        {**r.as_json(), "speedup_vs_off": None if row.speedup is None else round(row.speedup, 3)}
        for row in result_rows(report.records)
        for r in (row.record,)
    ]
    out["summary"] = [s.as_json() for s in report.summary()]
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


def default_data_dir() -> Path:
    return folders.data_dir()
