"""services.engine_port.EnginePort is the one declaration of what the window sees of the engine: the
real client and the UI tests' fake both have every member it names (a rename breaks this test)."""

from __future__ import annotations

import inspect

from localchat.services.engine_client import EngineClient
from localchat.services.engine_port import EnginePort
from tests.ui.fakes import FakeEngine

MEMBERS = {name for name, _ in inspect.getmembers(EnginePort) if not name.startswith("_")}


def test_the_port_names_the_signals_the_state_and_the_commands() -> None:
    assert {"state_changed", "job_event", "state", "load", "generate", "cancel", "shutdown"} <= MEMBERS


def test_the_real_client_and_the_fake_implement_every_member(qtbot) -> None:
    real = EngineClient()
    try:
        for engine in (real, FakeEngine()):
            missing = {name for name in MEMBERS if not hasattr(engine, name)}
            assert not missing, f"{type(engine).__name__} lacks {missing}"
    finally:
        real.shutdown()
