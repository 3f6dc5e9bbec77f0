"""EngineClient against a real engine process running a fake engine (fast paths and failure modes)."""

from __future__ import annotations

import os
import signal
import time

import pytest
from host import fake_engine  # tests/ is on sys.path: pytest's rootdir-relative test packages

from localchat.engine.types import EngineConfig, FinishReason, GenerationRequest, GenerationResult
from localchat.services import EngineClient

FAKE = f"{fake_engine.__name__}:FakeEngine"
CONFIG = EngineConfig("/models/fake.gguf")


@pytest.fixture
def client(qtbot):
    c = EngineClient(engine_factory=FAKE, cancel_timeout_s=1.0)
    yield c
    c.stop()


def _load(qtbot, client: EngineClient, config: EngineConfig = CONFIG) -> None:
    with qtbot.waitSignal(client.loaded, timeout=20_000):
        client.load(config)


def test_load_generate_stream(qtbot, client: EngineClient) -> None:
    with qtbot.waitSignal(client.load_started, timeout=1000):
        started = time.monotonic()
        _load(qtbot, client)
    assert client.info is not None and client.info.backend == "CPU"
    events = []
    client.tokens_received.connect(events.append)
    with qtbot.waitSignal(client.generation_finished, timeout=20_000) as blocker:
        t0 = time.monotonic()
        client.generate(GenerationRequest(prompt="hello", max_tokens=300))
        assert time.monotonic() - t0 < 0.05  # never blocks the GUI thread
    result: GenerationResult = blocker.args[0]
    assert result.finish_reason is FinishReason.LENGTH
    assert "".join(e.text for e in events) == result.text
    assert 1 <= len(events) < 300
    assert not client.is_generating
    assert time.monotonic() - started < 30


def test_load_failure_is_a_sentence(qtbot, client: EngineClient) -> None:
    with qtbot.waitSignal(client.load_failed, timeout=20_000) as blocker:
        client.load(EngineConfig("/models/missing.gguf"))
    assert blocker.args[0] == "The model file /models/missing.gguf does not exist."
    assert client.info is None


def test_generate_without_a_model(qtbot, client: EngineClient) -> None:
    with qtbot.waitSignal(client.generation_failed, timeout=1000) as blocker:
        client.generate(GenerationRequest(prompt="hello"))
    assert "No model is loaded" in blocker.args[0]


def test_cancel_is_prompt(qtbot, client: EngineClient) -> None:
    _load(qtbot, client)
    with qtbot.waitSignal(client.tokens_received, timeout=10_000):
        client.generate(GenerationRequest(prompt="slow", max_tokens=100_000))
    with pytest.raises(RuntimeError):
        client.generate(GenerationRequest(prompt="slow"))
    with qtbot.waitSignal(client.generation_finished, timeout=2000) as blocker:
        t0 = time.monotonic()
        client.cancel()
    assert time.monotonic() - t0 < 1.0
    assert blocker.args[0].finish_reason is FinishReason.CANCELLED


def test_crash_mid_reply_then_the_next_request_starts_a_new_engine(qtbot, client: EngineClient) -> None:
    _load(qtbot, client)
    first_pid = client.pid
    with qtbot.waitSignal(client.engine_died, timeout=20_000) as blocker:
        client.generate(GenerationRequest(prompt="crash", max_tokens=100))
    assert blocker.args[0] == (
        "The engine stopped unexpectedly (exit code 3). "
        "Your chat is saved; the next message starts a new engine."
    )
    assert not client.is_running and not client.is_generating and client.info is None
    with qtbot.waitSignal(client.generation_finished, timeout=20_000) as done:
        client.generate(GenerationRequest(prompt="again", max_tokens=5))
    assert done.args[0].text == "t0 t1 t2 t3 t4 "
    assert client.pid != first_pid and client.info is not None


def test_external_kill_9_mid_reply(qtbot, client: EngineClient) -> None:
    _load(qtbot, client)
    with qtbot.waitSignal(client.tokens_received, timeout=10_000):
        client.generate(GenerationRequest(prompt="slow", max_tokens=100_000))
    assert client.pid is not None
    with qtbot.waitSignal(client.engine_died, timeout=5000) as blocker:
        os.kill(client.pid, signal.SIGKILL)
    assert "(exit code -9)" in blocker.args[0]


def test_hung_engine_is_killed_after_cancel_timeout(qtbot, client: EngineClient) -> None:
    _load(qtbot, client)
    client.generate(GenerationRequest(prompt="hang", max_tokens=10))
    qtbot.wait(200)
    with qtbot.waitSignal(client.engine_died, timeout=5000) as blocker:
        client.cancel()
    assert "did not stop within 1 seconds" in blocker.args[0]
    assert not client.is_running
    _load(qtbot, client)  # and a new engine loads


def test_death_while_loading(qtbot, client: EngineClient) -> None:
    with qtbot.waitSignals([client.engine_died, client.load_failed], timeout=20_000):
        client.load(EngineConfig("/models/crash.gguf"))
    assert client.info is None


def test_window_and_api_requests_share_one_engine_and_queue_fairly(qtbot, client: EngineClient) -> None:
    _load(qtbot, client)
    pid = client.pid
    broker = client.broker
    api_jobs = [broker.submit(GenerationRequest(prompt="slow api", max_tokens=20), source="api:a")
                for _ in range(3)]
    seen: list[str] = []
    client.activity.connect(lambda source, event: seen.append(source))
    with qtbot.waitSignal(client.generation_finished, timeout=20_000) as done:
        client.generate(GenerationRequest(prompt="window", max_tokens=5))
    assert done.args[0].text == "t0 t1 t2 t3 t4 "
    # Round-robin by source: the API's queue had its turn (one or two requests), then the window's
    # reply, before the API's third request.
    assert api_jobs[0].done and not api_jobs[2].done
    assert seen and set(seen) == {"api:a"}  # the window hears what the API's requests are doing
    qtbot.waitUntil(lambda: api_jobs[2].done, timeout=20_000)
    assert client.pid == pid  # one engine process for both


def test_the_death_sentence_points_at_the_engine_log(qtbot, tmp_path) -> None:
    log_path = tmp_path / "engine.log"
    c = EngineClient(engine_factory=FAKE, cancel_timeout_s=1.0, log_path=str(log_path))
    try:
        _load(qtbot, c)
        with qtbot.waitSignal(c.engine_died, timeout=20_000) as blocker:
            c.generate(GenerationRequest(prompt="crash", max_tokens=100))
        assert blocker.args[0].endswith(f"What the engine said is in {log_path}.")
        assert log_path.exists() and "engine process started" in log_path.read_text(encoding="utf-8")
    finally:
        c.stop()
