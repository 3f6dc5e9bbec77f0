"""The app's handle on the engine process: a ChildProcess (host/child.py) running ``worker.serve``.

No Qt here; services.EngineClient drives this from a QTimer on the GUI thread,
host.scheduler.EngineBroker from a thread. Nothing here blocks for long except
``stop`` (bounded by its timeout). ``receive`` returns protocol Replies.
"""

from __future__ import annotations

from localchat.host.child import ChildGone, ChildProcess
from localchat.host.protocol import Shutdown
from localchat.host.worker import DEFAULT_ENGINE

# The engine's ChildGone: raised by send/receive once the engine process is not running.
EngineGone = ChildGone


def load_death_sentence(exitcode: int | None) -> str:
    """Why a load got no answer: the process ended while reading the model."""
    return (
        f"The engine stopped while loading the model (exit code {exitcode}); the file may be "
        "damaged or too large for this computer's memory."
    )


class EngineProcess(ChildProcess):
    """One engine child process and the app's end of its pipe."""

    def __init__(self, engine_factory: str = DEFAULT_ENGINE, log_path: str | None = None) -> None:
        super().__init__(
            "localchat.host.worker:serve", name="localchat-engine", what="engine", farewell=Shutdown()
        )
        self._engine_factory = engine_factory
        self._log_path = log_path

    def start(self) -> None:
        self.spawn(self._engine_factory, self._log_path)
