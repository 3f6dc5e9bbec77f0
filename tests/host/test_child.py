"""The one child-process layer (host/child.py): spawn by name, send, receive, death, parent gone, logs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from localchat.host.child import ChildGone, ChildProcess

ECHO = "tests.host.child_targets:echo"


def _receive(proc: ChildProcess, timeout: float = 30.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = proc.receive(0.1)
        if message is not None:
            return message
    raise AssertionError("no message from the child")


def test_spawn_by_name_send_receive_and_exit_code() -> None:
    proc = ChildProcess(ECHO, name="test-echo", what="echo")
    assert not proc.started and proc.pid is None and proc.exitcode is None
    proc.spawn("p")
    try:
        assert proc.started and proc.is_alive() and proc.pid
        proc.send({"a": 1})
        assert _receive(proc) == ("p", {"a": 1})
        assert proc.receive(0) is None  # nothing waiting: no block, no error
        proc.send("exit 7")
        with pytest.raises(ChildGone) as gone:
            _receive(proc)
        assert gone.value.what == "echo"
        assert proc.wait_exitcode(5.0) == 7
    finally:
        proc.kill()
        proc.close()
    assert proc.exitcode == 7  # still readable once the process object is released
    assert proc.pid  # so is the pid, which the supervisor logs when a closed engine's job ends
    with pytest.raises(ChildGone, match="echo process is not running"):
        proc.send("again")


def test_kill_and_stop_end_the_child() -> None:
    proc = ChildProcess(ECHO, name="test-echo", what="echo")
    proc.spawn("p")
    proc.send("hang")
    proc.kill()
    assert not proc.is_alive() and proc.exitcode not in (None, 0)
    with pytest.raises(ChildGone):
        proc.receive(0)
    with pytest.raises(RuntimeError):
        proc.spawn("p")  # one process per handle

    stopped = ChildProcess(ECHO, name="test-echo", what="echo", farewell="exit 0")
    stopped.spawn("p")
    stopped.stop(5.0)
    assert stopped.exitcode == 0  # it left on its own when asked, not killed


def test_child_sees_the_app_go_and_logs_to_its_file(tmp_path: Path) -> None:
    marker, log_path = tmp_path / "gone.txt", tmp_path / "child.log"
    proc = ChildProcess("tests.host.child_targets:watch_parent", name="test-watch", what="watcher")
    proc.spawn(str(marker), str(log_path))
    try:
        assert _receive(proc) == "ready"
        proc.send("hello")
        assert _receive(proc) == ("got", "hello")  # the reader thread hands messages over
        assert proc._conn is not None
        proc._conn.close()  # the app's end closes, as when the app quits or crashes
        proc._conn = None
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.read_text(encoding="utf-8") == "parent gone"
        assert proc.wait_exitcode(10.0) == 0
    finally:
        proc.kill()
        proc.close()
    text = log_path.read_text(encoding="utf-8")
    assert "test-child[" in text and "watching the parent" in text
