"""BenchService with the real engine: SmolLM2-135M as target and as its own drafter."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from localchat.bench.modes import bench_mode
from localchat.bench.prompts import builtin_prompts
from localchat.bench.report import BenchReport
from localchat.engine.types import EngineConfig
from localchat.host.events import BenchDone, BenchProgress, Failed, FailureKind, Loaded
from localchat.host.failure_words import Audience, sentence
from localchat.services.bench_service import BenchService

pytestmark = pytest.mark.slow

MODES = [bench_mode("off"), bench_mode("draft"), bench_mode("adaptive")]


def _config(path: Path) -> EngineConfig:
    return EngineConfig(str(path), draft_path=str(path), n_ctx=1024, n_threads=1)


def test_runs_reports_progress_and_speedup(qtbot, smollm2_path: Path) -> None:
    service = BenchService()
    events: list[object] = []
    service.bench_event.connect(events.append)
    prompts = builtin_prompts()[:2]
    try:
        with qtbot.waitSignal(service.bench_event, timeout=180_000,
                              check_params_cb=lambda e: isinstance(e, BenchDone | Failed)) as finished:
            service.start(_config(smollm2_path), prompts, MODES, 16)
        done = finished.args[0]
        assert isinstance(done, BenchDone) and not done.cancelled
        report: BenchReport = done.report
    finally:
        service.stop()
    loaded = events[0]
    assert isinstance(loaded, Loaded) and loaded.info.draft is not None and loaded.draft_problem == ""
    progress = [e for e in events if isinstance(e, BenchProgress)]
    assert [(p.done, p.total) for p in progress] == [(i, 6) for i in range(1, 7)]
    assert len(report.records) == 6
    assert all(r.tokens_per_s > 0 and r.tokens > 0 for r in report.records)
    assert {r.mode for r in report.records} == {"off", "draft", "adaptive"}
    # The model drafting for itself is always right under greedy decoding.
    draft = [r for r in report.records if r.mode == "draft"]
    assert all(r.matches_off for r in draft) and all(r.acceptance_rate > 0.9 for r in draft)
    assert all(r.stats.acceptance_rate_by_position for r in draft)
    rows = {(s.category, s.mode): s for s in report.summary()}
    assert rows[("all", "off")].speedup_vs_off == 1.0
    assert rows[("all", "draft")].speedup_vs_off is not None and rows[("all", "draft")].speedup_vs_off > 0
    # Measured in the benchmark process, which held the models (not in this one).
    assert report.peak_rss_mb is not None and report.peak_rss_mb > 50
    assert not service.is_running


def test_cancel_stops_between_runs(qtbot, smollm2_path: Path) -> None:
    service = BenchService()
    prompts = builtin_prompts()[:4]
    try:
        service.start(_config(smollm2_path), prompts, MODES[:2], 16, warmup=False)
        with qtbot.waitSignal(service.bench_event, timeout=180_000,
                              check_params_cb=lambda e: isinstance(e, BenchProgress)):
            pass
        with qtbot.waitSignal(service.bench_event, timeout=30_000,
                              check_params_cb=lambda e: isinstance(e, BenchDone)) as cancelled:
            service.cancel()
    finally:
        service.stop()
    assert cancelled.args[0].cancelled
    report: BenchReport = cancelled.args[0].report
    assert 1 <= len(report.records) < 8
    assert not service.is_running


def test_process_death_is_one_sentence(qtbot, smollm2_path: Path) -> None:
    service = BenchService()
    try:
        with qtbot.waitSignal(service.bench_event, timeout=180_000,
                              check_params_cb=lambda e: isinstance(e, Loaded)):
            service.start(_config(smollm2_path), builtin_prompts()[:4], MODES, 64)
        pid = service._supervisor._process.pid  # type: ignore[union-attr]
        assert pid is not None
        with qtbot.waitSignal(service.bench_event, timeout=10_000,
                              check_params_cb=lambda e: isinstance(e, Failed)) as failed:
            os.kill(pid, signal.SIGKILL)
    finally:
        service.stop()
    failure = failed.args[0].failure
    assert failure.kind is FailureKind.ENGINE_DIED
    assert sentence(failure, Audience.BENCH) == (
        "The benchmark process stopped unexpectedly (exit code -9); the results so far are kept."
    )
    assert not service.is_running
