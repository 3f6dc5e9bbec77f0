"""An API request naming another model: the load is a job in the queue (a running reply is never cut),
the state says who asked for it, a failed load brings the model before back, and a job that names a
model runs on it. The fake engine in a real child process."""

from __future__ import annotations

import queue
import time

from localchat.engine.types import EngineConfig, GenerationRequest
from localchat.host.events import Failed, FailureKind, Finished, JobEvent, Phase
from localchat.host.jobs import JobHandle
from localchat.host.supervisor import EngineSupervisor

FAKE = "tests.host.fake_engine:FakeEngine"
FIRST = EngineConfig("/models/first.gguf")
SECOND = EngineConfig("/models/second.gguf")


def _end(job: JobHandle, timeout: float = 20.0) -> JobEvent | None:
    """The job's last event (None: a load job that loaded)."""
    assert job.events is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if job.request is None and job.loaded is not None:
            return None
        try:
            event = job.events.get(timeout=0.05)
        except queue.Empty:
            continue
        if isinstance(event, Finished | Failed):
            return event
    raise AssertionError("the job did not end")


def _supervisor() -> EngineSupervisor:
    supervisor = EngineSupervisor(FIRST, engine_factory=FAKE)
    supervisor.start()
    supervisor.wait_ready(20)
    return supervisor


def test_a_load_job_waits_for_the_running_reply_then_loads_and_says_who_asked() -> None:
    supervisor = _supervisor()
    try:
        reply = supervisor.submit(GenerationRequest(prompt="slow", max_tokens=40), "window")
        load = supervisor.submit_load(SECOND, "openai:abc")
        assert isinstance(_end(reply), Finished)
        assert _end(load) is None and load.loaded is not None
        assert load.loaded.target.path == SECOND.target_path
        state = supervisor.state
        assert state.ready and state.requested_by == "openai:abc" and state.config == SECOND
    finally:
        supervisor.close()


def test_the_running_reply_finishes_whole_when_a_load_is_queued_behind_it() -> None:
    supervisor = _supervisor()
    try:
        reply = supervisor.submit(GenerationRequest(prompt="slow", max_tokens=40), "window")
        supervisor.submit_load(SECOND, "openai:abc")
        last = _end(reply)
        assert isinstance(last, Finished)
        assert last.result.finish_reason.value != "cancelled" and last.result.stats.generated_tokens == 40
    finally:
        supervisor.close()


def test_a_failed_load_fails_its_request_and_the_model_before_is_loaded_again() -> None:
    supervisor = _supervisor()
    try:
        waiting = supervisor.submit(GenerationRequest(prompt="hi", max_tokens=4), "window")
        load = supervisor.submit_load(EngineConfig("/models/missing.gguf"), "ollama:x")
        failed = _end(load)
        assert isinstance(failed, Failed) and failed.failure.kind is FailureKind.LOAD_FAILED
        assert isinstance(_end(waiting), Finished)  # the other jobs were not failed with it
        supervisor.wait_ready(20)
        state = supervisor.state
        assert state.phase is Phase.READY and state.config == FIRST
        assert state.refused_path == "/models/missing.gguf" and state.refused_failure is not None
    finally:
        supervisor.close()


def test_a_job_that_names_a_model_runs_on_it_even_after_another_load() -> None:
    supervisor = _supervisor()
    try:
        supervisor.load(SECOND)
        job = supervisor.submit(GenerationRequest(prompt="hi", max_tokens=4), "openai:a", model=FIRST)
        done = _end(job)
        assert isinstance(done, Finished)
        assert supervisor.state.config == FIRST and supervisor.state.requested_by == "openai:a"
    finally:
        supervisor.close()
