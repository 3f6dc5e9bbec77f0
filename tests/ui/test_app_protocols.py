"""app.py reaches the engine client through declared Protocols, not getattr: a rename breaks a test."""

from __future__ import annotations

from localchat.app import ReportsMemory, ShutsDown, _memory_probe
from localchat.services.engine_client import EngineClient
from tests.ui.fakes import FakeEngine


def test_the_real_client_reports_memory_and_shuts_down() -> None:
    assert issubclass(EngineClient, ReportsMemory)
    assert issubclass(EngineClient, ShutsDown)


def test_a_fake_without_them_gets_no_memory_probe(qtbot) -> None:
    fake = FakeEngine()
    assert not isinstance(fake, ShutsDown)
    assert _memory_probe(fake) is None
