"""`localchat generate` and `localchat bench` with the target on a real `localchat worker` that is killed
mid-run: llama.cpp aborts the process the engine runs in, which must be the engine's own child, so the
command ends with one sentence naming the worker (no abort, no backtrace) and keeps what was done:
the reply written so far, the benchmark's finished records with their summary and JSON.

SmolLM2-135M, the fastest real model, entirely on the worker (--tensor-split 0,1)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from localchat.engine.rpc_wire import PROTOCOL_VERSION, Endpoint
from tests.engine.rpc_workers import hello_answer, read_hello, require_rpc, serve_loopback, start_worker

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ABORT_WORDS = ("Traceback", "Remote RPC server crashed", "GGML_ASSERT", "gdb", "Inferior", "Aborted")


def start(args: list[str], state: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "XDG_STATE_HOME": str(state)}  # the engine's log goes under tmp_path
    return subprocess.Popen([sys.executable, "-m", "localchat", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def read_until(proc: subprocess.Popen[bytes], done: bytes | int) -> bytes:
    """stdout until it holds ``done`` (bytes) or that many bytes (int); fails if the process ends first."""
    assert proc.stdout is not None
    got = b""
    while (done not in got) if isinstance(done, bytes) else (len(got) < done):
        chunk = os.read(proc.stdout.fileno(), 4096)
        assert chunk, f"the command ended first: {got!r}"
        got += chunk
    return got


def check_ending(proc: subprocess.Popen[bytes], worker: str, state: Path) -> tuple[str, str]:
    out, err = proc.communicate(timeout=300)
    stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
    assert proc.returncode == 1, stderr
    assert f"The worker {worker} stopped answering" in stderr, stderr
    assert not [w for w in ABORT_WORDS if w in stdout + stderr], stdout + stderr
    log = state / "localchat" / "log" / "cli-engine.log"
    assert str(log) in stderr
    assert "Remote RPC server crashed" in log.read_text(errors="replace")  # llama.cpp's words, in the log
    return stdout, stderr


def lose_the_worker(
    args: Callable[[Endpoint], list[str]], when: bytes | int, state: Path
) -> tuple[bytes, str]:
    """Run ``localchat ARGS`` (made for a fresh real worker's endpoint), kill the worker once stdout
    holds ``when``, and check the ending (``check_ending``); (stdout before the kill, stdout after)."""
    require_rpc()
    worker, endpoint = start_worker()
    try:
        proc = start(args(endpoint), state)
        before = read_until(proc, when)
        worker.kill()
        worker.wait(10)
        stdout, _ = check_ending(proc, str(endpoint), state)
    finally:
        worker.kill()
        worker.wait(10)
    return before, stdout


def test_generate_names_the_lost_worker_and_keeps_the_reply(tmp_path: Path, smollm2_path: Path) -> None:
    before, stdout = lose_the_worker(
        lambda ep: ["generate", "--model", str(smollm2_path), "--no-spec", "--raw", "--rpc", str(ep),
                    "--tensor-split", "0,1", "--max-tokens", "2000", "--ctx", "2048",
                    "Counting: 1, 2, 3, 4, 5,"],
        40, tmp_path)  # it is writing
    assert (before.decode() + stdout).startswith(before.decode()) and len(before.decode() + stdout) >= 40


def test_bench_names_the_lost_worker_and_keeps_the_finished_records(
    tmp_path: Path, smollm2_path: Path
) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(
        json.dumps({"id": f"p{i}", "category": "chat", "prompt": f"Count from {i} to {i + 40}."}) + "\n"
        for i in range(8)))
    report = tmp_path / "r.json"
    _, stdout = lose_the_worker(
        lambda ep: ["bench", "--model", str(smollm2_path), "--rpc", str(ep), "--tensor-split", "0,1",
                    "--prompts", str(prompts), "--modes", "off,ngram", "--max-tokens", "48",
                    "--ctx", "1024", "--json", str(report)],
        b"[  2/", tmp_path)  # two records done
    assert "vs off" in stdout  # the summary of what was done
    data = json.loads(report.read_text())
    assert data["complete"] is False
    assert 2 <= len(data["records"]) < 16
    assert {rec["mode"] for rec in data["records"]} <= {"off", "ngram"}


@pytest.fixture
def rude_worker() -> Iterator[Endpoint]:
    """Something on 127.0.0.1 that answers every HELLO as a worker of this version does, then hangs up."""
    def greet(conn: socket.socket) -> None:
        with conn:
            read_hello(conn)
            conn.sendall(hello_answer(*PROTOCOL_VERSION))

    server, endpoint = serve_loopback(greet)
    yield endpoint
    server.close()


@pytest.mark.parametrize("command", ["generate", "bench"])
def test_a_worker_that_hangs_up_after_the_greeting_is_named(
    command: str, rude_worker: Endpoint, tmp_path: Path, smollm2_path: Path
) -> None:
    require_rpc()
    args = [command, "--model", str(smollm2_path), "--rpc", str(rude_worker), "--tensor-split", "0,1",
            "--max-tokens", "8", "--ctx", "512"]
    args += ["--no-spec", "hi"] if command == "generate" else ["--modes", "off", "--limit", "1"]
    proc = start(args, tmp_path)
    _, stderr = check_ending(proc, str(rude_worker), tmp_path)
    assert "while loading the model" in stderr and "damaged" not in stderr
