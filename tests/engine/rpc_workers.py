"""Real `localchat worker` processes on 127.0.0.1 for the RPC tests (the engine's and the bench's)."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import pytest

from localchat.engine.rpc_wire import Endpoint, ProbeStatus, probe


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def require_rpc() -> None:
    """Fail (never skip) where llama-cpp-python was built without the RPC backend."""
    from localchat.engine.devices import supports_rpc

    if not supports_rpc():
        pytest.fail("llama-cpp-python was built without the RPC backend (README: CMAKE_ARGS=-DGGML_RPC=on)")


def start_worker() -> tuple[subprocess.Popen[bytes], Endpoint]:
    """A worker with one thread, once it answers HELLO."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "localchat", "worker", "--port", str(port), "--threads", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    ep = Endpoint("127.0.0.1", port)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            pytest.fail(f"the worker exited at start: {err}")
        if probe(ep, timeout=2).status is ProbeStatus.READY:
            return proc, ep
        time.sleep(0.2)
    proc.kill()
    pytest.fail("the worker did not start listening in time")


def serve_loopback(handle: Callable[[socket.socket], None]) -> tuple[socket.socket, Endpoint]:
    """A listening socket on 127.0.0.1 that hands each connection to ``handle`` on a thread of its
    own (something that is not a worker, for the tests of what a worker's client does); close the
    socket to stop it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return server, Endpoint("127.0.0.1", server.getsockname()[1])


HELLO_BYTES = 1 + 8 + 24  # a client's HELLO: the command, its payload's size, the payload


def read_hello(conn: socket.socket) -> bytes:
    """What a client sends first, up to a whole HELLO (less where it hangs up first)."""
    data = b""
    while len(data) < HELLO_BYTES:
        chunk = conn.recv(64)
        if not chunk:
            break
        data += chunk
    return data


def hello_answer(major: int, minor: int, patch: int) -> bytes:
    """A worker's answer to HELLO, giving that protocol version."""
    return struct.pack("<Q", 28) + bytes([major, minor, patch, 0]) + bytes(24)
