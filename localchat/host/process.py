"""The app's handle on the engine process: start it (spawn), send requests, read replies, stop or kill it.

No Qt here; services.EngineClient drives this from a QTimer on the GUI thread.
Nothing in this class blocks for long except ``stop`` (bounded by its timeout).

The "spawn" start method is used everywhere (also on Linux, where fork is the
default) because forking a process that has Qt and llama.cpp threads is unsafe,
and because spawn is what Windows and macOS do anyway, so one path is tested.
A frozen app (PyInstaller) must call ``multiprocessing.freeze_support()`` first
thing in its entry point, or the spawned child would start the GUI again.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess

from localchat.host.protocol import Reply, Request, Shutdown
from localchat.host.worker import DEFAULT_ENGINE, serve

log = logging.getLogger(__name__)


class EngineGone(Exception):
    """The engine process is not running (it exited, was killed, or was never started)."""

    def __init__(self, exitcode: int | None) -> None:
        self.exitcode = exitcode
        super().__init__(f"The engine process is not running (exit code {exitcode}).")


class EngineProcess:
    """One engine child process and the app's end of its pipe."""

    def __init__(self, engine_factory: str = DEFAULT_ENGINE, log_path: str | None = None) -> None:
        self._engine_factory = engine_factory
        self._log_path = log_path
        self._process: SpawnProcess | None = None
        self._conn: Connection | None = None

    def start(self) -> None:
        if self._process is not None:
            raise RuntimeError("the engine process was already started")
        ctx = multiprocessing.get_context("spawn")
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        process = ctx.Process(
            target=serve,
            args=(child_conn, self._engine_factory, self._log_path),
            name="localchat-engine",
            daemon=True,
        )
        process.start()
        # Only the child holds its end now, so its death shows up here as EOF.
        child_conn.close()
        self._process, self._conn = process, parent_conn
        log.info("engine process %s started", process.pid)

    @property
    def started(self) -> bool:
        return self._process is not None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def exitcode(self) -> int | None:
        """The exit code once the process has ended (negative: killed by that signal), else None."""
        return self._process.exitcode if self._process is not None else None

    def is_alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    def send(self, request: Request) -> None:
        if self._conn is None:
            raise EngineGone(self.exitcode)
        try:
            self._conn.send(request)
        except (BrokenPipeError, EOFError, OSError) as exc:
            raise EngineGone(self.exitcode) from exc

    def receive(self, timeout: float = 0.0) -> Reply | None:
        """The next reply, or None if none arrives within ``timeout`` seconds; EngineGone on EOF."""
        if self._conn is None:
            raise EngineGone(self.exitcode)
        try:
            if not self._conn.poll(timeout):
                return None
            reply: Reply = self._conn.recv()
        except (EOFError, OSError) as exc:
            raise EngineGone(self.exitcode) from exc
        return reply

    def stop(self, timeout: float = 2.0) -> None:
        """Ask the process to leave; kill it if it has not within ``timeout`` seconds. Blocks up to that."""
        if self._process is None:
            return
        if self._process.is_alive():
            with contextlib.suppress(EngineGone):
                self.send(Shutdown())
            self._process.join(timeout)
        self.kill()

    def kill(self) -> None:
        """End the process now (SIGKILL; TerminateProcess on Windows) and close the pipe."""
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
                self._process.join(1.0)
            log.info("engine process %s ended with exit code %s", self._process.pid, self._process.exitcode)
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Release the process object's resources once it has ended."""
        if self._process is not None and not self._process.is_alive():
            self._process.close()
