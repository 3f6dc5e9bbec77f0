"""BenchService: runs a benchmark in its own process and reports it as Qt signals.

Signals (emitted on the GUI thread)::

    loaded(EngineInfo, str)          the benchmark's engine is ready (str: why the drafter is unused, or "")
    progress(int, int, BenchRecord)  done, total, and the run just measured
    finished(BenchReport)            every run ended
    cancelled(BenchReport)           stopped after cancel(); the report holds the runs completed
    failed(str)                      a sentence: why the benchmark stopped (load error, process died...)

The pipe is polled by a QTimer (never a blocking read), like EngineClient. After
``cancel()`` the child stops between engine steps; if it has not answered
within ``cancel_timeout_s`` it is killed and ``cancelled`` carries what arrived.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from PySide6.QtCore import QObject, QTimer, Signal

from localchat.engine.bench import BenchMode, BenchPrompt, BenchReport
from localchat.engine.types import EngineConfig
from localchat.host.bench_worker import (
    BenchDone,
    BenchFailed,
    BenchGone,
    BenchLoaded,
    BenchProcess,
    BenchProgress,
    BenchReply,
)
from localchat.host.worker import DEFAULT_ENGINE
from localchat.services.qt_signals import emit

log = logging.getLogger(__name__)

POLL_INTERVAL_MS = 30
TICK_BUDGET_S = 0.02
EXIT_CODE_WAIT_S = 1.0


def died_sentence(exitcode: int | None) -> str:
    code = "exit code unknown" if exitcode is None else f"exit code {exitcode}"
    return f"The benchmark process stopped unexpectedly ({code}); the results so far are kept."


class BenchService(QObject):
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
        super().__init__(parent)
        self._engine_factory = engine_factory
        self._log_path = log_path
        self.cancel_timeout_s = cancel_timeout_s
        self._process: BenchProcess | None = None
        self._partial = BenchReport()
        self._cancelling = False
        self._gone_since: float | None = None
        self.peak_rss_mb: float | None = None  # of the last finished benchmark's process

        self._poll_timer = QTimer(self)
        self._poll_timer.setInterval(POLL_INTERVAL_MS)
        self._poll_timer.timeout.connect(self._on_poll_timer_timeout)
        self._cancel_timer = QTimer(self)
        self._cancel_timer.setSingleShot(True)
        self._cancel_timer.timeout.connect(self._on_cancel_timer_timeout)

    @property
    def is_running(self) -> bool:
        return self._process is not None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

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
        self._gone_since = None
        self.peak_rss_mb = None
        process = BenchProcess(self._engine_factory, self._log_path)
        process.start(config, prompts, modes, max_tokens, warmup)
        self._process = process
        self._poll_timer.start()

    def cancel(self) -> None:
        """Stop after the current engine step; ``cancelled`` follows with the runs completed."""
        if self._process is None or self._cancelling:
            return
        self._cancelling = True
        try:
            self._process.cancel()
        except BenchGone:
            self._note_gone()
            return
        self._cancel_timer.start(int(self.cancel_timeout_s * 1000))

    def stop(self) -> None:
        """End any benchmark at once, without signals (the dialog is closing)."""
        self._cancel_timer.stop()
        self._discard_process()

    # Internals

    def _on_poll_timer_timeout(self) -> None:
        if self._process is None:
            self._poll_timer.stop()
            return
        if self._gone_since is None:
            deadline = time.monotonic() + TICK_BUDGET_S
            try:
                while time.monotonic() < deadline:
                    reply = self._process.receive(0)
                    if reply is None:
                        break
                    self._dispatch(reply)
                    if self._process is None:
                        return
            except BenchGone:
                self._note_gone()
        if self._gone_since is not None:
            exitcode = self._process.exitcode
            if exitcode is None and time.monotonic() - self._gone_since < EXIT_CODE_WAIT_S:
                return
            self._report_death(exitcode)

    def _dispatch(self, reply: BenchReply) -> None:
        if isinstance(reply, BenchLoaded):
            emit(self.loaded, reply.info, reply.draft_problem)
        elif isinstance(reply, BenchProgress):
            self._partial.records.append(reply.record)
            emit(self.progress, reply.done, reply.total, reply.record)
        elif isinstance(reply, BenchDone):
            self.peak_rss_mb = reply.peak_rss_mb
            self._end()
            if reply.cancelled:
                emit(self.cancelled, reply.report)
            else:
                emit(self.finished, reply.report)
        elif isinstance(reply, BenchFailed):
            self._end()
            emit(self.failed, reply.message)
        else:
            log.warning("unexpected message from the benchmark process: %r", reply)

    def _on_cancel_timer_timeout(self) -> None:
        if self._process is None:
            return
        log.warning("the benchmark did not stop within %.1f s of cancel; killing it", self.cancel_timeout_s)
        partial = self._partial
        self._end()
        emit(self.cancelled, partial)

    def _note_gone(self) -> None:
        if self._gone_since is None:
            self._gone_since = time.monotonic()
            self._poll_timer.start()

    def _report_death(self, exitcode: int | None) -> None:
        log.warning("benchmark process %s ended (exit code %s)", self.pid, exitcode)
        cancelling, partial = self._cancelling, self._partial
        self._end()
        if cancelling:
            emit(self.cancelled, partial)
        else:
            emit(self.failed, died_sentence(exitcode))

    def _end(self) -> None:
        self._cancel_timer.stop()
        self._discard_process()

    def _discard_process(self) -> None:
        process, self._process = self._process, None
        self._gone_since = None
        self._cancelling = False
        self._poll_timer.stop()
        if process is not None:
            process.kill()
