"""EnginePort: what the window's side sees of the engine, declared once.

``services.EngineClient`` implements it over the real supervisor; the UI tests'
fake implements it over nothing. Two signals carry host/events.py's objects as
they are (no other vocabulary)::

    state_changed(EngineState)     every new state snapshot of the engine
    job_event(Tokens | Finished | Failed)
                                   every job's events, the window's and the API's alike
                                   (``source`` tells them apart; the window's is "window")

and a few commands. ``supervisor`` is the engine's supervisor for the local API
to share (one process, one model), or None where there is none to share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import SignalInstance

from localchat.engine.types import EngineConfig, GenerationRequest
from localchat.host.events import EngineState

if TYPE_CHECKING:
    from localchat.host.supervisor import EngineSupervisor

WINDOW = "window"  # the source name of the window's own replies


class EnginePort(Protocol):
    @property
    def state_changed(self) -> SignalInstance: ...

    @property
    def job_event(self) -> SignalInstance: ...

    @property
    def state(self) -> EngineState:
        """The engine's state now (a frozen snapshot; state_changed tells each new one)."""
        ...

    @property
    def log_path(self) -> str | None:
        """Where the engine process writes its log (named when it dies), or None."""
        ...

    @property
    def supervisor(self) -> EngineSupervisor | None: ...

    def load(self, config: EngineConfig) -> None: ...

    def generate(self, request: GenerationRequest) -> int:
        """Start the window's reply; its events come as job_event with source "window"."""
        ...

    def cancel(self) -> None: ...

    def memory_bytes(self) -> int | None: ...

    def shutdown(self) -> None: ...
