"""Worker addresses and the HELLO probe, against small TCP peers on 127.0.0.1 answering as workers do."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from localchat.engine.rpc_wire import (
    DEFAULT_PORT,
    PROTOCOL_VERSION,
    Endpoint,
    ProbeStatus,
    WorkerAddressError,
    first_gone,
    parse_endpoint,
    parse_endpoints,
    probe,
)
from tests.engine.rpc_workers import HELLO_BYTES, hello_answer, read_hello


def test_parse_endpoint_forms() -> None:
    assert parse_endpoint("10.0.0.2:50053") == Endpoint("10.0.0.2", 50053)
    assert parse_endpoint(" box.local ") == Endpoint("box.local", DEFAULT_PORT)
    assert parse_endpoint("[::1]:7000") == Endpoint("::1", 7000)
    assert str(Endpoint("::1", 7000)) == "[::1]:7000"


@pytest.mark.parametrize("text", ["", ":50052", "host:abc", "host:0", "host:70000", "::1:50052"])
def test_parse_endpoint_refuses_with_a_sentence(text: str) -> None:
    with pytest.raises(WorkerAddressError) as err:
        parse_endpoint(text)
    assert "worker" in str(err.value).lower()


def test_parse_endpoints_refuses_duplicates() -> None:
    assert parse_endpoints("a:1, b:2,") == (Endpoint("a", 1), Endpoint("b", 2))
    with pytest.raises(WorkerAddressError, match="twice"):
        parse_endpoints("a:1,a:1")


def _peer(reply: bytes | None) -> Iterator[Endpoint]:
    """A one-connection TCP peer: reads a HELLO, answers ``reply`` (None: never answers)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        try:
            conn, _ = srv.accept()
        except OSError:  # the test ended before a client came
            return
        with conn:
            data = read_hello(conn)
            if len(data) < HELLO_BYTES:
                return
            assert data[0] == 14 and struct.unpack("<Q", data[1:9])[0] == 24
            if reply is not None:
                conn.sendall(reply)
            stop.wait(5)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield Endpoint("127.0.0.1", port)
    stop.set()
    srv.close()


def test_probe_ready() -> None:
    for ep in _peer(hello_answer(*PROTOCOL_VERSION)):
        result = probe(ep)
        assert result.status is ProbeStatus.READY and result.version == PROTOCOL_VERSION


def test_probe_names_both_versions_when_they_differ() -> None:
    for ep in _peer(hello_answer(PROTOCOL_VERSION[0] + 1, 0, 0)):
        result = probe(ep)
        assert result.status is ProbeStatus.VERSION_MISMATCH
        sentence = result.sentence()
        assert f"{PROTOCOL_VERSION[0] + 1}.0.0" in sentence
        assert ".".join(map(str, PROTOCOL_VERSION)) in sentence
        assert str(ep) in sentence


def test_probe_busy_worker_is_not_called_dead() -> None:
    for ep in _peer(None):
        result = probe(ep, timeout=0.5)
        assert result.status is ProbeStatus.BUSY
        assert "busy" in result.sentence()


def test_probe_something_else() -> None:
    for ep in _peer(b"HTTP/1.1 400 Bad Request\r\n\r\n"):
        assert probe(ep).status is ProbeStatus.NOT_RPC


def test_probe_and_first_gone_on_a_closed_port() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    dead = Endpoint("127.0.0.1", port)
    result = probe(dead)
    assert result.status is ProbeStatus.UNREACHABLE
    assert str(dead) in result.sentence() and "localchat worker" in result.sentence()
    for live in _peer(hello_answer(*PROTOCOL_VERSION)):
        assert first_gone([live, dead]) == dead
