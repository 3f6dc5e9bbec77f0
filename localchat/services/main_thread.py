"""The one way back to the GUI thread: ``on_main(method)`` gives a callable any thread may call.

Work done off the GUI thread (the engine's supervisor, the benchmark's,
downloads, the hub token check) hands its results back through this helper,
as Anki's ``run_on_main`` does: each call is queued, and one queued Qt signal
wakes the GUI thread, which runs every waiting call in order (a burst of calls
costs one wake-up). No timer polls, so nothing waits for a tick: a token batch
reaches the window as soon as the GUI thread is free.

The target is held weakly and looked up on the GUI thread, so a worker thread
never holds the last reference to a Qt object (its destructor would run on the
wrong thread: see services/main_thread_gc.py). A call to an object that has
gone is dropped. Calls made on the GUI thread itself are queued too, so a
result always arrives after the call that asked for it has returned.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal

from localchat.services.qt_signals import emit

log = logging.getLogger(__name__)

DRAIN_BUDGET_S = 0.02  # run waiting calls for at most this long, then let the event loop breathe


class _Dispatcher(QObject):
    wake = Signal()

    def __init__(self) -> None:
        super().__init__()
        self._calls: collections.deque[tuple[weakref.WeakMethod[Callable[..., Any]], tuple[Any, ...]]] = (
            collections.deque())
        self._lock = threading.Lock()
        self._woken = False
        self.wake.connect(self._on_wake, Qt.ConnectionType.QueuedConnection)

    def post(self, method: weakref.WeakMethod[Callable[..., Any]], args: tuple[Any, ...]) -> None:
        with self._lock:
            self._calls.append((method, args))
            if self._woken:
                return
            self._woken = True
        emit(self.wake)

    def _on_wake(self) -> None:
        deadline = time.monotonic() + DRAIN_BUDGET_S
        while True:
            with self._lock:
                if not self._calls:
                    self._woken = False
                    return
                method, args = self._calls.popleft()
            target = method()
            if target is not None:
                try:
                    target(*args)
                except Exception:  # one failing call must not stop the others
                    log.exception("a call handed to the GUI thread failed")
            del target
            if time.monotonic() > deadline:
                emit(self.wake)  # the rest on the next turn of the event loop
                return


_dispatcher: _Dispatcher | None = None


def _the_dispatcher() -> _Dispatcher:
    global _dispatcher
    if _dispatcher is None:
        app = QCoreApplication.instance()
        if app is None or QThread.currentThread() is not app.thread():
            raise RuntimeError("on_main() must first be called on the GUI thread, after the QApplication")
        _dispatcher = _Dispatcher()
    return _dispatcher


def on_main(method: Callable[..., Any]) -> Callable[..., None]:
    """A thread-safe callable that runs ``method`` (a bound method) on the GUI thread with its args.

    Call this on the GUI thread (where the QObject lives); the callable it returns may be called
    from any thread, any number of times."""
    dispatcher = _the_dispatcher()
    ref: weakref.WeakMethod[Callable[..., Any]] = weakref.WeakMethod(method)

    def call(*args: Any) -> None:
        dispatcher.post(ref, args)

    return call
