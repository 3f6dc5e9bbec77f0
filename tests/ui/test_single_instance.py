"""One localchat per chat history: a second start brings the first window to the front and ends.

Two instances writing one history lost messages (issue 29). These tests start the app's real entry
point (``run_app``) in two child processes on the same user folders, as a user double-clicking twice
does.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

FIRST = textwrap.dedent(
    """
    import sys, time
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    app = QApplication(sys.argv)
    started = time.monotonic()
    state = {"window": None}

    def watch():
        windows = [w for w in app.topLevelWidgets() if w.isVisible() or w.isMinimized()]
        if state["window"] is None and windows:
            state["window"] = windows[0]
            windows[0].showMinimized()
            print("READY", flush=True)
        elif state["window"] is not None and not state["window"].isMinimized():
            print("RAISED", flush=True)
            app.quit()
            return
        if time.monotonic() - started > 90:
            app.quit()
            return
        QTimer.singleShot(50, watch)

    QTimer.singleShot(50, watch)
    from localchat.app import run_app

    sys.exit(run_app(sys.argv))
    """
)

SECOND = textwrap.dedent(
    """
    import sys
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QMessageBox

    app = QApplication(sys.argv)

    def look():
        for w in app.topLevelWidgets():
            if isinstance(w, QMessageBox) and w.isVisible():
                print("BOX:", w.text().replace(chr(10), " "), flush=True)
                w.accept()
            elif w.isVisible():
                print("WINDOW:", w.windowTitle(), flush=True)
                app.quit()
        QTimer.singleShot(100, look)

    QTimer.singleShot(100, look)
    from localchat.app import run_app

    code = run_app(sys.argv)
    print("EXIT", code, flush=True)
    sys.exit(code)
    """
)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The user folders in ``tmp_path``, and Qt's local socket in a short folder removed at the end."""
    sockets = Path(tempfile.mkdtemp(prefix="lc"))  # short: a socket's path has a length limit
    env = dict(os.environ)
    env.update(
        TMPDIR=str(sockets),  # where Qt puts the local socket (a killed app leaves it behind)
        QT_QPA_PLATFORM="offscreen",
        HOME=str(tmp_path),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    yield env
    shutil.rmtree(sockets, ignore_errors=True)


def _start_first(env: dict[str, str]) -> subprocess.Popen[str]:
    first = subprocess.Popen(
        [sys.executable, "-c", FIRST], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert first.stdout is not None
    for line in first.stdout:
        if line.strip() == "READY":
            return first
    first.wait(timeout=30)
    raise AssertionError(f"the first app never showed its window (exit {first.returncode})")


def test_a_second_start_brings_the_first_window_forward_and_opens_nothing(env: dict[str, str]) -> None:
    first = _start_first(env)
    try:
        second = subprocess.run(
            [sys.executable, "-c", SECOND], env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert first.stdout is not None
        rest, _ = first.communicate(timeout=120)
    finally:
        first.kill()
        first.wait(timeout=30)
    out = second.stdout + second.stderr
    assert "WINDOW:" not in second.stdout and "BOX:" not in second.stdout, out[-3000:]
    assert "EXIT 0" in second.stdout, out[-3000:]
    assert "localchat is already running" in second.stderr, out[-3000:]
    assert "RAISED" in rest, rest[-3000:]
    assert first.returncode == 0, rest[-3000:]


@pytest.mark.skipif(os.name != "posix", reason="stops the first app with SIGSTOP")
def test_a_second_start_while_the_first_is_frozen_says_so_and_opens_nothing(env: dict[str, str]) -> None:
    first = _start_first(env)
    try:
        os.kill(first.pid, signal.SIGSTOP)  # a frozen first app: it holds the history but cannot answer
        started = time.monotonic()
        second = subprocess.run(
            [sys.executable, "-c", SECOND], env=env, capture_output=True, text=True, timeout=120, check=False
        )
        waited = time.monotonic() - started
        os.kill(first.pid, signal.SIGCONT)
    finally:
        first.kill()
        first.wait(timeout=30)
    out = second.stdout + second.stderr
    assert "WINDOW:" not in second.stdout, out[-3000:]
    assert "BOX: localchat is already running" in second.stdout, out[-3000:]
    assert "EXIT 1" in second.stdout, out[-3000:]
    assert waited < 100, waited


def test_a_killed_first_app_does_not_lock_out_the_next_start(env: dict[str, str]) -> None:
    first = _start_first(env)
    first.kill()  # kill -9 on POSIX: no clean-up ran, the lock file and the socket file stay
    first.wait(timeout=30)
    second = subprocess.run(
        [sys.executable, "-c", SECOND], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    out = second.stdout + second.stderr
    assert "WINDOW: localchat" in second.stdout, out[-3000:]
    assert "already running" not in out, out[-3000:]


def test_a_folder_that_cannot_hold_the_lock_runs_unguarded(tmp_path: Path) -> None:
    from localchat.services.single_instance import LOCK_NAME, InstanceGuard

    folder = tmp_path / "data"
    (folder / LOCK_NAME).mkdir(parents=True)  # something that is not a file where the lock goes
    guard = InstanceGuard(folder)
    assert guard.claim()  # runs, unguarded, with a log line
    guard.release()
