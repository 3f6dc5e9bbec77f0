"""The engine process with the real Engine on SmolLM2-135M: load, stream, cancel, survive a kill."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from localchat.engine.types import (
    ChatMessage,
    DrafterKind,
    EngineConfig,
    FinishReason,
    GenerationRequest,
    SpeculationConfig,
)
from localchat.host.child import ChildGone, ChildProcess
from localchat.host.events import Event, Failed, Finished, Loaded, Tokens
from localchat.host.protocol import Cancel, Generate, Load

from .processes import engine_process

# A raw prompt that greedy decoding keeps continuing (no early end of text).
LONG = GenerationRequest(
    prompt="Counting: 1, 2, 3, 4, 5, 6, 7, 8,", max_tokens=4000, speculation=SpeculationConfig(enabled=False)
)
PROMPT = (ChatMessage("user", "List the days of the week, one per line."),)


def _next(proc: ChildProcess, timeout: float = 120.0) -> Event:
    reply = proc.receive(timeout)
    assert reply is not None, "no reply from the engine in time"
    return reply


@pytest.fixture(scope="module")
def engine(smollm2_path: Path):
    proc = engine_process()
    # SmolLM2 drafting for itself: speculation runs and is accepted almost always.
    proc.send(Load(EngineConfig(str(smollm2_path), draft_path=str(smollm2_path), n_ctx=1024)))
    reply = _next(proc)
    assert isinstance(reply, Loaded), reply
    yield proc, reply.info
    proc.stop()


def test_generate_streams_tokens_with_statistics(engine) -> None:
    proc, info = engine
    assert info.draft is not None and info.speculation.active
    request = GenerationRequest(
        messages=PROMPT,
        max_tokens=24,
        speculation=SpeculationConfig(drafter=DrafterKind.MODEL, adaptive=False),
    )
    proc.send(Generate(1, "window", request))
    tokens: list[Tokens] = []
    while True:
        reply = _next(proc)
        if isinstance(reply, Tokens):
            tokens.append(reply)
            continue
        assert isinstance(reply, Finished), reply
        break
    result = reply.result
    assert result.finish_reason in (FinishReason.STOP, FinishReason.LENGTH)
    assert result.text.strip()
    assert tokens and "".join(t.event.text for t in tokens) == result.text
    # The engine sends no event for a step whose text it holds back, so counts may trail.
    assert 0 < sum(t.event.n_tokens for t in tokens) <= result.stats.generated_tokens
    assert result.stats.tokens_per_s > 0
    assert tokens[-1].event.stats.tokens_per_s > 0
    assert result.stats.acceptance_length > 1.0


def test_cancel_returns_promptly_and_the_engine_stays_usable(engine) -> None:
    proc, _ = engine
    proc.send(Generate(2, "window", LONG))
    first = _next(proc)
    assert isinstance(first, Tokens)
    seen = first.event.stats.generated_tokens
    started = time.monotonic()
    proc.send(Cancel(2))
    while True:
        reply = _next(proc, 30)
        if not isinstance(reply, Tokens):
            break
        seen = reply.event.stats.generated_tokens
    assert isinstance(reply, Failed | Finished), reply
    assert isinstance(reply, Finished), reply.failure
    assert reply.result.finish_reason is FinishReason.CANCELLED
    # Promptly means within about one engine step of the cancel. Wall-clock time depends on how
    # busy the machine is (a step took seconds on a shared 2-core runner), so count tokens instead.
    assert reply.result.stats.generated_tokens - seen <= 2
    assert time.monotonic() - started < 20
    proc.send(Generate(3, "window", GenerationRequest(messages=PROMPT, max_tokens=4)))
    while isinstance(reply := _next(proc), Tokens):
        pass
    assert isinstance(reply, Finished) and reply.result.stats.generated_tokens > 0


def test_kill_mid_reply_then_a_new_process_works(smollm2_path: Path) -> None:
    config = EngineConfig(str(smollm2_path), n_ctx=512)
    proc = engine_process()
    try:
        proc.send(Load(config))
        assert isinstance(_next(proc), Loaded)
        proc.send(Generate(1, "window", LONG))
        assert isinstance(_next(proc), Tokens)
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        with pytest.raises(ChildGone):
            while True:
                _next(proc, 10)
    finally:
        proc.kill()
    assert proc.exitcode == -signal.SIGKILL

    fresh = engine_process()
    try:
        fresh.send(Load(config))
        assert isinstance(_next(fresh), Loaded)
        fresh.send(Generate(1, "window", GenerationRequest(messages=PROMPT, max_tokens=4)))
        while isinstance(reply := _next(fresh), Tokens):
            pass
        assert isinstance(reply, Finished) and reply.result.text
    finally:
        fresh.stop()
