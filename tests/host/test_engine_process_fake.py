"""The engine process and its protocol, with a fake engine (fast; the real engine is in
test_engine_process_real)."""

from __future__ import annotations

import time

import pytest

from localchat.engine.types import EngineConfig, FinishReason, GenerationRequest
from localchat.host.child import ChildGone, ChildProcess
from localchat.host.events import Event, Failed, Failure, FailureKind, Finished, Loaded, Tokens
from localchat.host.protocol import Cancel, Generate, Load

from . import fake_engine
from .processes import engine_process

FAKE = f"{fake_engine.__name__}:FakeEngine"


def _next(proc: ChildProcess, timeout: float = 20.0) -> Event:
    reply = proc.receive(timeout)
    assert reply is not None, "no reply in time"
    return reply


def _until_done(proc: ChildProcess, rid: int) -> tuple[list[Tokens], Event]:
    tokens: list[Tokens] = []
    while True:
        reply = _next(proc)
        if isinstance(reply, Tokens):
            assert reply.job == rid
            tokens.append(reply)
        else:
            return tokens, reply


@pytest.fixture
def proc():
    p = engine_process(FAKE)
    yield p
    p.stop()


def test_load_generate_cancel(proc: ChildProcess) -> None:
    proc.send(Generate(1, "window", GenerationRequest(prompt="hi", max_tokens=3)))
    assert _next(proc) == Failed(1, "window", Failure(FailureKind.NO_MODEL))

    proc.send(Load(EngineConfig("/models/missing.gguf")))
    reply = _next(proc)
    assert isinstance(reply, Failed) and reply.failure.kind is FailureKind.LOAD_FAILED
    assert "does not exist" in reply.failure.detail

    proc.send(Load(EngineConfig("/models/fake.gguf")))
    reply = _next(proc)
    assert isinstance(reply, Loaded) and reply.info.backend == "CPU"

    proc.send(Generate(2, "window", GenerationRequest(prompt="hi", max_tokens=400)))
    tokens, done = _until_done(proc, 2)
    assert isinstance(done, Finished) and done.result.finish_reason is FinishReason.LENGTH
    assert "".join(t.event.text for t in tokens) == done.result.text
    assert sum(t.event.n_tokens for t in tokens) == 400
    # 400 tokens at ~2 kHz take ~0.2-0.5 s: merged into far fewer than 400 messages.
    assert len(tokens) < 60

    proc.send(Generate(3, "window", GenerationRequest(prompt="slow", max_tokens=10_000)))
    assert isinstance(_next(proc), Tokens)
    started = time.monotonic()
    proc.send(Cancel(3))
    _, done = _until_done(proc, 3)
    assert time.monotonic() - started < 1.0
    assert isinstance(done, Finished) and done.result.finish_reason is FinishReason.CANCELLED

    proc.send(Generate(4, "window", GenerationRequest(prompt="overflow")))
    reply = _next(proc)
    assert isinstance(reply, Failed) and reply.failure.kind is FailureKind.CONTEXT_EXCEEDED
    proc.send(Generate(5, "window", GenerationRequest(prompt="boom")))
    reply = _next(proc)
    assert isinstance(reply, Failed) and "RuntimeError: boom" in reply.failure.detail


def test_cancel_before_generate_starts(proc: ChildProcess) -> None:
    proc.send(Load(EngineConfig("/models/fake.gguf")))
    proc.send(Generate(1, "window", GenerationRequest(prompt="slow", max_tokens=10_000)))
    proc.send(Cancel(1))
    assert isinstance(_next(proc), Loaded)
    _, done = _until_done(proc, 1)
    assert isinstance(done, Finished) and done.result.finish_reason is FinishReason.CANCELLED


def test_child_death_is_seen_as_child_gone(proc: ChildProcess) -> None:
    proc.send(Load(EngineConfig("/models/fake.gguf")))
    assert isinstance(_next(proc), Loaded)
    proc.send(Generate(1, "window", GenerationRequest(prompt="crash", max_tokens=100)))
    with pytest.raises(ChildGone):
        while True:
            _next(proc)
    deadline = time.monotonic() + 5
    while proc.exitcode is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.exitcode == 3
    assert not proc.is_alive()


def test_stop_ends_the_process() -> None:
    p = engine_process(FAKE)
    assert p.is_alive()
    p.stop()
    assert not p.is_alive() and p.exitcode == 0
