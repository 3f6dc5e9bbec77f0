"""EngineClient: the GUI's handle on the engine process, as a QObject with signals.

Signals (all emitted on the thread that owns the client, the GUI thread)::

    load_started()                        a Load was sent
    loaded(EngineInfo)                    the last requested model is ready
    load_failed(str)                      a sentence: why it could not be loaded
    tokens_received(TokenEvent)           streamed text, merged to at most ~30 per second
    generation_finished(GenerationResult) the reply ended (finish_reason CANCELLED after cancel())
    generation_failed(str)                a sentence: why no reply was produced
    engine_died(str)                      a sentence: the process ended unexpectedly; ends any reply
                                          in progress (the text received so far is the partial reply)

Methods: ``start()``, ``load(config)``, ``generate(request) -> request id``,
``cancel()``, ``unload()``, ``restart()``, ``kill()``, ``stop()``/``shutdown()``;
state: ``pid``, ``info``, ``config``, ``is_running``, ``is_loading``,
``is_generating``, ``memory_bytes()``.

How it stays responsive: it is a services.ChildClient (the shared poll timer,
death detection and cancel time-out of every child process handle), so the GUI
thread never waits on the engine.

After a crash: ``engine_died`` carries "The engine stopped unexpectedly (exit
code -9). Your chat is saved; the next message starts a new engine." and the
next ``load`` or ``generate`` starts a new process (``generate`` reloads the
last model first). A hung engine: if a reply has not ended
``cancel_timeout_s`` after ``cancel()``, the process is killed and
``engine_died`` says so.
"""

from __future__ import annotations

import logging

import psutil
from PySide6.QtCore import QObject, Signal

from localchat.engine.rpc_wire import gone_worker
from localchat.engine.types import EngineConfig, EngineInfo, GenerationRequest
from localchat.host.process import EngineProcess, load_death_sentence
from localchat.host.protocol import (
    Cancel,
    Failed,
    Finished,
    Generate,
    Load,
    Loaded,
    LoadFailed,
    Tokens,
    Unload,
    Unloaded,
)
from localchat.host.worker import DEFAULT_ENGINE
from localchat.services.child_client import ChildClient
from localchat.services.qt_signals import emit

log = logging.getLogger(__name__)


def died_sentence(exitcode: int | None) -> str:
    code = "exit code unknown" if exitcode is None else f"exit code {exitcode}"
    return (
        f"The engine stopped unexpectedly ({code}). Your chat is saved; the next message starts a new engine."
    )


class EngineClient(ChildClient):
    load_started = Signal()
    loaded = Signal(object)  # EngineInfo
    load_failed = Signal(str)
    tokens_received = Signal(object)  # TokenEvent
    generation_finished = Signal(object)  # GenerationResult
    generation_failed = Signal(str)
    engine_died = Signal(str)

    def __init__(
        self,
        parent: QObject | None = None,
        *,
        engine_factory: str = DEFAULT_ENGINE,
        log_path: str | None = None,
        cancel_timeout_s: float = 5.0,
    ) -> None:
        super().__init__(parent, cancel_timeout_s=cancel_timeout_s)
        self._engine_factory = engine_factory
        self._log_path = log_path
        self._config: EngineConfig | None = None
        self._info: EngineInfo | None = None
        self._pending_loads = 0
        self._next_request_id = 1
        self._active_request: int | None = None
        self._hung_message = ""

    # State

    @property
    def info(self) -> EngineInfo | None:
        """What is loaded, or None (no model, loading, or the engine died)."""
        return self._info

    @property
    def config(self) -> EngineConfig | None:
        """The last configuration passed to ``load`` (reloaded by ``generate`` after a crash)."""
        return self._config

    @property
    def is_running(self) -> bool:
        return self._alive

    @property
    def is_loading(self) -> bool:
        return self._pending_loads > 0

    @property
    def is_generating(self) -> bool:
        return self._active_request is not None

    def memory_bytes(self) -> int | None:
        """The engine process's resident memory, for the status bar; None when it is not running."""
        pid = self.pid
        if pid is None or self._gone_since is not None:
            return None
        try:
            return int(psutil.Process(pid).memory_info().rss)
        except psutil.Error:
            return None

    # Commands

    def start(self) -> None:
        """Start the engine process if none is running (no model is loaded yet)."""
        if self._process is not None and self._gone_since is None:
            return
        process = EngineProcess(self._engine_factory, self._log_path)
        process.start()
        self._attach(process)

    def load(self, config: EngineConfig) -> None:
        """Load a model (replacing the current one); answers with loaded or load_failed."""
        if self._active_request is not None:
            self.cancel()
        self.start()
        self._config = config
        self._info = None
        if self._send(Load(config)):
            self._pending_loads += 1
            emit(self.load_started)

    def generate(self, request: GenerationRequest) -> int:
        """Start a reply; returns its request id. Raises RuntimeError if one is already running.

        With no engine process (never started, or it died) the last model is
        loaded in a new one first; with no model ever loaded, generation_failed says so.
        """
        if self._active_request is not None:
            raise RuntimeError("a reply is already being generated; cancel it first")
        request_id = self._next_request_id
        self._next_request_id += 1
        if not self.is_running:
            if self._config is None:
                emit(self.generation_failed, "No model is loaded; choose a model first.")
                return request_id
            log.info("starting a new engine for request %d", request_id)
            self.load(self._config)
        if self._send(Generate(request_id, request)):
            self._active_request = request_id
        return request_id

    def cancel(self) -> None:
        """Stop the reply in progress; generation_finished follows with finish_reason CANCELLED.

        If the engine has not answered within ``cancel_timeout_s`` it is killed
        (engine_died tells the GUI).
        """
        if self._active_request is None:
            return
        if self._send(Cancel(self._active_request)):
            self._start_cancel_timer()

    def unload(self) -> None:
        """Free the model; the process stays for the next load."""
        self._info = None
        if self._process is not None and self._gone_since is None:
            self._send(Unload())

    def restart(self) -> None:
        """Kill the current process (if any) and start a fresh one with no model; call load() next."""
        self.kill()
        self.start()

    def kill(self) -> None:
        """End the engine process at once, without engine_died (the caller asked for it)."""
        self._end_reply_state()
        self._discard_process()

    def stop(self, timeout: float = 2.0) -> None:
        """Shut the engine down at app exit; blocks up to ``timeout`` seconds, then kills it."""
        self._end_reply_state()
        if self._process is not None:
            self._process.stop(timeout)
        self._discard_process()

    shutdown = stop

    # Internals

    def _dispatch(self, reply: object) -> None:
        if isinstance(reply, Tokens):
            if reply.request_id == self._active_request:
                emit(self.tokens_received, reply.event)
        elif isinstance(reply, Finished):
            if reply.request_id == self._active_request:
                self._end_reply_state()
                emit(self.generation_finished, reply.result)
        elif isinstance(reply, Failed):
            if reply.request_id == self._active_request:
                self._end_reply_state()
                emit(self.generation_failed, reply.message)
        elif isinstance(reply, Loaded):
            self._pending_loads = max(0, self._pending_loads - 1)
            if self._pending_loads == 0:  # an older load's answer is stale once another was asked for
                self._info = reply.info
                emit(self.loaded, reply.info)
        elif isinstance(reply, LoadFailed):
            self._pending_loads = max(0, self._pending_loads - 1)
            if self._pending_loads == 0:
                self._info = None
                emit(self.load_failed, reply.message)
        elif isinstance(reply, Unloaded):
            pass
        else:
            log.warning("unexpected reply from the engine: %r", reply)

    def _cancel_timed_out(self) -> None:
        if self._active_request is None:
            return
        self._hung_message = (
            f"The engine did not stop within {self.cancel_timeout_s:g} seconds, so it was ended. "
            "Your chat is saved; the next message starts a new engine."
        )
        self._kill_hung()

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

    def _report_death(self, exitcode: int | None) -> None:
        was_loading = self._pending_loads > 0
        sentence = self._hung_message or self._worker_gone_sentence() or died_sentence(exitcode)
        if self._log_path and not self._hung_message:
            sentence += f" What the engine said is in {self._log_path}."
        self._end_reply_state()
        self._discard_process()
        emit(self.engine_died, sentence)
        if was_loading:
            emit(self.load_failed, load_death_sentence(exitcode))

    def _end_reply_state(self) -> None:
        self._active_request = None
        self._stop_cancel_timer()

    def _discard_process(self) -> None:
        super()._discard_process()
        self._hung_message = ""
        self._pending_loads = 0
        self._info = None
