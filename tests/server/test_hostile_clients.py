"""Bodies and connections meant to hurt a real server on 127.0.0.1: nesting 100,000 levels deep, a body
or headers sent one byte at a time, more slow connections than the open-file limit allows. Each is
refused (a 400 or 408 sentence, or a closed connection) while the server keeps answering others.

No model is loaded (the server answers before a job would start), so these are fast; time-outs
are set to a second here through the settings the server takes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from localchat.server.body import MAX_DEPTH, depth
from localchat.server.connections import FD_MARGIN, default_max_connections
from tests.server.served import API_KEY, Served, serve

ROOT = Path(__file__).resolve().parents[2]
AUTH = f"Authorization: Bearer {API_KEY}\r\n".encode()


@pytest.fixture
def served() -> Iterator[Served]:
    with serve(None, start=False, body_timeout_s=1.0, header_timeout_s=1.0, max_connections=8) as s:
        yield s


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def answered(sock: socket.socket, within: float) -> bytes | None:
    """What the server sent before it closed ``sock`` (b"" for a bare close); None: still open."""
    sock.settimeout(within)
    got = b""
    try:
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                return got
            got += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        return got


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/api/chat", "/v1/responses"])
@pytest.mark.parametrize("body", [
    "[" * 100_000,  # unbalanced: the decoder's recursion ends it
    "[" * 50_000 + "]" * 50_000,
    '{"messages": ' + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "}",  # within the decoder's limit
], ids=["open-100k", "closed-50k", "just-over-the-cap"])
def test_deep_nesting_is_a_400_sentence(served: Served, path: str, body: str) -> None:
    with served.http() as http:
        start = time.monotonic()
        r = http.post(path, content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 400, r.text
        assert "levels deep" in r.text and "Traceback" not in r.text
        assert time.monotonic() - start < 10  # no stall (generous for a busy machine)
        assert http.get("/v1/models").status_code == 200


def test_depth_is_measured_without_recursion() -> None:
    value: object = 1
    for _ in range(50_000):
        value = [value]
    assert depth(value) == MAX_DEPTH + 1  # stops counting past the cap
    assert depth({"a": [1, {"b": []}]}) == 4 and depth("x") == 0


def test_a_slow_body_times_out_while_others_are_answered(served: Served) -> None:
    sock = connect(served.url)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + AUTH +
                 b"Content-Type: application/json\r\nContent-Length: 200\r\n\r\n")
    reply = b""
    with served.http() as http:
        for i in range(40):  # one byte every 0.2 s: 8 s, well past the 1 s time-out
            try:
                sock.sendall(b"{"[:1] if i == 0 else b" ")
            except OSError:
                break  # closed by the server
            sock.settimeout(0.2)
            try:
                chunk = sock.recv(4096)
            except TimeoutError:
                chunk = None
            except ConnectionResetError:
                chunk = b""
            if chunk is not None:
                reply = chunk + (answered(sock, 3.0) or b"") if chunk else b""
                break
            assert http.get("/v1/models", timeout=5).status_code == 200  # the others are answered meanwhile
    sock.close()
    assert i < 30, "the slow body was never cut off"
    assert reply == b"" or reply.startswith(b"HTTP/1.1 408"), reply
    if reply:
        assert b"did not arrive within 1 seconds" in reply and b"Traceback" not in reply


def test_slow_headers_are_closed(served: Served) -> None:
    sock = connect(served.url)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    got = answered(sock, 6.0)
    sock.close()
    assert got is not None, "the slow headers held their connection past the time-out"
    assert got == b"" or got.startswith(b"HTTP/1.1 408")


def test_more_slow_connections_than_allowed_do_not_stop_the_server() -> None:
    with serve(None, start=False, header_timeout_s=60.0, max_connections=8) as s:
        slow = [connect(s.url) for _ in range(30)]
        for sock in slow:
            sock.sendall(b"GET /v1/models HTTP/1.1\r\n")  # headers never finished
        with s.http() as http:
            start = time.monotonic()
            assert http.get("/v1/models", timeout=10).status_code == 200
            assert time.monotonic() - start < 8  # made room at once, not after the 60 s time-out
        closed = sum(answered(sock, 0.3) is not None for sock in slow)
        for sock in slow:
            sock.close()
        assert closed >= 30 - 8


def test_the_default_bound_leaves_room_under_the_open_file_limit() -> None:
    resource = pytest.importorskip("resource")
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert default_max_connections() <= max(16, soft - FD_MARGIN)


SERVER = """
import resource, sys, time
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from tests.server.served import serve
with serve(None, start=False, header_timeout_s=60.0) as s:
    print(s.url, flush=True)
    sys.stdin.read()
"""


@pytest.mark.skipif(sys.platform == "win32", reason="the open-file limit is set with Unix's setrlimit")
def test_slow_connections_past_the_open_file_limit_leave_the_server_answering() -> None:
    """The issue's case scaled down: 300 slow connections to a server that may open 256 files."""
    server = subprocess.Popen([sys.executable, "-c", SERVER], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        assert url.startswith("http://"), server.stderr.read() if server.stderr else ""
        slow = []
        for _ in range(300):
            sock = connect(url)
            sock.sendall(b"GET /v1/models HTTP/1.1\r\n")
            slow.append(sock)
        headers = {"Authorization": f"Bearer {API_KEY}"}
        for _ in range(3):
            start = time.monotonic()
            r = httpx.get(url + "/v1/models", headers=headers, timeout=15)
            assert r.status_code == 200 and json.loads(r.text)["data"]
            assert time.monotonic() - start < 10
        for sock in slow:
            sock.close()
    finally:
        if server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    errors = server.stderr.read() if server.stderr else ""
    assert "Traceback" not in errors, errors
