"""BenchService: a benchmark in its own process (host/supervisor.py's BenchSupervisor), for the dialog.

A thin adapter like EngineClient: the supervisor runs the benchmark process on
a thread of its own; what it tells (host/events.py's objects, unchanged) comes
to the GUI thread through services/main_thread.py and out of one signal::

    bench_event(Loaded | BenchProgress | BenchDone | Failed)

``Loaded`` (the benchmark's engine is ready), ``BenchProgress`` (one prompt in
one mode measured), then ``BenchDone`` (every run ended, or stopped after
``cancel()``: the report holds the runs completed) or ``Failed`` (the load
failed, the benchmark failed, the process died). Nothing here imports the engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from PySide6.QtCore import QObject, Signal, SignalInstance

from localchat.bench.modes import BenchMode
from localchat.bench.prompts import BenchPrompt
from localchat.engine.types import EngineConfig
from localchat.host.engine_child import DEFAULT_ENGINE
from localchat.host.events import Event
from localchat.host.supervisor import BenchSupervisor
from localchat.services.main_thread import on_main
from localchat.services.qt_signals import emit


class BenchPort(Protocol):
    """What the benchmark dialog uses (BenchService, or a test's stand-in)."""

    @property
    def bench_event(self) -> SignalInstance: ...

    @property
    def is_running(self) -> bool: ...

    def start(self, config: EngineConfig, prompts: Sequence[BenchPrompt], modes: Sequence[BenchMode],
              max_tokens: int) -> None: ...

    def cancel(self) -> None: ...

    def stop(self) -> None: ...


class BenchService(QObject):
    bench_event = Signal(object)  # Loaded | BenchProgress | BenchDone | Failed

    def __init__(
        self,
        parent: QObject | None = None,
        *,
        engine_factory: str = DEFAULT_ENGINE,
        log_path: str | None = None,
        cancel_timeout_s: float = 10.0,
    ) -> None:
        super().__init__(parent)
        self._supervisor = BenchSupervisor(on_main(self._on_supervisor_event), engine_factory=engine_factory,
                                           log_path=log_path, cancel_timeout_s=cancel_timeout_s)

    @property
    def is_running(self) -> bool:
        return self._supervisor.running

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
        self._supervisor.start(config, prompts, modes, max_tokens, warmup=warmup)

    def cancel(self) -> None:
        """Stop after the current engine step; BenchDone (cancelled) follows with the runs completed."""
        self._supervisor.cancel()

    def stop(self) -> None:
        """End any benchmark at once, without events (the dialog is closing)."""
        self._supervisor.stop()

    def _on_supervisor_event(self, event: Event) -> None:
        emit(self.bench_event, event)
