"""The engine process's side: owns the Engine, answers the protocol's requests in order.

Two threads: the main thread runs requests one at a time (load, generate...),
and a reader thread receives from the pipe all along, so a ``Cancel`` is seen
while ``Engine.generate`` runs (it sets a flag that the engine's
``should_cancel`` callback reads between steps), and a vanished app (the pipe
closes) cancels the reply and ends the process instead of leaving an orphan
holding gigabytes of model.

Tokens are merged before they cross the pipe (at most one ``Tokens`` message
per ``TOKEN_INTERVAL_S``); what is pending goes out before ``Finished``.

This module imports no Qt and loads the engine lazily (``engine_factory`` is a
"module:attribute" path, so tests can run the same process with a fake engine).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Protocol

from localchat.engine.errors import EngineError, GrammarError
from localchat.engine.types import (
    EngineConfig,
    EngineInfo,
    GenerationRequest,
    GenerationResult,
    TokenEvent,
)
from localchat.host.child import ParentGone, ParentLink, configure_logging, import_named
from localchat.host.protocol import (
    Cancel,
    Failed,
    Finished,
    Generate,
    Load,
    Loaded,
    LoadFailed,
    Reply,
    Request,
    Shutdown,
    Tokens,
    Unload,
    Unloaded,
    merge_events,
)

log = logging.getLogger(__name__)

DEFAULT_ENGINE = "localchat.engine.engine:Engine"
TOKEN_INTERVAL_S = 1 / 30


class EngineLike(Protocol):
    """What the host needs from localchat.engine.engine.Engine."""

    info: EngineInfo

    def generate(
        self,
        request: GenerationRequest,
        on_event: Callable[[TokenEvent], None] | None = None,
        should_cancel: Callable[[], bool] | None = None,
    ) -> GenerationResult: ...

    def close(self) -> None: ...


def load_factory(path: str) -> Callable[[EngineConfig], EngineLike]:
    factory: Callable[[EngineConfig], EngineLike] = import_named(path)
    return factory


class TokenBatcher:
    """Merges token events so that at most one message per ``interval`` seconds is sent.

    The first event goes out at once (the user sees the reply start); later ones
    wait until ``interval`` has passed since the last send, or until ``flush``.
    """

    def __init__(
        self,
        send: Callable[[TokenEvent], None],
        interval: float = TOKEN_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._interval = interval
        self._clock = clock
        self._pending: TokenEvent | None = None
        self._last_sent = float("-inf")

    def add(self, event: TokenEvent) -> None:
        self._pending = event if self._pending is None else merge_events(self._pending, event)
        if self._clock() - self._last_sent >= self._interval:
            self.flush()

    def flush(self) -> None:
        if self._pending is not None:
            event, self._pending = self._pending, None
            self._last_sent = self._clock()
            self._send(event)


class EngineHost:
    """Runs requests from ``conn`` against an engine made by ``factory`` until Shutdown or EOF."""

    def __init__(self, conn: Connection, factory: Callable[[EngineConfig], EngineLike]) -> None:
        self._factory = factory
        self._engine: EngineLike | None = None
        self._inbox: queue.SimpleQueue[Request] = queue.SimpleQueue()
        self._cancelled: set[int] = set()
        self._lock = threading.Lock()
        self._link = ParentLink(
            conn, self._on_message, lambda: self._inbox.put(Shutdown()), name="engine-host"
        )

    def run(self) -> None:
        self._link.start()
        try:
            while True:
                request = self._inbox.get()
                if isinstance(request, Shutdown):
                    break
                self._handle(request)
        except ParentGone:
            log.info("the app closed the pipe; leaving")
        finally:
            self._close_engine()

    # Reader thread

    def _on_message(self, request: Request) -> None:
        if isinstance(request, Cancel):
            with self._lock:
                self._cancelled.add(request.request_id)
        else:
            self._inbox.put(request)

    # Main thread

    def _send(self, reply: Reply) -> None:
        self._link.send(reply)

    def _handle(self, request: Request) -> None:
        if isinstance(request, Load):
            self._load(request.config)
        elif isinstance(request, Generate):
            self._generate(request)
        elif isinstance(request, Unload):
            self._close_engine()
            self._send(Unloaded())
        else:
            log.warning("ignoring unexpected request %r", request)

    def _load(self, config: EngineConfig) -> None:
        self._close_engine()
        try:
            self._engine = self._factory(config)
        except EngineError as exc:
            log.warning("load failed: %s", exc)
            self._send(LoadFailed(str(exc)))
            return
        except Exception as exc:
            log.exception("load failed unexpectedly")
            self._send(LoadFailed(f"The model could not be loaded ({type(exc).__name__}: {exc})."))
            return
        self._send(Loaded(self._engine.info))

    def _generate(self, request: Generate) -> None:
        rid = request.request_id
        if self._engine is None:
            self._send(Failed(rid, "No model is loaded; choose a model first."))
            return

        def should_cancel() -> bool:
            with self._lock:
                return rid in self._cancelled or self._link.gone.is_set()

        batcher = TokenBatcher(lambda event: self._send(Tokens(rid, event)))
        try:
            result = self._engine.generate(request.request, on_event=batcher.add, should_cancel=should_cancel)
        except ParentGone:
            raise
        except EngineError as exc:
            batcher.flush()
            log.warning("generation %d failed: %s", rid, exc)
            self._send(Failed(rid, str(exc), type(exc).__name__ if isinstance(exc, GrammarError) else ""))
        except Exception as exc:
            batcher.flush()
            log.exception("generation %d failed unexpectedly", rid)
            message = f"The engine failed while writing the reply ({type(exc).__name__}: {exc})."
            self._send(Failed(rid, message))
        else:
            batcher.flush()
            self._send(Finished(rid, result))
        finally:
            with self._lock:
                self._cancelled.discard(rid)
                # Cancels for finished requests will never be needed again.
                self._cancelled = {r for r in self._cancelled if r > rid}

    def _close_engine(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            try:
                engine.close()
            except Exception:
                log.exception("closing the engine failed")


def serve(conn: Connection, engine_factory: str = DEFAULT_ENGINE, log_path: str | None = None) -> None:
    """Entry point of the engine process (the target of multiprocessing's spawn)."""
    configure_logging(log_path, "engine")
    log.info("engine process started")
    try:
        factory = load_factory(engine_factory)
    except Exception as exc:
        # Without an engine every request fails with this sentence rather than the process vanishing.
        log.exception("cannot import the engine %s", engine_factory)
        message = f"The engine could not start ({type(exc).__name__}: {exc})."

        def factory(config: EngineConfig) -> Any:
            raise EngineError(message)

    EngineHost(conn, factory).run()
    conn.close()
    log.info("engine process leaving")
