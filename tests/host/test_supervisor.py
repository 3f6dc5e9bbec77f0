"""host.supervisor with the fake engine in a real child process: one owner of the engine's state
(snapshots in order), fairness, no model until one is asked for, death while idle or mid-job, eager
and lazy restart, a hung engine, a supervisor thread that fails; and the benchmark's supervisor."""

from __future__ import annotations

import os
import queue
import signal
import time
from pathlib import Path

import pytest

from localchat.bench.modes import bench_mode
from localchat.bench.prompts import BenchPrompt
from localchat.engine.types import EngineConfig, GenerationRequest
from localchat.host.events import (
    BenchDone,
    BenchProgress,
    Event,
    Failed,
    FailureKind,
    Finished,
    JobEvent,
    Loaded,
    Phase,
    StateChanged,
    Tokens,
)
from localchat.host.jobs import JobHandle
from localchat.host.supervisor import BenchSupervisor, EngineSupervisor, EngineUnavailable

FAKE = "tests.host.fake_engine:FakeEngine"
CONFIG = EngineConfig("/models/fake.gguf")


def _last(job: JobHandle, timeout: float = 20.0) -> JobEvent:
    assert job.events is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            event = job.events.get(timeout=0.1)
        except queue.Empty:
            continue
        if isinstance(event, Finished | Failed):
            return event
    raise AssertionError("the job did not end")


def _wait_for(events: list[Event], test, timeout: float = 20.0) -> Event:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in list(events):
            if test(event):
                return event
        time.sleep(0.02)
    raise AssertionError(f"no such event among {events}")


def _phases(events: list[Event]) -> list[Phase]:
    return [e.state.phase for e in events if isinstance(e, StateChanged)]


@pytest.fixture
def events() -> list[Event]:
    return []


def test_no_model_until_load_then_events_in_order(events: list[Event]) -> None:
    supervisor = EngineSupervisor(None, engine_factory=FAKE, listener=events.append)
    supervisor.start()
    try:
        with pytest.raises(EngineUnavailable, match="No model is loaded") as none:
            supervisor.wait_ready(1)
        assert none.value.failure.kind is FailureKind.NO_MODEL
        assert supervisor.state.phase is Phase.NO_MODEL and supervisor.state.pid is None
        supervisor.load(CONFIG)
        info = supervisor.wait_ready(20)
        state = supervisor.state
        assert info.target.path == CONFIG.target_path and state.pid is not None and state.ever_loaded
        job = supervisor.submit(GenerationRequest(prompt="hello", max_tokens=3), source="api:x")
        assert isinstance(_last(job), Finished)
        _wait_for(events, lambda e: isinstance(e, Finished))
        assert _phases(events)[0] is Phase.LOADING and _phases(events)[-1] is Phase.READY
        job_events = [e for e in events if isinstance(e, Tokens | Finished | Failed)]
        assert job_events and isinstance(job_events[-1], Finished)  # the listener hears every job too
        assert all(e.source == "api:x" and e.job == job.id for e in job_events)
    finally:
        supervisor.close()
    assert supervisor.state.phase is Phase.CLOSED


def test_a_job_whose_events_go_to_the_listener_only(events: list[Event]) -> None:
    supervisor = EngineSupervisor(CONFIG, engine_factory=FAKE, listener=events.append)
    supervisor.start()
    try:
        supervisor.wait_ready(20)
        job = supervisor.submit(GenerationRequest(prompt="hi", max_tokens=3), "window", queue_events=False)
        assert job.events is None
        done = _wait_for(events, lambda e: isinstance(e, Finished) and e.job == job.id)
        assert isinstance(done, Finished) and job.done
    finally:
        supervisor.close()


def test_round_robin_across_sources_and_a_bounded_queue() -> None:
    supervisor = EngineSupervisor(CONFIG, engine_factory=FAKE, max_queue=3)
    supervisor.start()
    try:
        supervisor.wait_ready(20)
        slow = GenerationRequest(prompt="slow", max_tokens=15)
        a = [supervisor.submit(slow, source="a") for _ in range(3)]
        time.sleep(0.1)  # a[0] is running; a[1], a[2] wait
        b = supervisor.submit(slow, source="b")
        with pytest.raises(EngineUnavailable) as full:
            supervisor.submit(slow, source="c")
        assert full.value.failure.kind is FailureKind.QUEUE_FULL and full.value.failure.retry_after_s >= 1
        for job in (*a, b):
            assert isinstance(_last(job), Finished)
        assert b.started_at is not None and a[2].started_at is not None
        assert b.started_at < a[2].started_at  # b did not wait behind all of a's jobs
        supervisor.cancel(a[0])  # cancelling a finished job is harmless
    finally:
        supervisor.close()


def test_a_failed_load_fails_the_waiting_jobs_with_its_failure(events: list[Event]) -> None:
    supervisor = EngineSupervisor(EngineConfig("/models/missing.gguf"), engine_factory=FAKE,
                                  listener=events.append)
    supervisor.start()
    try:
        with pytest.raises(EngineUnavailable, match="does not exist") as failed:
            supervisor.wait_ready(20)
        assert failed.value.failure.kind is FailureKind.LOAD_FAILED
        assert supervisor.state.phase is Phase.FAILED
        job = supervisor.submit(GenerationRequest(prompt="hi", max_tokens=3))  # asks for a new load
        end = _last(job)
        assert isinstance(end, Failed) and end.failure.kind is FailureKind.LOAD_FAILED
    finally:
        supervisor.close()


def test_idle_death_is_told_and_a_lazy_supervisor_restarts_only_when_asked(events: list[Event]) -> None:
    supervisor = EngineSupervisor(CONFIG, engine_factory=FAKE, restart_eagerly=False, listener=events.append)
    supervisor.start()
    try:
        supervisor.wait_ready(20)
        pid = supervisor.state.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        stopped = _wait_for(events, lambda e: isinstance(e, StateChanged) and e.state.phase is Phase.STOPPED)
        assert isinstance(stopped, StateChanged) and stopped.state.failure is not None
        assert stopped.state.failure.kind is FailureKind.ENGINE_DIED
        assert stopped.state.failure.exitcode == -signal.SIGKILL and not stopped.state.failure.while_loading
        time.sleep(1.0)
        assert supervisor.state.pid is None and supervisor.state.phase is Phase.STOPPED  # not restarted
        job = supervisor.submit(GenerationRequest(prompt="again", max_tokens=2))
        assert isinstance(_last(job), Finished)  # the job started a new engine first
        assert supervisor.state.pid not in (None, pid) and supervisor.state.failure is None
    finally:
        supervisor.close()


def test_death_mid_job_fails_that_job_and_an_eager_supervisor_restarts(events: list[Event]) -> None:
    supervisor = EngineSupervisor(CONFIG, engine_factory=FAKE, listener=events.append)
    supervisor.start()
    try:
        supervisor.wait_ready(20)
        pid = supervisor.state.pid
        failed = _last(supervisor.submit(GenerationRequest(prompt="crash", max_tokens=20)))
        assert isinstance(failed, Failed) and failed.failure.kind is FailureKind.ENGINE_DIED
        assert failed.failure.exitcode == 3
        # The job hears of the death first (the window's reply ends before the state says the engine
        # stopped); the restart comes after the state does.
        _wait_for(events, lambda e: isinstance(e, StateChanged) and e.state.phase is Phase.STOPPED)
        supervisor.wait_ready(20)
        assert supervisor.state.pid not in (None, pid)
        assert _phases(events).count(Phase.READY) == 2 and Phase.STOPPED in _phases(events)
    finally:
        supervisor.close()


def test_a_hung_engine_is_killed_after_the_cancel_time_out(events: list[Event]) -> None:
    supervisor = EngineSupervisor(CONFIG, engine_factory=FAKE, cancel_timeout_s=0.5, listener=events.append)
    supervisor.start()
    try:
        supervisor.wait_ready(20)
        job = supervisor.submit(GenerationRequest(prompt="hang", max_tokens=5))
        time.sleep(0.3)
        supervisor.cancel(job)
        failed = _last(job)
        assert isinstance(failed, Failed) and failed.failure.kind is FailureKind.HUNG
        assert failed.failure.timeout_s == 0.5
        stopped = _wait_for(events, lambda e: isinstance(e, StateChanged) and e.state.phase is Phase.STOPPED)
        assert isinstance(stopped, StateChanged) and stopped.state.failure == failed.failure
    finally:
        supervisor.close()


def test_a_supervisor_thread_that_fails_tells_everyone_waiting(events: list[Event]) -> None:
    """A fault in the supervisor's thread itself (seen once: a reply the parent could not unpickle)
    ends the thread. The load waiting on it, the running job, the queued ones and the window hear
    of it at once, and later requests are refused, instead of waiting for a load timeout."""
    supervisor = EngineSupervisor(CONFIG, engine_factory=FAKE, listener=events.append)

    def broken(job: JobHandle) -> None:
        raise RuntimeError("a reply that cannot be read")

    supervisor._run_job = broken  # type: ignore[method-assign]
    supervisor.start()
    try:
        supervisor.wait_ready(20)
        first = supervisor.submit(GenerationRequest(prompt="hello", max_tokens=3), source="window")
        failed = _last(first, 5)
        assert isinstance(failed, Failed) and failed.failure.kind is FailureKind.INTERNAL
        told = _wait_for(events, lambda e: isinstance(e, StateChanged) and e.state.phase is Phase.FAILED, 5)
        assert isinstance(told, StateChanged) and told.state.failure == failed.failure
        with pytest.raises(EngineUnavailable, match="internal error"):
            supervisor.wait_ready(1)
        with pytest.raises(EngineUnavailable, match="internal error"):
            supervisor.submit(GenerationRequest(prompt="again", max_tokens=3), source="api:x")
    finally:
        supervisor.close()


def test_a_supervisor_thread_that_fails_while_loading_ends_the_wait_at_once() -> None:
    supervisor = EngineSupervisor(CONFIG, engine_factory=FAKE)

    def broken() -> None:
        raise RuntimeError("cannot start")

    supervisor._ensure_engine = broken  # type: ignore[method-assign]
    supervisor.start()
    try:
        started = time.monotonic()
        with pytest.raises(EngineUnavailable, match="internal error"):
            supervisor.wait_ready(30)
        assert time.monotonic() - started < 5
    finally:
        supervisor.close()


def test_a_worker_that_went_away_is_left_out_of_the_restart_when_the_pair_fits(
    tmp_path: Path, events: list[Event]
) -> None:
    """The engine ends because a worker it used stopped answering: the failure names the worker, and the
    restart runs on this computer alone (the fake model's file is tiny), saying which worker it dropped."""
    import socket

    model = tmp_path / "small.gguf"
    model.write_bytes(b"GGUF" + bytes(64))
    with socket.socket() as probe:  # a port nothing listens on: the worker is gone
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    worker = f"127.0.0.1:{port}"
    config = EngineConfig(str(model), rpc_servers=(worker,))
    supervisor = EngineSupervisor(config, engine_factory=FAKE, restart_eagerly=False, listener=events.append)
    supervisor.start()
    try:
        supervisor.wait_ready(20)
        failed = _last(supervisor.submit(GenerationRequest(prompt="crash", max_tokens=20)))
        assert isinstance(failed, Failed) and failed.failure.kind is FailureKind.WORKER_LOST
        assert failed.failure.worker == worker
        assert isinstance(_last(supervisor.submit(GenerationRequest(prompt="again", max_tokens=2))), Finished)
        state = supervisor.state
        assert state.config is not None and state.config.rpc_servers == ()
        assert state.dropped_workers == (worker,)
    finally:
        supervisor.close()


def test_the_bench_supervisor_tells_the_run_and_a_death() -> None:
    events: list[Event] = []
    supervisor = BenchSupervisor(events.append, engine_factory=FAKE)
    prompts = [BenchPrompt("p1", "code", "hello"), BenchPrompt("p2", "chat", "there")]
    supervisor.start(CONFIG, prompts, [bench_mode("off")], 4, warmup=False)
    done = _wait_for(events, lambda e: isinstance(e, BenchDone | Failed), 60)
    assert isinstance(done, BenchDone) and not done.cancelled and len(done.report.records) == 2
    assert isinstance(events[0], Loaded) and sum(isinstance(e, BenchProgress) for e in events) == 2
    assert not supervisor.running

    events.clear()
    supervisor.start(EngineConfig("/models/crash.gguf"), prompts, [bench_mode("off")], 4, warmup=False)
    died = _wait_for(events, lambda e: isinstance(e, BenchDone | Failed), 60)
    assert isinstance(died, Failed) and died.failure.kind is FailureKind.ENGINE_DIED
    assert died.failure.exitcode == 7
