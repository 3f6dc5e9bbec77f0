"""One way to run a child process of the app, for the engine, the benchmark and whatever comes next.

The app's side is ``ChildProcess``: spawn, a duplex pipe, send, receive
without blocking, ask to leave, kill, join, and the exit code once it ended.
The child's side is ``ParentLink`` (a reader thread that hands each message
over and notices when the app has gone, so the child never outlives it as an
orphan holding gigabytes of model) and ``configure_logging`` (the child's
log, llama.cpp's own messages included, goes to a file in the user's log
folder: in a windowed bundle there is no stderr to read).

The "spawn" start method is used everywhere (also on Linux, where fork is the
default) because forking a process that has Qt and llama.cpp threads is unsafe,
and because spawn is what Windows and macOS do anyway, so one path is tested.
A frozen app (PyInstaller) must call ``multiprocessing.freeze_support()`` first
thing in its entry point, or the spawned child would start the GUI again.

No Qt here: the supervisors (host/supervisor.py) drive a ChildProcess from a
thread of their own.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import logging.handlers
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from typing import Any

log = logging.getLogger(__name__)

LOG_MAX_BYTES = 2_000_000
LOG_BACKUPS = 3


class ChildGone(Exception):
    """The child process is not running (it exited, was killed, or was never started)."""

    def __init__(self, what: str, exitcode: int | None) -> None:
        self.what = what
        self.exitcode = exitcode
        super().__init__(f"The {what} process is not running (exit code {exitcode}).")


class ChildProcess:
    """One spawned child and the app's end of its pipe. Nothing here blocks for long but
    ``stop`` and ``wait_exitcode`` (both bounded by their timeout).

    ``target`` is the child's entry point as "module:function", called as ``function(conn,
    *args)``; it is imported in the child only, so the app never imports what runs there (the
    GUI process never loads the engine). ``what`` names the child in messages and logs
    ("engine", "benchmark"); ``farewell`` is the message that asks the child to leave.
    """

    def __init__(self, target: str, *, name: str, what: str, farewell: object | None = None) -> None:
        self._target = target
        self._farewell = farewell
        self._name = name
        self.what = what
        self._process: SpawnProcess | None = None
        self._conn: Connection | None = None
        self._exitcode: int | None = None  # kept once the process object is released
        self._pid: int | None = None  # kept too: a released process object raises on .pid

    def spawn(self, *args: Any) -> None:
        if self._process is not None:
            raise RuntimeError(f"the {self.what} process was already started")
        ctx = multiprocessing.get_context("spawn")
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        process = ctx.Process(
            target=run_target, args=(self._target, child_conn, *args), name=self._name, daemon=True
        )
        process.start()
        # Only the child holds its end now, so its death shows up here as EOF.
        child_conn.close()
        self._process, self._conn, self._pid = process, parent_conn, process.pid
        log.info("%s process %s started", self.what, process.pid)

    @property
    def started(self) -> bool:
        return self._process is not None

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def exitcode(self) -> int | None:
        """The exit code once the process has ended (negative: killed by that signal), else None."""
        if self._process is None:
            return self._exitcode
        try:
            return self._process.exitcode
        except ValueError:  # released by close()
            return self._exitcode

    def is_alive(self) -> bool:
        if self._process is None:
            return False
        try:
            return self._process.is_alive()
        except ValueError:
            return False

    def send(self, message: object) -> None:
        if self._conn is None:
            raise ChildGone(self.what, self.exitcode)
        try:
            self._conn.send(message)
        except (BrokenPipeError, EOFError, OSError) as exc:
            raise ChildGone(self.what, self.exitcode) from exc

    def receive(self, timeout: float = 0.0) -> Any | None:
        """The next message, or None if none arrives within ``timeout`` seconds; ChildGone on EOF."""
        if self._conn is None:
            raise ChildGone(self.what, self.exitcode)
        try:
            if not self._conn.poll(timeout):
                return None
            return self._conn.recv()
        except (EOFError, OSError) as exc:
            raise ChildGone(self.what, self.exitcode) from exc

    def wait_exitcode(self, timeout: float = 1.0) -> int | None:
        """After EOF: the exit code, waiting up to ``timeout`` seconds for the process to end."""
        deadline = time.monotonic() + timeout
        while self.exitcode is None and self.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.exitcode

    def join(self, timeout: float) -> None:
        if self.is_alive():
            assert self._process is not None
            self._process.join(timeout)

    def stop(self, timeout: float = 2.0) -> None:
        """Send the farewell message, wait up to ``timeout`` seconds for the child to leave, then
        kill what is left. Blocks up to that."""
        if self._process is None:
            return
        if self.is_alive():
            if self._farewell is not None:
                with contextlib.suppress(ChildGone):
                    self.send(self._farewell)
            self.join(timeout)
        self.kill()

    def kill(self) -> None:
        """End the process now (SIGKILL; TerminateProcess on Windows) and close the pipe.
        The exit code stays readable."""
        if self._process is not None:
            if self.is_alive():
                self._process.kill()
                self._process.join(1.0)
            log.info("%s process %s ended with exit code %s", self.what, self._pid, self.exitcode)
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Release the process object's resources once it has ended (the exit code is kept)."""
        if self._process is not None and not self.is_alive():
            self._exitcode = self.exitcode
            with contextlib.suppress(ValueError):
                self._process.close()


# The child's side


def import_named(path: str) -> Any:
    """The object a "module:attribute" path names (a child's entry point, an engine factory)."""
    module_name, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def run_target(target: str, conn: Connection, *args: Any) -> None:
    """The spawned child's first call: import ``target`` ("module:function") and run it.

    Ctrl+C in a terminal interrupts the whole process group, children included; a child ignores it
    (no KeyboardInterrupt traceback from it, no engine left half-way): its parent decides when it
    ends, by its farewell message, by a kill, or by closing the pipe when the parent itself ends."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    function: Callable[..., None] = import_named(target)
    function(conn, *args)


class ParentGone(Exception):
    """The app closed its end of the pipe (it quit or crashed): the child should leave."""


class ParentLink:
    """The child's end of the pipe: a reader thread hands every message to ``on_message``
    (so a cancel is seen while the main thread is busy) and, at EOF, sets ``gone`` and calls
    ``on_gone`` once. ``send`` raises ParentGone once the app has gone."""

    def __init__(
        self, conn: Connection, on_message: Callable[[Any], None], on_gone: Callable[[], None], *, name: str
    ) -> None:
        self._conn = conn
        self._on_message = on_message
        self._on_gone = on_gone
        self._name = name
        self.gone = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._read, name=f"{self._name}-reader", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                message = self._conn.recv()
            except (EOFError, OSError):
                self.gone.set()
                self._on_gone()
                return
            self._on_message(message)

    def send(self, message: object) -> None:
        if self.gone.is_set():
            raise ParentGone
        try:
            self._conn.send(message)
        except (BrokenPipeError, EOFError, OSError) as exc:
            self.gone.set()
            raise ParentGone from exc

    def try_send(self, message: object) -> None:
        """Send if the app is still there (a last word before leaving), never raise."""
        with contextlib.suppress(ParentGone):
            self.send(message)

    def close(self) -> None:
        self._conn.close()


def configure_logging(log_path: str | None, label: str) -> None:
    """The child's logging: to ``log_path`` (rotated, INFO and up) when given, else stderr (WARNING)."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler: logging.Handler = (
        logging.handlers.RotatingFileHandler(
            log_path, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8"
        )
        if log_path
        else logging.StreamHandler()
    )
    fmt = f"%(asctime)s {label}[%(process)d] %(levelname)s %(name)s: %(message)s"
    handler.setFormatter(logging.Formatter(fmt))
    root.addHandler(handler)
    root.setLevel(logging.INFO if log_path else logging.WARNING)
    if log_path:
        _output_to(log_path)


def _output_to(log_path: str) -> None:
    """The process's stdout and stderr into the log as well: llama.cpp writes some messages (an abort's
    reason, and the debugger's backtrace it prints then) straight to them, past Python's logging, and
    they belong with the rest of what the engine said, not in a terminal or a headless command's
    output."""
    try:
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        return
    for target in (1, 2):
        with contextlib.suppress(OSError):
            os.dup2(fd, target)
    os.close(fd)
