"""EngineClient: the window's EnginePort over the engine's supervisor (host/supervisor.py).

A thin adapter. The supervisor owns the engine process and its state; this
object only hands what it tells (host/events.py's objects, unchanged) to the
GUI thread (services/main_thread.py) and emits them::

    state_changed(EngineState)              the supervisor's new snapshot
    job_event(Tokens | Finished | Failed)   every job's events: the window's replies (source
                                            "window") and the API's requests

The window and the local API share ONE engine process and ONE loaded model:
the API server submits to ``supervisor``. The window's replies are submitted as
the "window" source; after a crash the supervisor loads the last model again
when the next reply asks (``restart_eagerly=False``).
"""

from __future__ import annotations

import logging

import psutil
from PySide6.QtCore import QObject, Signal

from localchat.engine.types import EngineConfig, GenerationRequest
from localchat.host.engine_child import DEFAULT_ENGINE
from localchat.host.events import EngineState, Event, Failed, Finished, StateChanged
from localchat.host.jobs import JobHandle
from localchat.host.supervisor import EngineSupervisor, EngineUnavailable
from localchat.services.engine_port import WINDOW
from localchat.services.main_thread import on_main
from localchat.services.qt_signals import emit

log = logging.getLogger(__name__)


class EngineClient(QObject):
    state_changed = Signal(object)  # EngineState
    job_event = Signal(object)  # Tokens | Finished | Failed

    def __init__(
        self,
        parent: QObject | None = None,
        *,
        engine_factory: str = DEFAULT_ENGINE,
        log_path: str | None = None,
        cancel_timeout_s: float = 5.0,
        max_queue: int = 16,
    ) -> None:
        super().__init__(parent)
        self._log_path = log_path
        self._deliver = on_main(self._on_supervisor_event)
        self._supervisor = EngineSupervisor(
            None, engine_factory=engine_factory, log_path=log_path, max_queue=max_queue,
            cancel_timeout_s=cancel_timeout_s, restart_eagerly=False, listener=self._deliver,
        )
        self._job: JobHandle | None = None

    @property
    def supervisor(self) -> EngineSupervisor:
        return self._supervisor

    @property
    def state(self) -> EngineState:
        """The supervisor's snapshot now (it may be ahead of the last state_changed delivered)."""
        return self._supervisor.state

    @property
    def log_path(self) -> str | None:
        return self._log_path

    def memory_bytes(self) -> int | None:
        """The engine process's resident memory, for the status bar; None when it is not running."""
        pid = self._supervisor.state.pid
        if pid is None:
            return None
        try:
            return int(psutil.Process(pid).memory_info().rss)
        except psutil.Error:
            return None

    def load(self, config: EngineConfig) -> None:
        """Load a model (replacing the current one); state_changed tells how it goes."""
        self.cancel()
        self._supervisor.start()
        self._supervisor.load(config)

    def generate(self, request: GenerationRequest) -> int:
        """Start the window's reply; returns its job id. RuntimeError if one is already running."""
        if self._job is not None:
            raise RuntimeError("a reply is already being generated; cancel it first")
        self._supervisor.start()
        try:
            self._job = self._supervisor.submit(request, WINDOW, queue_events=False)
        except EngineUnavailable as exc:
            self._deliver(Failed(0, WINDOW, exc.failure))
            return 0
        return self._job.id

    def cancel(self) -> None:
        """Stop the window's reply: Finished (CANCELLED) follows, or Failed (CANCELLED) if it had not
        started; an engine that ignores the cancel is ended (Failed HUNG)."""
        if self._job is not None:
            self._supervisor.cancel(self._job)

    def shutdown(self, timeout: float = 2.0) -> None:
        """Shut the engine down at app exit; blocks up to ``timeout`` seconds, then kills it."""
        self._job = None
        self._supervisor.close(timeout)

    def _on_supervisor_event(self, event: Event) -> None:
        if isinstance(event, StateChanged):
            emit(self.state_changed, event.state)
            return
        job = self._job
        if job is not None and isinstance(event, Finished | Failed) and event.job == job.id:
            self._job = None
        emit(self.job_event, event)
