"""The engine process and its protocol, with a fake engine (fast; the real engine is in test_process_real)."""

from __future__ import annotations

import time

import pytest

from localchat.engine.types import EngineConfig, FinishReason, GenerationRequest
from localchat.host import EngineGone, EngineProcess
from localchat.host.protocol import (
    Cancel,
    Failed,
    Finished,
    Generate,
    Load,
    Loaded,
    LoadFailed,
    Reply,
    Tokens,
    Unload,
    Unloaded,
)

from . import fake_engine

FAKE = f"{fake_engine.__name__}:FakeEngine"


def _next(proc: EngineProcess, timeout: float = 20.0) -> Reply:
    reply = proc.receive(timeout)
    assert reply is not None, "no reply in time"
    return reply


def _until_done(proc: EngineProcess, rid: int) -> tuple[list[Tokens], Reply]:
    tokens: list[Tokens] = []
    while True:
        reply = _next(proc)
        if isinstance(reply, Tokens):
            assert reply.request_id == rid
            tokens.append(reply)
        else:
            return tokens, reply


@pytest.fixture
def proc():
    p = EngineProcess(FAKE)
    p.start()
    yield p
    p.stop()


def test_load_generate_cancel_unload(proc: EngineProcess) -> None:
    proc.send(Generate(1, GenerationRequest(prompt="hi", max_tokens=3)))
    assert _next(proc) == Failed(1, "No model is loaded; choose a model first.")

    proc.send(Load(EngineConfig("/models/missing.gguf")))
    reply = _next(proc)
    assert isinstance(reply, LoadFailed) and "does not exist" in reply.message

    proc.send(Load(EngineConfig("/models/fake.gguf")))
    reply = _next(proc)
    assert isinstance(reply, Loaded) and reply.info.backend == "CPU"

    proc.send(Generate(2, GenerationRequest(prompt="hi", max_tokens=400)))
    tokens, done = _until_done(proc, 2)
    assert isinstance(done, Finished) and done.result.finish_reason is FinishReason.LENGTH
    assert "".join(t.event.text for t in tokens) == done.result.text
    assert sum(t.event.n_tokens for t in tokens) == 400
    # 400 tokens at ~2 kHz take ~0.2-0.5 s: merged into far fewer than 400 messages.
    assert len(tokens) < 60

    proc.send(Generate(3, GenerationRequest(prompt="slow", max_tokens=10_000)))
    assert isinstance(_next(proc), Tokens)
    started = time.monotonic()
    proc.send(Cancel(3))
    _, done = _until_done(proc, 3)
    assert time.monotonic() - started < 1.0
    assert isinstance(done, Finished) and done.result.finish_reason is FinishReason.CANCELLED

    proc.send(Generate(4, GenerationRequest(prompt="overflow")))
    assert _next(proc) == Failed(4, "The message is too long (5000 of 4096 tokens).")
    proc.send(Generate(5, GenerationRequest(prompt="boom")))
    reply = _next(proc)
    assert isinstance(reply, Failed) and "RuntimeError: boom" in reply.message

    proc.send(Unload())
    assert isinstance(_next(proc), Unloaded)


def test_cancel_before_generate_starts(proc: EngineProcess) -> None:
    proc.send(Load(EngineConfig("/models/fake.gguf")))
    proc.send(Generate(1, GenerationRequest(prompt="slow", max_tokens=10_000)))
    proc.send(Cancel(1))
    assert isinstance(_next(proc), Loaded)
    _, done = _until_done(proc, 1)
    assert isinstance(done, Finished) and done.result.finish_reason is FinishReason.CANCELLED


def test_child_death_is_seen_as_engine_gone(proc: EngineProcess) -> None:
    proc.send(Load(EngineConfig("/models/fake.gguf")))
    assert isinstance(_next(proc), Loaded)
    proc.send(Generate(1, GenerationRequest(prompt="crash", max_tokens=100)))
    with pytest.raises(EngineGone):
        while True:
            _next(proc)
    deadline = time.monotonic() + 5
    while proc.exitcode is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.exitcode == 3
    assert not proc.is_alive()


def test_stop_ends_the_process() -> None:
    p = EngineProcess(FAKE)
    p.start()
    assert p.is_alive()
    p.stop()
    assert not p.is_alive() and p.exitcode == 0
