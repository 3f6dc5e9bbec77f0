"""host.scheduler.EngineBroker with the fake engine in a real child process: fairness, the listener's
events, no model until one is asked for, death while idle or mid-job, eager and lazy restart."""

from __future__ import annotations

import os
import queue
import signal
import time

import pytest

from localchat.engine.types import EngineConfig, GenerationRequest
from localchat.host.scheduler import (
    BrokerError,
    BrokerEvent,
    BrokerState,
    EngineBroker,
    EngineDied,
    JobEnded,
    JobEvent,
    JobFailed,
    JobFinished,
    JobHandle,
    JobProgress,
    LoadDone,
    LoadError,
    LoadStarted,
    QueueFull,
)

FAKE = "tests.host.fake_engine:FakeEngine"
CONFIG = EngineConfig("/models/fake.gguf")


def _last(job: JobHandle, timeout: float = 20.0) -> JobEvent:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            event = job.events.get(timeout=0.1)
        except queue.Empty:
            continue
        if isinstance(event, JobFinished | JobFailed):
            return event
    raise AssertionError("the job did not end")


def _wait_for(events: list[BrokerEvent], kind: type, timeout: float = 20.0) -> BrokerEvent:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in events:
            if isinstance(event, kind):
                return event
        time.sleep(0.02)
    raise AssertionError(f"no {kind.__name__} among {events}")


@pytest.fixture
def events() -> list[BrokerEvent]:
    return []


def test_no_model_until_load_then_events_in_order(events: list[BrokerEvent]) -> None:
    broker = EngineBroker(None, engine_factory=FAKE, listener=events.append)
    broker.start()
    try:
        with pytest.raises(BrokerError, match="No model is loaded"):
            broker.wait_ready(1)
        assert broker.pid is None and broker.config is None
        broker.load(CONFIG)
        info = broker.wait_ready(20)
        assert info.target.path == CONFIG.target_path and broker.pid is not None
        job = broker.submit(GenerationRequest(prompt="hello", max_tokens=3), source="api:x")
        assert isinstance(_last(job), JobFinished)
        _wait_for(events, JobEnded)
        kinds = [type(e) for e in events]
        assert kinds[:2] == [LoadStarted, LoadDone]
        assert kinds.count(JobProgress) >= 1 and kinds[-1] is JobEnded  # tokens merge on the pipe
        assert all(e.source == "api:x" for e in events if isinstance(e, JobProgress | JobEnded))
    finally:
        broker.close()


def test_round_robin_across_sources_and_a_bounded_queue() -> None:
    broker = EngineBroker(CONFIG, engine_factory=FAKE, max_queue=3)
    broker.start()
    try:
        broker.wait_ready(20)
        slow = GenerationRequest(prompt="slow", max_tokens=15)
        a = [broker.submit(slow, source="a") for _ in range(3)]
        time.sleep(0.1)  # a[0] is running; a[1], a[2] wait
        b = broker.submit(slow, source="b")
        with pytest.raises(QueueFull) as full:
            broker.submit(slow, source="c")
        assert full.value.retry_after_s >= 1
        for job in (*a, b):
            assert isinstance(_last(job), JobFinished)
        assert b.started_at is not None and a[2].started_at is not None
        assert b.started_at < a[2].started_at  # b did not wait behind all of a's jobs
        broker.cancel(a[0])  # cancelling a finished job is harmless
    finally:
        broker.close()


def test_idle_death_is_told_and_a_lazy_broker_restarts_only_when_asked(events: list[BrokerEvent]) -> None:
    broker = EngineBroker(CONFIG, engine_factory=FAKE, restart_eagerly=False, listener=events.append)
    broker.start()
    try:
        broker.wait_ready(20)
        pid = broker.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        died = _wait_for(events, EngineDied)
        assert isinstance(died, EngineDied) and died.exitcode == -signal.SIGKILL and not died.while_loading
        time.sleep(1.0)
        assert broker.pid is None and broker.state is BrokerState.STOPPED  # not restarted on its own
        job = broker.submit(GenerationRequest(prompt="again", max_tokens=2))
        assert isinstance(_last(job), JobFinished)  # the job started a new engine first
        assert broker.pid not in (None, pid)
    finally:
        broker.close()


def test_death_mid_job_fails_that_job_and_an_eager_broker_restarts(events: list[BrokerEvent]) -> None:
    broker = EngineBroker(CONFIG, engine_factory=FAKE, listener=events.append)
    broker.start()
    try:
        broker.wait_ready(20)
        pid = broker.pid
        failed = _last(broker.submit(GenerationRequest(prompt="crash", max_tokens=20)))
        assert isinstance(failed, JobFailed) and failed.engine_died and failed.exitcode == 3
        assert "stopped unexpectedly (exit code 3)" in failed.message
        broker.wait_ready(20)
        assert broker.pid not in (None, pid)
        assert sum(isinstance(e, LoadDone) for e in events) == 2
    finally:
        broker.close()


def test_a_hung_engine_is_killed_after_the_cancel_time_out(events: list[BrokerEvent]) -> None:
    broker = EngineBroker(CONFIG, engine_factory=FAKE, cancel_timeout_s=0.5, listener=events.append)
    broker.start()
    try:
        broker.wait_ready(20)
        job = broker.submit(GenerationRequest(prompt="hang", max_tokens=5))
        time.sleep(0.3)
        broker.cancel(job)
        failed = _last(job)
        assert isinstance(failed, JobFailed) and failed.hung and failed.engine_died
        died = _wait_for(events, EngineDied)
        assert isinstance(died, EngineDied) and died.hung
    finally:
        broker.close()


def test_a_broker_thread_that_fails_tells_everyone_waiting(events: list[BrokerEvent]) -> None:
    """A fault in the broker thread itself (seen once: a reply the parent could not unpickle) ends
    the thread. The load waiting on it, the running job, the queued ones and the window hear a
    sentence at once, and later requests are refused, instead of waiting for a load timeout."""
    broker = EngineBroker(CONFIG, engine_factory=FAKE, listener=events.append)

    def broken(job: JobHandle) -> None:
        raise RuntimeError("a reply that cannot be read")

    broker._run_job_on_engine = broken  # type: ignore[method-assign]
    broker.start()
    try:
        broker.wait_ready(20)
        first = broker.submit(GenerationRequest(prompt="hello", max_tokens=3), source="window")
        failed = _last(first, 5)
        assert isinstance(failed, JobFailed) and "restart localchat" in failed.message
        told = _wait_for(events, LoadError, 5)
        assert isinstance(told, LoadError) and told.message == failed.message
        assert broker.state is BrokerState.FAILED
        with pytest.raises(BrokerError, match="internal error"):
            broker.wait_ready(1)
        with pytest.raises(BrokerError, match="internal error"):
            broker.submit(GenerationRequest(prompt="again", max_tokens=3), source="api:x")
    finally:
        broker.close()


def test_a_broker_thread_that_fails_while_loading_ends_the_wait_at_once() -> None:
    broker = EngineBroker(CONFIG, engine_factory=FAKE)

    def broken() -> None:
        raise RuntimeError("cannot start")

    broker._ensure_engine = broken  # type: ignore[method-assign]
    broker.start()
    try:
        started = time.monotonic()
        with pytest.raises(BrokerError, match="internal error"):
            broker.wait_ready(30)
        assert time.monotonic() - started < 5
    finally:
        broker.close()
