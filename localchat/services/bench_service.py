"""BenchService: runs a benchmark in its own process and reports it as Qt signals.

Signals (emitted on the GUI thread)::

    loaded(EngineInfo, str)          the benchmark's engine is ready (str: why the drafter is unused, or "")
    progress(int, int, BenchRecord)  done, total, and the run just measured
    finished(BenchReport)            every run ended (the report carries the benchmark process's peak memory)
    cancelled(BenchReport)           stopped after cancel(); the report holds the runs completed
    failed(str)                      a sentence: why the benchmark stopped (load error, process died...)

It is a services.ChildClient, like EngineClient: the pipe is polled by a
QTimer (never a blocking read). After ``cancel()`` the child stops between
engine steps; if it has not answered within ``cancel_timeout_s`` it is killed
and ``cancelled`` carries what arrived. Nothing here imports the engine.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from PySide6.QtCore import QObject, Signal

from localchat.bench.modes import BenchMode
from localchat.bench.prompts import BenchPrompt
from localchat.bench.report import BenchReport
from localchat.engine.types import EngineConfig
from localchat.host.bench_process import BenchProcess
from localchat.host.bench_protocol import BenchDone, BenchFailed, BenchLoaded, BenchProgress
from localchat.host.worker import DEFAULT_ENGINE
from localchat.services.child_client import ChildClient
from localchat.services.qt_signals import emit

log = logging.getLogger(__name__)


def died_sentence(exitcode: int | None) -> str:
    code = "exit code unknown" if exitcode is None else f"exit code {exitcode}"
    return f"The benchmark process stopped unexpectedly ({code}); the results so far are kept."


class BenchService(ChildClient):
    loaded = Signal(object, str)  # EngineInfo, draft problem
    progress = Signal(int, int, object)  # done, total, BenchRecord
    finished = Signal(object)  # BenchReport
    cancelled = Signal(object)  # BenchReport with the runs completed
    failed = Signal(str)

    def __init__(
        self,
        parent: QObject | None = None,
        *,
        engine_factory: str = DEFAULT_ENGINE,
        log_path: str | None = None,
        cancel_timeout_s: float = 10.0,
    ) -> None:
        super().__init__(parent, cancel_timeout_s=cancel_timeout_s)
        self._engine_factory = engine_factory
        self._log_path = log_path
        self._partial = BenchReport()
        self._cancelling = False

    @property
    def is_running(self) -> bool:
        return self._process is not None

    def start(
        self,
        config: EngineConfig,
        prompts: Sequence[BenchPrompt],
        modes: Sequence[BenchMode],
        max_tokens: int,
        *,
        warmup: bool = True,
    ) -> None:
        """Start a benchmark; RuntimeError if one is already running."""
        if self._process is not None:
            raise RuntimeError("a benchmark is already running")
        self._partial = BenchReport()
        self._cancelling = False
        process = BenchProcess(self._engine_factory, self._log_path)
        process.start(config, prompts, modes, max_tokens, warmup)
        self._attach(process)

    def cancel(self) -> None:
        """Stop after the current engine step; ``cancelled`` follows with the runs completed."""
        if self._process is None or self._cancelling:
            return
        self._cancelling = True
        if self._send(BenchProcess.CANCEL):
            self._start_cancel_timer()

    def stop(self) -> None:
        """End any benchmark at once, without signals (the dialog is closing)."""
        self._discard_process()

    # Internals

    def _dispatch(self, reply: object) -> None:
        if isinstance(reply, BenchLoaded):
            emit(self.loaded, reply.info, reply.draft_problem)
        elif isinstance(reply, BenchProgress):
            self._partial.records.append(reply.record)
            emit(self.progress, reply.done, reply.total, reply.record)
        elif isinstance(reply, BenchDone):
            self._discard_process()
            emit(self.cancelled if reply.cancelled else self.finished, reply.report)
        elif isinstance(reply, BenchFailed):
            self._discard_process()
            emit(self.failed, reply.message)
        else:
            log.warning("unexpected message from the benchmark process: %r", reply)

    def _cancel_timed_out(self) -> None:
        log.warning("the benchmark did not stop within %.1f s of cancel; killing it", self.cancel_timeout_s)
        partial = self._partial
        self._discard_process()
        emit(self.cancelled, partial)

    def _report_death(self, exitcode: int | None) -> None:
        cancelling, partial = self._cancelling, self._partial
        self._discard_process()
        if cancelling:
            emit(self.cancelled, partial)
        else:
            emit(self.failed, died_sentence(exitcode))

    def _discard_process(self) -> None:
        super()._discard_process()
        self._cancelling = False
