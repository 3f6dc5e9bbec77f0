"""bench.modelled: each run's time from its steps on one cost curve measured in the run; the runner
measures the curve and the report models every run on it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from localchat.bench.modelled import (
    MEASURED_SIZES,
    CostCurve,
    batch_counts,
    merged,
    modelled_records,
    modelled_seconds,
)
from localchat.bench.modes import bench_mode
from localchat.bench.prompts import BenchPrompt
from localchat.bench.report import report_json
from localchat.bench.runner import measure_costs, run_bench
from localchat.engine.errors import EngineError
from localchat.engine.profile import CalibrationReport
from localchat.engine.stats import GenerationStats, StatsRecorder, combine
from localchat.engine.types import (
    FinishReason,
    GenerationRequest,
    GenerationResult,
    SpeculationState,
    TokenEvent,
)
from tests.bench.test_report import rec

CURVE = CostCurve({1: 0.10, 2: 0.16, 4: 0.20, 8: 0.28}, 0.02)


def test_batch_counts_read_each_pass_from_the_drafts_per_position() -> None:
    r = StatsRecorder(verify_passes=5)
    r.record_draft(3, 3)
    r.record_draft(1, 0)
    r.record_draft(3, 1)
    # Two passes without a draft (batch 1), one draft of 1 token (batch 2), two of 3 (batch 4).
    assert batch_counts(r.snapshot()) == {1: 2, 2: 1, 4: 2}
    assert batch_counts(GenerationStats(verify_passes=7)) == {1: 7}


def test_batch_counts_read_the_batches_the_target_ran_where_recorded() -> None:
    """A draft of 3 tokens verified in a batch padded to 8 (a size this machine runs faster): a pass of 8."""
    r = StatsRecorder(verify_passes=3)
    r.record_draft(3, 3)
    r.record_draft(3, 1)
    for batch in (1, 8, 4):
        r.record_pass(batch)
    stats = r.snapshot()
    assert stats.verify_batches == (1, 0, 0, 1, 0, 0, 0, 1)
    assert batch_counts(stats) == {1: 1, 4: 1, 8: 1}
    assert modelled_seconds(stats, CURVE) == pytest.approx(0.10 + 0.20 + 0.28)
    both = combine([stats, StatsRecorder(verify_passes=1).snapshot()])
    assert both.verify_batches == stats.verify_batches  # a reply kept before they were recorded adds none


def test_the_curve_is_measured_where_it_can_be_and_on_a_line_between_sizes_elsewhere() -> None:
    assert CURVE.t(1) == pytest.approx(0.10)
    assert CURVE.t(3) == pytest.approx(0.18)  # halfway from 2 to 4
    assert CURVE.t(6) == pytest.approx(0.24)
    assert CURVE.t(12) == pytest.approx(0.36)  # beyond 8: along the last segment (0.02 a token)


def test_a_run_is_modelled_from_its_passes_its_drafter_passes_and_its_catch_up() -> None:
    r = StatsRecorder(verify_passes=3, draft_passes=6, catch_up_seconds=0.05, generated_tokens=9)
    r.record_draft(3, 3)
    r.record_draft(3, 2)
    stats = r.snapshot()
    assert modelled_seconds(stats, CURVE) == pytest.approx(0.10 + 2 * 0.20 + 6 * 0.02 + 0.05)
    # Plain decoding: one pass a token, nothing else.
    assert modelled_seconds(GenerationStats(verify_passes=40), CURVE) == pytest.approx(4.0)


def test_modelled_records_read_as_measured_ones_do() -> None:
    off = rec("a", "code", "off", 10.0)
    spec = rec("a", "code", "draft", 15.0, True)  # 20 passes, drafts of 3 tokens each (10 of them)
    spec = replace(spec, stats=replace(spec.stats, draft_passes=30))
    out = modelled_records([off, spec], CURVE)
    assert out[0].seconds == pytest.approx(40 * 0.10) and out[0].tokens_per_s == pytest.approx(10.0)
    expected = 10 * 0.10 + 10 * CURVE.t(4) + 30 * 0.02
    assert out[1].seconds == pytest.approx(expected) and out[1].tokens_per_s == pytest.approx(40 / expected)
    assert out[1].mode == "draft" and out[1].matches_off is True


def report_of(verify: dict[int, float], draft: float | None, disturbed: str = "") -> CalibrationReport:
    return CalibrationReport(verify, draft, draft, 1.0, 0.1, disturbed)


def test_the_curve_of_two_measurements_is_their_fastest_passes_and_needs_the_drafter() -> None:
    a = report_of({1: 0.10, 2: 0.17}, 0.03)
    b = report_of({1: 0.12, 2: 0.15}, 0.02)
    both = merged([(a.verify_s, a.draft_token_s), (b.verify_s, b.draft_token_s)])
    assert both == CostCurve({1: 0.10, 2: 0.15}, 0.02)
    assert merged([({1: 0.1}, None)]) is None  # the drafter's pass was not measured
    assert merged([({2: 0.1}, 0.01)]) is None  # no plain pass


class Measuring:
    """A BenchEngine that measures its costs as Engine.measure_costs does, and answers with given steps."""

    def __init__(self, reports: list[CalibrationReport | Exception | None]) -> None:
        self.reports = reports
        self.measured: list[tuple[int, ...]] = []

    def reset(self) -> None:
        pass

    def measure_costs(self, sizes: tuple[int, ...], budget_s: float) -> CalibrationReport | None:
        self.measured.append(sizes)
        got = self.reports.pop(0)
        if isinstance(got, Exception):
            raise got
        return got

    def generate(self, request: GenerationRequest, on_event: Callable[[TokenEvent], None] | None = None,
                 should_cancel: Callable[[], bool] | None = None) -> GenerationResult:
        spec = request.speculation.enabled
        r = StatsRecorder(generated_tokens=8, generation_seconds=1.0, verify_passes=4 if spec else 8,
                          draft_passes=4 if spec else 0)
        for _ in range(4 if spec else 0):
            r.record_draft(1, 1)
        return GenerationResult("text", FinishReason.LENGTH, r.snapshot(), SpeculationState(spec, "draft"),
                                token_ids=(1, 2, 3))


PROMPT = [BenchPrompt("a", "code", "Count.")]
MODES = [bench_mode("off"), bench_mode("draft", 1, label="draft:1")]


def test_the_runner_measures_the_costs_before_and_after_and_the_report_models_every_run() -> None:
    engine = Measuring([report_of({1: 0.10, 2: 0.16}, 0.02), report_of({1: 0.12, 2: 0.15}, 0.03)])
    report = run_bench(engine, PROMPT, MODES, max_tokens=8)
    assert len(engine.measured) == 2 and 17 in engine.measured[0]  # every draft length's batch
    assert report.costs == CostCurve({1: 0.10, 2: 0.15}, 0.02)
    data = report_json(report, {})
    assert data["costs"] == {"verify_s": {"1": 0.1, "2": 0.15}, "draft_pass_s": 0.02}
    seconds = {r["mode"]: r["modelled_seconds"] for r in data["records"]}  # type: ignore[union-attr]
    assert seconds == pytest.approx({"off": 0.8, "draft:1": 4 * 0.15 + 4 * 0.02})


@pytest.mark.parametrize("reports", [
    [None, None],  # no draft model
    [report_of({1: 0.1}, 0.02, "passes of 2 tokens were slowed by other programs")] * 2,
    [EngineError("gone"), EngineError("gone")],
])
def test_no_curve_where_the_costs_could_not_be_measured(
        reports: list[CalibrationReport | Exception | None]) -> None:
    report = run_bench(Measuring(list(reports)), PROMPT, MODES, max_tokens=8)
    assert report.costs is None and len(report.records) == 2
    data = report_json(report, {})
    assert "costs" not in data and all("modelled_seconds" not in r for r in data["records"])  # type: ignore[union-attr]


def test_one_undisturbed_measurement_is_enough() -> None:
    engine = Measuring([report_of({1: 0.1}, 0.02, "a busy machine"), report_of({1: 0.11, 2: 0.2}, 0.03)])
    report = run_bench(engine, PROMPT, MODES, max_tokens=8)
    assert report.costs == CostCurve({1: 0.11, 2: 0.2}, 0.03)
    assert measure_costs(object()) is None  # an engine that cannot measure (a route's)


# Measured on this machine, Q8_0 target, 2 threads: a batch of two costs three single tokens and a
# batch of 8 less than one of 7 (llama.cpp's kernels), the shape a busy moment gives, repeated.
Q8_SHAPE = {b: 0.039 + 0.015 * b for b in MEASURED_SIZES} | {2: 0.118, 8: 0.157}


def test_measurements_declined_for_their_shape_count_where_the_runs_start_and_end_repeat_them() -> None:
    shape = "the passes' times contradict each other (a busy machine)"
    again = {b: s * 1.12 for b, s in Q8_SHAPE.items()}  # minutes later, 12% slower throughout
    engine = Measuring([report_of(Q8_SHAPE, 0.015, shape), report_of(again, 0.016, shape)])
    report = run_bench(engine, PROMPT, MODES, max_tokens=8)
    assert report.costs == CostCurve(dict(sorted(Q8_SHAPE.items())), 0.015)
    # A busy moment: the two disagree (a size 40% slower in one), or one of them missed a size.
    busy = {**Q8_SHAPE, 4: Q8_SHAPE[4] * 1.4}
    engine = Measuring([report_of(Q8_SHAPE, 0.015, shape), report_of(busy, 0.016, shape)])
    assert run_bench(engine, PROMPT, MODES, max_tokens=8).costs is None
    partial = {b: s for b, s in Q8_SHAPE.items() if b != 4}
    engine = Measuring([report_of(partial, 0.015, shape), report_of(partial, 0.015, shape)])
    assert run_bench(engine, PROMPT, MODES, max_tokens=8).costs is None
