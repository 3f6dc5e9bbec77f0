"""The benchmark process: loads its own Engine, runs ``run_bench`` and reports each run over a pipe.

A benchmark runs in a spawned child of its own (not in the chat's engine
process) so it can start from empty caches, use the same greedy settings for
every mode, and be killed without touching the chat. The app's side is
``BenchProcess``; the child's entry point is ``serve_bench``.

Messages (child -> app), all picklable frozen dataclasses::

    BenchLoaded(info, draft_problem)       the engine is ready; warm-up and runs follow
    BenchProgress(record, done, total)     one prompt in one mode has been measured
    BenchDone(report, cancelled, peak_rss_mb)  all runs ended (or stopped after a cancel)
    BenchFailed(message)                   a sentence: why the benchmark could not run

The app sends ``BenchCancel()`` to stop; the child reads the pipe on a
thread and sets a flag that ``run_bench`` checks between runs and the engine
checks between steps. A vanished app (EOF on the pipe) sets the same flag, so
the child ends instead of holding a model in memory.

No Qt here; services.BenchService drives ``BenchProcess`` from a QTimer.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from typing import Any

from localchat.engine.bench import (
    BenchMode,
    BenchPrompt,
    BenchRecord,
    BenchReport,
    peak_rss_mb,
)
from localchat.engine.errors import EngineError
from localchat.engine.types import EngineConfig, EngineInfo
from localchat.host.worker import DEFAULT_ENGINE, load_factory

log = logging.getLogger(__name__)

# Messages


@dataclass(frozen=True)
class BenchJob:
    config: EngineConfig
    prompts: tuple[BenchPrompt, ...]
    modes: tuple[BenchMode, ...]
    max_tokens: int = 128
    warmup: bool = True


@dataclass(frozen=True)
class BenchCancel:
    pass


@dataclass(frozen=True)
class BenchLoaded:
    info: EngineInfo
    draft_problem: str = ""


@dataclass(frozen=True)
class BenchProgress:
    record: BenchRecord
    done: int
    total: int


@dataclass(frozen=True)
class BenchDone:
    report: BenchReport
    cancelled: bool
    peak_rss_mb: float  # of the benchmark process, which held the models


@dataclass(frozen=True)
class BenchFailed:
    message: str


BenchReply = BenchLoaded | BenchProgress | BenchDone | BenchFailed


class BenchGone(Exception):
    """The benchmark process is not running (it ended, was killed, or was never started)."""

    def __init__(self, exitcode: int | None) -> None:
        self.exitcode = exitcode
        super().__init__(f"The benchmark process is not running (exit code {exitcode}).")


# Child side


class _ParentGone(Exception):
    pass


class _BenchRunner:
    def __init__(self, conn: Connection, job: BenchJob, factory: Any) -> None:
        self._conn = conn
        self._job = job
        self._factory = factory
        self._cancel = threading.Event()
        self._parent_gone = threading.Event()

    def _read(self) -> None:
        while True:
            try:
                message = self._conn.recv()
            except (EOFError, OSError):
                self._parent_gone.set()
                self._cancel.set()
                return
            if isinstance(message, BenchCancel):
                self._cancel.set()

    def _send(self, reply: BenchReply) -> None:
        if self._parent_gone.is_set():
            raise _ParentGone
        try:
            self._conn.send(reply)
        except (BrokenPipeError, EOFError, OSError) as exc:
            self._parent_gone.set()
            raise _ParentGone from exc

    def run(self) -> None:
        from localchat.engine.bench import run_bench

        threading.Thread(target=self._read, name="bench-reader", daemon=True).start()
        job = self._job
        try:
            try:
                engine = self._factory(job.config)
            except EngineError as exc:
                log.warning("benchmark load failed: %s", exc)
                self._send(BenchFailed(str(exc)))
                return
            except Exception as exc:
                log.exception("benchmark load failed unexpectedly")
                self._send(BenchFailed(f"The model could not be loaded ({type(exc).__name__}: {exc})."))
                return
            try:
                self._send(BenchLoaded(engine.info, str(getattr(engine, "draft_problem", "") or "")))

                def on_record(record: BenchRecord, done: int, total: int) -> None:
                    self._send(BenchProgress(record, done, total))

                try:
                    report = run_bench(
                        engine,
                        job.prompts,
                        job.modes,
                        job.max_tokens,
                        on_record=on_record,
                        should_cancel=self._cancel.is_set,
                        warmup=job.warmup,
                    )
                except (_ParentGone, KeyboardInterrupt):
                    raise
                except EngineError as exc:
                    log.warning("benchmark failed: %s", exc)
                    self._send(BenchFailed(str(exc)))
                    return
                except Exception as exc:
                    log.exception("benchmark failed unexpectedly")
                    self._send(BenchFailed(f"The benchmark failed ({type(exc).__name__}: {exc})."))
                    return
                self._send(BenchDone(report, self._cancel.is_set(), peak_rss_mb()))
            finally:
                with contextlib.suppress(Exception):
                    engine.close()
        except _ParentGone:
            log.info("the app closed the pipe; leaving the benchmark")


def serve_bench(
    conn: Connection, job: BenchJob, engine_factory: str = DEFAULT_ENGINE, log_path: str | None = None
) -> None:
    """Entry point of the benchmark process (the target of multiprocessing's spawn)."""
    _configure_logging(log_path)
    log.info("benchmark process started: %d prompts x %d modes", len(job.prompts), len(job.modes))
    try:
        factory = load_factory(engine_factory)
    except Exception as exc:
        log.exception("cannot import the engine %s", engine_factory)
        with contextlib.suppress(OSError, BrokenPipeError):
            conn.send(BenchFailed(f"The engine could not start ({type(exc).__name__}: {exc})."))
        conn.close()
        return
    _BenchRunner(conn, job, factory).run()
    conn.close()
    log.info("benchmark process leaving")


def _configure_logging(log_path: str | None) -> None:
    root = logging.getLogger()
    if root.handlers:
        return
    handler: logging.Handler = logging.FileHandler(log_path) if log_path else logging.StreamHandler()
    fmt = "%(asctime)s bench[%(process)d] %(levelname)s %(name)s: %(message)s"
    handler.setFormatter(logging.Formatter(fmt))
    root.addHandler(handler)
    root.setLevel(logging.INFO if log_path else logging.WARNING)


# App side


class BenchProcess:
    """One benchmark child process and the app's end of its pipe. Nothing here blocks for long."""

    def __init__(self, engine_factory: str = DEFAULT_ENGINE, log_path: str | None = None) -> None:
        self._engine_factory = engine_factory
        self._log_path = log_path
        self._process: SpawnProcess | None = None
        self._conn: Connection | None = None

    def start(
        self,
        config: EngineConfig,
        prompts: Sequence[BenchPrompt],
        modes: Sequence[BenchMode],
        max_tokens: int,
        warmup: bool = True,
    ) -> None:
        if self._process is not None:
            raise RuntimeError("the benchmark process was already started")
        job = BenchJob(config, tuple(prompts), tuple(modes), max_tokens, warmup)
        ctx = multiprocessing.get_context("spawn")
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        process = ctx.Process(
            target=serve_bench,
            args=(child_conn, job, self._engine_factory, self._log_path),
            name="localchat-bench",
            daemon=True,
        )
        process.start()
        child_conn.close()  # only the child holds its end now, so its death shows up here as EOF
        self._process, self._conn = process, parent_conn
        log.info("benchmark process %s started", process.pid)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def exitcode(self) -> int | None:
        return self._process.exitcode if self._process is not None else None

    def is_alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    def cancel(self) -> None:
        if self._conn is None:
            raise BenchGone(self.exitcode)
        try:
            self._conn.send(BenchCancel())
        except (BrokenPipeError, EOFError, OSError) as exc:
            raise BenchGone(self.exitcode) from exc

    def receive(self, timeout: float = 0.0) -> BenchReply | None:
        """The next message, or None if none arrives within ``timeout`` seconds; BenchGone on EOF."""
        if self._conn is None:
            raise BenchGone(self.exitcode)
        try:
            if not self._conn.poll(timeout):
                return None
            reply: BenchReply = self._conn.recv()
        except (EOFError, OSError) as exc:
            raise BenchGone(self.exitcode) from exc
        return reply

    def kill(self) -> None:
        """End the process now and close the pipe."""
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
                self._process.join(1.0)
            log.info(
                "benchmark process %s ended with exit code %s", self._process.pid, self._process.exitcode
            )
            if not self._process.is_alive():
                self._process.close()
            self._process = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def join(self, timeout: float) -> None:
        if self._process is not None:
            self._process.join(timeout)
