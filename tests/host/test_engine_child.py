"""host.engine_child.EngineHost in this process, over a real pipe, with the fake engine: request order,
cancel seen mid-reply, errors as Failures of their kind, the app going away."""

from __future__ import annotations

import multiprocessing
import threading
from multiprocessing.connection import Connection

from localchat.engine.types import ConstraintKind, EngineConfig, GenerationRequest, OutputConstraint
from localchat.host.engine_child import EngineHost, load_factory
from localchat.host.events import Failed, FailureKind, Finished, Loaded, Tokens
from localchat.host.protocol import Cancel, Generate, Load, Shutdown

FAKE = "tests.host.fake_engine:FakeEngine"


def _host() -> tuple[Connection, threading.Thread]:
    app_end, child_end = multiprocessing.Pipe(duplex=True)
    host = EngineHost(child_end, load_factory(FAKE))
    thread = threading.Thread(target=host.run, daemon=True)
    thread.start()
    return app_end, thread


def _until(conn: Connection, kind: type) -> list[object]:
    seen: list[object] = []
    while True:
        assert conn.poll(20), f"no {kind.__name__} arrived"
        reply = conn.recv()
        seen.append(reply)
        if isinstance(reply, kind):
            return seen


def test_load_and_generate_in_order_and_errors_as_failures_of_their_kind() -> None:
    conn, thread = _host()
    conn.send(Load(EngineConfig(target_path="/m/missing.gguf")))
    failed = _until(conn, Failed)[-1]
    assert isinstance(failed, Failed) and failed.job == 0
    assert failed.failure.kind is FailureKind.LOAD_FAILED and "does not exist" in failed.failure.detail
    conn.send(Generate(1, "window", GenerationRequest(prompt="hello", max_tokens=5)))
    no_model = _until(conn, Failed)[-1]
    assert isinstance(no_model, Failed) and no_model.failure.kind is FailureKind.NO_MODEL

    conn.send(Load(EngineConfig(target_path="/m/t.gguf")))
    assert isinstance(_until(conn, Loaded)[-1], Loaded)
    conn.send(Generate(2, "api:a", GenerationRequest(prompt="hello", max_tokens=5)))
    replies = _until(conn, Finished)
    assert any(isinstance(r, Tokens) and r.job == 2 and r.source == "api:a" for r in replies)
    conn.send(Generate(3, "window", GenerationRequest(prompt="boom", max_tokens=5)))
    boom = _until(conn, Failed)[-1]
    assert isinstance(boom, Failed) and boom.job == 3 and boom.failure.kind is FailureKind.ENGINE_ERROR
    assert "RuntimeError: boom" in boom.failure.detail
    conn.send(Generate(4, "window", GenerationRequest(prompt="overflow", max_tokens=5)))
    overflow = _until(conn, Failed)[-1]
    assert isinstance(overflow, Failed) and overflow.failure.kind is FailureKind.CONTEXT_EXCEEDED
    assert (overflow.failure.needed, overflow.failure.n_ctx) == (5000, 4096)
    bad = OutputConstraint(ConstraintKind.JSON_SCHEMA, '{"type": "strng"}')
    conn.send(Generate(5, "api:x", GenerationRequest(prompt="bad schema", max_tokens=5, constraint=bad)))
    refused = _until(conn, Failed)[-1]
    assert isinstance(refused, Failed) and refused.failure.kind is FailureKind.INVALID_REQUEST  # a 400
    assert refused.failure.detail == "The JSON schema cannot be used: Invalid type: strng."
    conn.send(Shutdown())
    thread.join(10)
    assert not thread.is_alive()


def test_cancel_is_seen_while_generating_and_a_closed_pipe_ends_the_host() -> None:
    conn, thread = _host()
    conn.send(Load(EngineConfig(target_path="/m/t.gguf")))
    _until(conn, Loaded)
    conn.send(Generate(1, "window", GenerationRequest(prompt="slow", max_tokens=2000)))
    _until(conn, Tokens)
    conn.send(Cancel(1))
    finished = _until(conn, Finished)[-1]
    assert isinstance(finished, Finished) and finished.result.finish_reason.value == "cancelled"
    assert finished.result.stats.generated_tokens < 2000

    conn.send(Generate(2, "window", GenerationRequest(prompt="slow", max_tokens=2000)))
    _until(conn, Tokens)
    conn.close()  # the app went away mid-reply: the reply stops and the host leaves
    thread.join(20)
    assert not thread.is_alive()
