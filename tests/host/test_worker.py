"""host.worker.EngineHost in this process, over a real pipe, with the fake engine: request order,
cancel seen mid-reply, errors as sentences, the app going away."""

from __future__ import annotations

import multiprocessing
import threading
from multiprocessing.connection import Connection

from localchat.engine.types import ConstraintKind, EngineConfig, GenerationRequest, OutputConstraint
from localchat.host.protocol import (
    Cancel,
    Failed,
    Finished,
    Generate,
    Load,
    Loaded,
    LoadFailed,
    Shutdown,
    Tokens,
    Unload,
    Unloaded,
)
from localchat.host.worker import EngineHost, load_factory

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


def test_load_generate_unload_in_order_and_errors_as_sentences() -> None:
    conn, thread = _host()
    conn.send(Load(EngineConfig(target_path="/m/missing.gguf")))
    failed = _until(conn, LoadFailed)[-1]
    assert isinstance(failed, LoadFailed) and "does not exist" in failed.message
    conn.send(Generate(1, GenerationRequest(prompt="hello", max_tokens=5)))
    no_model = _until(conn, Failed)[-1]
    assert isinstance(no_model, Failed) and "No model is loaded" in no_model.message

    conn.send(Load(EngineConfig(target_path="/m/t.gguf")))
    assert isinstance(_until(conn, Loaded)[-1], Loaded)
    conn.send(Generate(2, GenerationRequest(prompt="hello", max_tokens=5)))
    replies = _until(conn, Finished)
    assert any(isinstance(r, Tokens) and r.request_id == 2 for r in replies)
    conn.send(Generate(3, GenerationRequest(prompt="boom", max_tokens=5)))
    boom = _until(conn, Failed)[-1]
    assert isinstance(boom, Failed) and boom.request_id == 3 and "RuntimeError: boom" in boom.message
    assert boom.kind == ""
    bad = OutputConstraint(ConstraintKind.JSON_SCHEMA, '{"type": "strng"}')
    conn.send(Generate(4, GenerationRequest(prompt="bad schema", max_tokens=5, constraint=bad)))
    refused = _until(conn, Failed)[-1]
    assert isinstance(refused, Failed) and refused.kind == "GrammarError"  # the API answers 400
    assert refused.message == "The JSON schema cannot be used: Invalid type: strng."
    conn.send(Unload())
    assert isinstance(_until(conn, Unloaded)[-1], Unloaded)
    conn.send(Shutdown())
    thread.join(10)
    assert not thread.is_alive()


def test_cancel_is_seen_while_generating_and_a_closed_pipe_ends_the_host() -> None:
    conn, thread = _host()
    conn.send(Load(EngineConfig(target_path="/m/t.gguf")))
    _until(conn, Loaded)
    conn.send(Generate(1, GenerationRequest(prompt="slow", max_tokens=2000)))
    _until(conn, Tokens)
    conn.send(Cancel(1))
    finished = _until(conn, Finished)[-1]
    assert isinstance(finished, Finished) and finished.result.finish_reason.value == "cancelled"
    assert finished.result.stats.generated_tokens < 2000

    conn.send(Generate(2, GenerationRequest(prompt="slow", max_tokens=2000)))
    _until(conn, Tokens)
    conn.close()  # the app went away mid-reply: the reply stops and the host leaves
    thread.join(20)
    assert not thread.is_alive()
