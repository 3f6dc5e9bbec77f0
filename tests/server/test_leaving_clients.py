"""Clients and users that leave mid-reply, on a real server over the real SmolLM2-135M: a non-streaming
client that hangs up cancels its job at once, and Ctrl+C on `localchat serve` while a client streams
ends it without a traceback and without leaving its engine process behind.

Judged by what the engine did (the job's end reason, its token count) and by which processes remain,
not by timings: a busy machine takes its time."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest

from localchat.engine.types import FinishReason
from localchat.host.events import Failed, FailureKind, Finished, Tokens
from localchat.host.sources import Surface, surface_of
from tests.server.served import API_KEY, serve

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
COUNTING = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"  # a raw prompt the model keeps continuing
MAX_TOKENS = 500


def test_a_non_streaming_client_that_leaves_cancels_its_job(smollm2_path: Path) -> None:
    with serve(smollm2_path, ctx=1024, max_tokens=MAX_TOKENS) as s:
        host, port = s.url.removeprefix("http://").rsplit(":", 1)
        body = json.dumps({"prompt": COUNTING, "max_tokens": MAX_TOKENS, "temperature": 0,
                           "stream": False}).encode()
        sock = socket.create_connection((host, int(port)), timeout=30)
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Authorization: Bearer " + API_KEY.encode() + b"\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        deadline = time.monotonic() + 120
        while not any(isinstance(e, Tokens) and e.event.n_tokens and surface_of(e.source) is Surface.OPENAI
                      for e in s.events):
            assert time.monotonic() < deadline, "the job never started writing"
            time.sleep(0.005)
        sock.close()  # gone while the engine writes, its tokens flowing with hardly a pause
        at_close = len(s.events)
        while s.supervisor.running_source is not None or s.supervisor.queued:
            assert time.monotonic() < deadline, "the engine is still busy"
            time.sleep(0.02)
        ends = [e for e in s.events
                if isinstance(e, Finished | Failed) and surface_of(e.source) is Surface.OPENAI]
        assert len(ends) == 1
        end = ends[0]
        if isinstance(end, Finished):
            assert end.result.finish_reason is FinishReason.CANCELLED
            assert end.result.stats.generated_tokens < MAX_TOKENS
        else:
            assert end.failure.kind is FailureKind.CANCELLED
        # Cancelled at the disconnect, not at the next pause of the engine (which may never come): the
        # engine stopped within a few steps of it.
        written_after = [e for e in s.events[at_close:] if isinstance(e, Tokens) and e.event.n_tokens]
        assert len(written_after) <= 10, len(written_after)


def test_ctrl_c_on_serve_while_a_client_streams(smollm2_path: Path) -> None:
    serve_process = subprocess.Popen(
        [sys.executable, "-m", "localchat", "serve", "--model", str(smollm2_path), "--port", "0",
         "--ctx", "1024", "--no-spec"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own process group: Ctrl+C reaches it and its children, as in a terminal
    )
    try:
        assert serve_process.stdout is not None
        line = serve_process.stdout.readline()
        assert "serving" in line, serve_process.stderr.read() if serve_process.stderr else line
        url = line.split(" at ", 1)[1].split()[0]
        children = psutil.Process(serve_process.pid).children(recursive=True)
        assert children, "serve runs its engine in a child process"
        chunks: list[str] = []
        streamed = threading.Event()

        def stream() -> None:
            try:
                with httpx.stream("POST", url + "/completions", timeout=60,
                                  json={"prompt": COUNTING, "max_tokens": MAX_TOKENS, "stream": True}) as r:
                    for chunk in r.iter_lines():
                        chunks.append(chunk)
                        if len(chunks) >= 6:
                            streamed.set()
            except httpx.HTTPError:
                pass  # the server went away mid-stream: that is the point
            streamed.set()

        client = threading.Thread(target=stream, daemon=True)
        client.start()
        assert streamed.wait(120) and len(chunks) >= 6, chunks
        os.killpg(serve_process.pid, signal.SIGINT)  # what Ctrl+C in its terminal does
        code = serve_process.wait(60)
        client.join(30)
    finally:
        if serve_process.poll() is None:
            os.killpg(serve_process.pid, signal.SIGKILL)
            serve_process.wait()
    errors = serve_process.stderr.read() if serve_process.stderr else ""
    assert code == 0, errors
    assert "Traceback" not in errors and "KeyboardInterrupt" not in errors, errors
    deadline = time.monotonic() + 10
    left = [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [c for c in left if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert not left, f"left running after serve ended: {left}"
