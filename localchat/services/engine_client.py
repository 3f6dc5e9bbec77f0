"""EngineClient: the GUI's handle on the engine, as a QObject with signals, over the app's EngineBroker.

The window and the local API share ONE engine process and ONE loaded model:
the client owns an ``host.scheduler.EngineBroker`` (``broker``), submits the
window's replies to it as the "window" source, and the API server, when it is
on, submits to the same broker; replies queue behind each other round-robin.

Signals (all emitted on the thread that owns the client, the GUI thread)::

    load_started()                        a model started loading (asked for, or after a crash)
    loaded(EngineInfo)                    the last requested model is ready
    load_failed(str)                      a sentence: why it could not be loaded
    tokens_received(TokenEvent)           streamed text of the window's reply, ~30 per second at most
    generation_finished(GenerationResult) the reply ended (finish_reason CANCELLED after cancel())
    generation_failed(str)                a sentence: why no reply was produced
    engine_died(str)                      a sentence: the process ended unexpectedly; ends any reply
                                          in progress (the text received so far is the partial reply)
    activity(str, TokenEvent)             another source's job (an API request) produced tokens
    activity_ended(str)                   that job ended

Methods: ``start()``, ``load(config)``, ``generate(request) -> request id``,
``cancel()``, ``stop()``/``shutdown()``; state:
``pid``, ``info``, ``config``, ``broker``, ``is_running``, ``is_loading``,
``is_generating``, ``memory_bytes()``.

How it stays responsive: the broker runs the engine process on a thread of its
own (host/child.py underneath); what it reports (its listener's events, the
window's job events) lands in thread-safe queues that a QTimer drains on the
GUI thread every ``POLL_INTERVAL_MS``, so the GUI thread never waits on the
engine and no signal crosses threads.

After a crash: ``engine_died`` carries "The engine stopped unexpectedly (exit
code -9). Your chat is saved; the next message starts a new engine." and the
next ``generate`` loads the last model in a new process first. A hung engine:
if a reply has not ended ``cancel_timeout_s`` after ``cancel()``, the process
is killed and ``engine_died`` says so.
"""

from __future__ import annotations

import logging
import queue
import time

import psutil
from PySide6.QtCore import QObject, QTimer, Signal

from localchat.engine.rpc_wire import gone_worker
from localchat.engine.types import EngineConfig, EngineInfo, GenerationRequest
from localchat.host.scheduler import (
    BrokerError,
    BrokerEvent,
    BrokerState,
    EngineBroker,
    EngineDied,
    JobEnded,
    JobEvent,
    JobFailed,
    JobFinished,
    JobHandle,
    JobProgress,
    JobTokens,
    LoadDone,
    LoadError,
    LoadStarted,
)
from localchat.host.worker import DEFAULT_ENGINE
from localchat.services.qt_signals import emit

log = logging.getLogger(__name__)

POLL_INTERVAL_MS = 15
TICK_BUDGET_S = 0.02  # stop reading after this long in one tick and let the event loop breathe
WINDOW = "window"  # the broker's source name for the window's replies


def died_sentence(exitcode: int | None) -> str:
    code = "exit code unknown" if exitcode is None else f"exit code {exitcode}"
    return (
        f"The engine stopped unexpectedly ({code}). Your chat is saved; the next message starts a new engine."
    )


class EngineClient(QObject):
    load_started = Signal()
    loaded = Signal(object)  # EngineInfo
    load_failed = Signal(str)
    tokens_received = Signal(object)  # TokenEvent
    generation_finished = Signal(object)  # GenerationResult
    generation_failed = Signal(str)
    engine_died = Signal(str)
    activity = Signal(str, object)  # source, TokenEvent
    activity_ended = Signal(str)  # source

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
        self._events: queue.SimpleQueue[BrokerEvent] = queue.SimpleQueue()
        self._broker = EngineBroker(
            None, engine_factory=engine_factory, log_path=log_path, max_queue=max_queue,
            cancel_timeout_s=cancel_timeout_s, restart_eagerly=False, listener=self._events.put,
        )
        self._info: EngineInfo | None = None
        self._loading = False
        self._next_request_id = 1
        self._job: JobHandle | None = None
        self._dead = False  # the engine died; the next generate starts a new one
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_INTERVAL_MS)
        self._timer.timeout.connect(self._on_timer_timeout)

    # State

    @property
    def broker(self) -> EngineBroker:
        """The one engine broker: the API server submits its requests here too."""
        return self._broker

    @property
    def cancel_timeout_s(self) -> float:
        return self._broker.cancel_timeout_s

    @cancel_timeout_s.setter
    def cancel_timeout_s(self, value: float) -> None:
        self._broker.cancel_timeout_s = value

    @property
    def pid(self) -> int | None:
        return self._broker.pid

    @property
    def info(self) -> EngineInfo | None:
        """What is loaded, or None (no model, loading, or the engine died)."""
        return self._info

    @property
    def config(self) -> EngineConfig | None:
        """The last configuration passed to ``load`` (reloaded by ``generate`` after a crash)."""
        return self._broker.config

    @property
    def is_running(self) -> bool:
        pid = self._broker.pid
        return pid is not None and not self._dead

    @property
    def is_loading(self) -> bool:
        return self._loading

    @property
    def is_generating(self) -> bool:
        return self._job is not None

    def memory_bytes(self) -> int | None:
        """The engine process's resident memory, for the status bar; None when it is not running."""
        pid = self._broker.pid
        if pid is None:
            return None
        try:
            return int(psutil.Process(pid).memory_info().rss)
        except psutil.Error:
            return None

    # Commands

    def start(self) -> None:
        """Start the broker (no model is loaded until ``load``)."""
        self._broker.start()
        self._timer.start()

    def load(self, config: EngineConfig) -> None:
        """Load a model (replacing the current one); answers with loaded or load_failed."""
        if self._job is not None:
            self.cancel()
        self.start()
        self._info = None
        self._dead = False
        self._broker.load(config)

    def generate(self, request: GenerationRequest) -> int:
        """Start a reply; returns its request id. Raises RuntimeError if one is already running.

        After a crash the last model is loaded in a new process first; with no model ever
        loaded, generation_failed says so.
        """
        if self._job is not None:
            raise RuntimeError("a reply is already being generated; cancel it first")
        request_id = self._next_request_id
        self._next_request_id += 1
        if self._broker.config is None:
            emit(self.generation_failed, "No model is loaded; choose a model first.")
            return request_id
        self.start()
        self._dead = False
        try:
            self._job = self._broker.submit(request, source=WINDOW)
        except BrokerError as exc:
            emit(self.generation_failed, str(exc))
        return request_id

    def cancel(self) -> None:
        """Stop the reply in progress; generation_finished follows with finish_reason CANCELLED
        (a reply still waiting behind an API request ends with generation_failed). If the engine has
        not answered within ``cancel_timeout_s`` it is killed (engine_died tells the GUI)."""
        if self._job is not None:
            self._broker.cancel(self._job)

    def stop(self, timeout: float = 2.0) -> None:
        """Shut the engine down at app exit; blocks up to ``timeout`` seconds, then kills it."""
        self._job = None
        self._timer.stop()
        self._broker.close(timeout)

    shutdown = stop

    # Internals

    def _on_timer_timeout(self) -> None:
        deadline = time.monotonic() + TICK_BUDGET_S
        # The window's reply first: its tokens before a death are part of the partial reply.
        while self._job is not None and time.monotonic() < deadline:
            try:
                event = self._job.events.get_nowait()
            except queue.Empty:
                break
            self._on_job_event(event)
        while time.monotonic() < deadline:
            try:
                self._on_broker_event(self._events.get_nowait())
            except queue.Empty:
                break

    def _on_broker_event(self, event: BrokerEvent) -> None:
        if isinstance(event, LoadStarted):
            self._loading = True
            self._info = None
            emit(self.load_started)
        elif isinstance(event, LoadDone):
            if self._broker.state is BrokerState.LOADING:
                return  # another load was asked for meanwhile; its answer is the one that counts
            self._loading = False
            self._info = event.info
            emit(self.loaded, event.info)
        elif isinstance(event, LoadError):
            if self._broker.state is BrokerState.LOADING:
                return
            self._loading = False
            self._info = None
            emit(self.load_failed, event.message)
        elif isinstance(event, EngineDied):
            self._on_engine_died(event)
        elif isinstance(event, JobProgress) and event.source != WINDOW:
            emit(self.activity, event.source, event.event)
        elif isinstance(event, JobEnded) and event.source != WINDOW:
            emit(self.activity_ended, event.source)

    def _on_job_event(self, event: JobEvent) -> None:
        if isinstance(event, JobTokens):
            emit(self.tokens_received, event.event)
        elif isinstance(event, JobFinished):
            self._job = None
            emit(self.generation_finished, event.result)
        elif isinstance(event, JobFailed):
            self._job = None
            if event.engine_died:
                return  # the broker's EngineDied says it, in the window's words
            emit(self.generation_failed, event.message)

    def _on_engine_died(self, event: EngineDied) -> None:
        job, self._job = self._job, None
        if job is not None:
            # A reply waiting behind the request that died ends too: engine_died ends it in the window.
            self._broker.cancel(job)
        self._info = None
        self._dead = True
        if event.hung:
            sentence = (
                f"The engine did not stop within {self.cancel_timeout_s:g} seconds, so it was ended. "
                "Your chat is saved; the next message starts a new engine."
            )
        else:
            sentence = self._worker_gone_sentence() or died_sentence(event.exitcode)
            if self._log_path:
                sentence += f" What the engine said is in {self._log_path}."
        log.warning("engine process ended (exit code %s)", event.exitcode)
        emit(self.engine_died, sentence)
        # A death while loading: the broker's LoadError follows, with load_death_sentence's words.

    def _worker_gone_sentence(self) -> str | None:
        """When the target ran on workers: the one that no longer answers, named (ggml's RPC client
        ends the whole engine process when a worker goes away mid-reply)."""
        config = self.config
        if config is None or not config.rpc_servers:
            return None
        gone = gone_worker(config.rpc_servers)
        if gone is None:
            return None
        return (
            f"The worker {gone} stopped answering, so the engine stopped. Your chat is saved; the next "
            "message starts a new engine (start the worker again, or remove it in Settings → Workers)."
        )
