"""bench.report and bench.prompts: the one report format (JSON and CSV), the summary, prompt selection."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from localchat.bench.modes import bench_mode
from localchat.bench.prompts import BenchError, BenchPrompt, parse_prompts, select, typed_prompts
from localchat.bench.report import (
    CSV_FIELDS,
    SCHEMA,
    BenchRecord,
    BenchReport,
    first_mismatch,
    report_json,
    run_meta,
    write_csv,
)
from localchat.engine.stats import GenerationStats


def rec(pid: str, category: str, mode: str, tps: float, matches: bool | None = None) -> BenchRecord:
    spec = mode != "off"
    stats = GenerationStats(generated_tokens=40, generation_seconds=40 / tps,
                            verify_passes=20 if spec else 40,
                            drafted=30 if spec else 0, accepted=20 if spec else 0,
                            drafted_per_position=(10, 10, 10) if spec else (),
                            accepted_per_position=(9, 7, 4) if spec else ())
    return BenchRecord(pid, category, mode, 40, 40 / tps, tps, stats.acceptance_length, stats.acceptance_rate,
                       matches, None if matches in (None, True) else 3, stats, "text")


REPORT = BenchReport(
    [rec("a", "code", "off", 10.0), rec("a", "code", "draft", 15.0, True),
     rec("b", "chat", "off", 8.0), rec("b", "chat", "draft", 6.0, False)],
    skipped=[("c", "The prompt is longer than the context.")],
    peak_rss_mb=512.34,
)
PROMPTS = [BenchPrompt("a", "code", "write"), BenchPrompt("b", "chat", "hi")]
META = run_meta(target="/m/t.gguf", draft="/m/d.gguf", max_tokens=64, draft_tokens=4,
                modes=[bench_mode("off"), bench_mode("draft")], prompts=PROMPTS, backend="CPU", threads=2)


def test_summary_gives_speed_ups_against_off_per_category_and_overall() -> None:
    rows = {(r.category, r.mode): r for r in REPORT.summary()}
    assert rows[("code", "draft")].speedup_vs_off == pytest.approx(1.5)
    assert rows[("chat", "draft")].speedup_vs_off == pytest.approx(0.75)
    assert rows[("code", "off")].speedup_vs_off == pytest.approx(1.0)
    assert rows[("all", "draft")].matches_off == "1/2" and rows[("all", "off")].matches_off == "-"
    # Overall: 80 tokens in 80/15 + 40/6 s against 80 tokens in 4 + 5 s.
    assert rows[("all", "draft")].speedup_vs_off == pytest.approx((80 / (40 / 15 + 40 / 6)) / (80 / 9))


def test_report_json_has_one_schema_with_run_facts_records_summary_and_skips() -> None:
    data = json.loads(json.dumps(report_json(REPORT, META, complete=False)))
    assert data["schema"] == SCHEMA and data["complete"] is False
    assert data["target"] == "/m/t.gguf" and data["backend"] == "CPU" and data["threads"] == 2
    assert data["modes"] == ["off", "draft"] and data["prompts"][0] == {"id": "a", "category": "code",
                                                                         "prompt": "write"}
    assert data["peak_rss_mb"] == 512.3
    assert [r["speedup_vs_off"] for r in data["records"]] == [1.0, 1.5, 1.0, 0.75]
    assert data["records"][1]["acceptance_rate_by_position"] == [0.9, 0.7, 0.4]
    assert data["records"][3]["first_mismatch"] == 3
    assert data["skipped"] == [{"id": "c", "reason": "The prompt is longer than the context."}]
    assert {"category", "mode", "tokens_per_s", "speedup_vs_off"} <= set(data["summary"][0])


def test_csv_holds_one_row_per_record_with_the_json_field_names(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    write_csv(REPORT, path)
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == CSV_FIELDS and len(rows) == 4
    assert rows[1]["speedup_vs_off"] == "1.5"
    assert rows[1]["acceptance_rate_by_position"] == "0.900 0.700 0.400"
    assert rows[0]["matches_off"] == "" and rows[3]["matches_off"] == "False"


def test_first_mismatch() -> None:
    assert first_mismatch([1, 2, 3], [1, 2, 3]) is None
    assert first_mismatch([1, 2, 3], [1, 9, 3]) == 1
    assert first_mismatch([1, 2], [1, 2, 3]) == 2


def test_prompt_selection_and_typed_prompts() -> None:
    prompts = [BenchPrompt(str(i), cat, "p") for i, cat in enumerate(["a", "a", "a", "b", "b", "c"])]
    assert [p.id for p in select(prompts, ["a", "b"], 2)] == ["0", "1", "3", "4"]
    assert [p.id for p in select(prompts, None, 0)] == [p.id for p in prompts]
    assert [p.prompt for p in typed_prompts("one\n\n two \n")] == ["one", "two"]
    with pytest.raises(BenchError, match="line 2"):
        parse_prompts('{"prompt": "x"}\n{"id": 1}\n', "f.jsonl")
    with pytest.raises(BenchError, match="used twice"):
        parse_prompts('{"id": "x", "prompt": "a"}\n{"id": "x", "prompt": "b"}\n', "f.jsonl")


def test_the_oracle_picks_the_best_fixed_choice_per_prompt_and_compares_adaptive() -> None:
    from localchat.bench.oracle import oracle_rows, oracle_summary

    records = [rec("a", "code", "off", 10.0), rec("a", "code", "auto:2", 14.0, True),
               rec("a", "code", "auto:4", 16.0, True), rec("a", "code", "adaptive", 15.2, True),
               rec("b", "chat", "off", 10.0), rec("b", "chat", "auto:2", 9.0, True),
               rec("b", "chat", "auto:4", 7.0, False), rec("b", "chat", "adaptive", 10.0, True)]
    rows = {r.id: r for r in oracle_rows(records)}
    assert rows["a"].best_mode == "auto:4" and rows["a"].ratio == pytest.approx(0.95)
    assert rows["b"].best_mode == "off" and rows["b"].ratio == pytest.approx(1.0)
    summary = {s.category: s for s in oracle_summary(records)}
    assert summary["code"].ratio == pytest.approx(0.95) and not summary["code"].beats_every_fixed
    assert summary["chat"].ratio == pytest.approx(1.0) and summary["chat"].beats_every_fixed
    # Over both: each prompt's oracle time (1/16 + 1/10) against adaptive's (1/15.2 + 1/10).
    assert summary["all"].ratio == pytest.approx((1 / 16 + 1 / 10) / (1 / 15.2 + 1 / 10))
    # No single fixed choice is best on both prompts: adaptive beats every one of them over the suite.
    assert summary["all"].beats_every_fixed and summary["all"].best_fixed_mode == "auto:2"
    data = report_json(BenchReport(records), META)
    assert data["oracle"][-1]["category"] == "all" and len(data["oracle_prompts"]) == 2


def test_the_oracle_never_counts_an_adaptive_mode_as_a_fixed_choice() -> None:
    from localchat.bench.oracle import oracle_rows, oracle_summary

    records = [rec("a", "code", "off", 10.0), rec("a", "code", "auto:4", 14.0),
               rec("a", "code", "adaptive", 13.0), rec("a", "code", "adaptive-nofloor", 20.0)]
    (row,) = oracle_rows(records)
    assert row.best_mode == "auto:4" and row.ratio == pytest.approx(13 / 14)
    assert oracle_summary(records)[0].best_fixed_mode == "auto:4"
    (old,) = oracle_rows(records, "adaptive-nofloor")
    assert old.best_mode == "auto:4" and old.ratio == pytest.approx(20 / 14)
