"""EngineClient against a real engine process running a fake engine (fast paths and failure modes):
the supervisor's objects reach the GUI thread unchanged, in order, without a poll."""

from __future__ import annotations

import os
import signal
import time

import pytest
from host import fake_engine  # tests/ is on sys.path: pytest's rootdir-relative test packages

from localchat.engine.types import EngineConfig, FinishReason, GenerationRequest
from localchat.host.events import Failed, FailureKind, Finished, Phase, Tokens
from localchat.host.failure_words import sentence
from localchat.services import EngineClient

FAKE = f"{fake_engine.__name__}:FakeEngine"
CONFIG = EngineConfig("/models/fake.gguf")


@pytest.fixture
def client(qtbot):
    c = EngineClient(engine_factory=FAKE, cancel_timeout_s=1.0)
    yield c
    c.shutdown()


def _phase(phase: Phase):
    return lambda state: state.phase is phase


def _load(qtbot, client: EngineClient, config: EngineConfig = CONFIG) -> None:
    with qtbot.waitSignal(client.state_changed, timeout=20_000, check_params_cb=_phase(Phase.READY)):
        client.load(config)


def _window_end(event) -> bool:
    return isinstance(event, Finished | Failed) and event.source == "window"


def test_load_generate_stream(qtbot, client: EngineClient) -> None:
    states = []
    client.state_changed.connect(states.append)
    _load(qtbot, client)
    assert states[0].phase is Phase.LOADING and states[-1].info is not None
    assert client.state is states[-1] and client.state.info is not None
    events = []
    client.job_event.connect(events.append)
    with qtbot.waitSignal(client.job_event, timeout=20_000, check_params_cb=_window_end) as blocker:
        t0 = time.monotonic()
        client.generate(GenerationRequest(prompt="hello", max_tokens=300))
        assert time.monotonic() - t0 < 0.05  # never blocks the GUI thread
    done = blocker.args[0]
    assert isinstance(done, Finished) and done.result.finish_reason is FinishReason.LENGTH
    tokens = [e for e in events if isinstance(e, Tokens)]
    assert "".join(e.event.text for e in tokens) == done.result.text
    assert 1 <= len(tokens) < 300 and all(e.source == "window" for e in tokens)


def test_load_failure_is_a_failure_of_its_kind(qtbot, client: EngineClient) -> None:
    with qtbot.waitSignal(client.state_changed, timeout=20_000, check_params_cb=_phase(Phase.FAILED)) as b:
        client.load(EngineConfig("/models/missing.gguf"))
    state = b.args[0]
    assert state.failure.kind is FailureKind.LOAD_FAILED
    assert sentence(state.failure) == "The model file /models/missing.gguf does not exist."
    assert client.state.info is None


def test_generate_without_a_model(qtbot, client: EngineClient) -> None:
    with qtbot.waitSignal(client.job_event, timeout=5000, check_params_cb=_window_end) as blocker:
        client.generate(GenerationRequest(prompt="hello"))
    assert isinstance(blocker.args[0], Failed) and blocker.args[0].failure.kind is FailureKind.NO_MODEL


def test_cancel_is_prompt(qtbot, client: EngineClient) -> None:
    _load(qtbot, client)
    with qtbot.waitSignal(client.job_event, timeout=10_000):
        client.generate(GenerationRequest(prompt="slow", max_tokens=100_000))
    with pytest.raises(RuntimeError):
        client.generate(GenerationRequest(prompt="slow"))
    with qtbot.waitSignal(client.job_event, timeout=2000, check_params_cb=_window_end) as blocker:
        t0 = time.monotonic()
        client.cancel()
    assert time.monotonic() - t0 < 1.0
    assert blocker.args[0].result.finish_reason is FinishReason.CANCELLED


def test_crash_mid_reply_then_the_next_request_starts_a_new_engine(qtbot, client: EngineClient) -> None:
    _load(qtbot, client)
    first_pid = client.state.pid
    with qtbot.waitSignal(client.state_changed, timeout=20_000, check_params_cb=_phase(Phase.STOPPED)) as b:
        client.generate(GenerationRequest(prompt="crash", max_tokens=100))
    failure = b.args[0].failure
    assert failure.kind is FailureKind.ENGINE_DIED and failure.exitcode == 3
    assert sentence(failure) == ("The engine stopped unexpectedly (exit code 3). "
                                 "Your chat is saved; the next message starts a new engine.")
    assert client.state.pid is None and client.state.info is None
    with qtbot.waitSignal(client.job_event, timeout=20_000, check_params_cb=_window_end) as done:
        client.generate(GenerationRequest(prompt="again", max_tokens=5))
    assert done.args[0].result.text == "t0 t1 t2 t3 t4 "
    assert client.state.pid not in (None, first_pid) and client.state.info is not None


def test_external_kill_9_mid_reply(qtbot, client: EngineClient) -> None:
    _load(qtbot, client)
    with qtbot.waitSignal(client.job_event, timeout=10_000):
        client.generate(GenerationRequest(prompt="slow", max_tokens=100_000))
    pid = client.state.pid
    assert pid is not None
    with qtbot.waitSignal(client.job_event, timeout=5000, check_params_cb=_window_end) as blocker:
        os.kill(pid, signal.SIGKILL)
    assert blocker.args[0].failure.exitcode == -9


def test_hung_engine_is_killed_after_cancel_timeout(qtbot, client: EngineClient) -> None:
    _load(qtbot, client)
    client.generate(GenerationRequest(prompt="hang", max_tokens=10))
    qtbot.wait(200)
    with qtbot.waitSignal(client.job_event, timeout=5000, check_params_cb=_window_end) as blocker:
        client.cancel()
    failure = blocker.args[0].failure
    assert failure.kind is FailureKind.HUNG and "did not stop within 1 seconds" in sentence(failure)
    _load(qtbot, client)  # and a new engine loads


def test_death_while_loading(qtbot, client: EngineClient) -> None:
    with qtbot.waitSignal(client.state_changed, timeout=20_000, check_params_cb=_phase(Phase.FAILED)) as b:
        client.load(EngineConfig("/models/crash.gguf"))
    assert b.args[0].failure.kind is FailureKind.ENGINE_DIED and b.args[0].failure.while_loading
    assert client.state.info is None


def test_window_and_api_requests_share_one_engine_and_queue_fairly(qtbot, client: EngineClient) -> None:
    _load(qtbot, client)
    pid = client.state.pid
    supervisor = client.supervisor
    api_jobs = [supervisor.submit(GenerationRequest(prompt="slow api", max_tokens=20), source="api:a")
                for _ in range(3)]
    seen: list[str] = []
    client.job_event.connect(lambda event: seen.append(event.source))
    with qtbot.waitSignal(client.job_event, timeout=20_000, check_params_cb=_window_end) as done:
        client.generate(GenerationRequest(prompt="window", max_tokens=5))
    assert done.args[0].result.text == "t0 t1 t2 t3 t4 "
    # Round-robin by source: the API's queue had its turn (one or two requests), then the window's
    # reply, before the API's third request.
    assert api_jobs[0].done and not api_jobs[2].done
    assert "api:a" in seen  # one signal carries every source's progress (the status bar's)
    qtbot.waitUntil(lambda: api_jobs[2].done, timeout=20_000)
    assert client.state.pid == pid  # one engine process for both


def test_the_death_sentence_points_at_the_engine_log(qtbot, tmp_path) -> None:
    log_path = tmp_path / "engine.log"
    c = EngineClient(engine_factory=FAKE, cancel_timeout_s=1.0, log_path=str(log_path))
    try:
        _load(qtbot, c)
        with qtbot.waitSignal(c.job_event, timeout=20_000, check_params_cb=_window_end) as blocker:
            c.generate(GenerationRequest(prompt="crash", max_tokens=100))
        words = sentence(blocker.args[0].failure, log_path=c.log_path)
        assert words.endswith(f"What the engine said is in {log_path}.")
        assert log_path.exists() and "engine process started" in log_path.read_text(encoding="utf-8")
    finally:
        c.shutdown()
