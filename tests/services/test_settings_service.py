from __future__ import annotations

from pathlib import Path

import pytest

from localchat.services import SettingsService
from localchat.settings import InvalidValueError, SettingsFile


def test_set_saves_and_announces(qtbot, tmp_path: Path) -> None:
    service = SettingsService(SettingsFile(tmp_path))
    assert service.load_messages == []
    seen: list[tuple[str, object]] = []
    service.changed.connect(lambda name, value: seen.append((name, value)))
    service.set("draft_tokens", 6)
    service.set("draft_tokens", 6)  # no change, no signal
    assert seen == [("draft_tokens", 6)]
    with pytest.raises(InvalidValueError):
        service.set("draft_tokens", 0)
    assert service.get("draft_tokens") == 6
    with pytest.raises(InvalidValueError):
        service.set_many({"temperature": 0.1, "top_k": -1})
    assert service.get("temperature") == 0.7  # nothing applied
    service.set_many({"temperature": 0.1, "adaptive": False})
    assert SettingsFile(tmp_path).load().settings.non_defaults() == {
        "draft_tokens": 6,
        "adaptive": False,
        "temperature": 0.1,
    }
    service.reset("draft_tokens")
    assert seen[-1] == ("draft_tokens", 4)


def test_broken_file_message(qtbot, tmp_path: Path) -> None:
    (tmp_path / "settings.toml").write_text("draft_tokens = ")
    service = SettingsService(SettingsFile(tmp_path))
    assert len(service.load_messages) == 1 and "settings.toml.bad" in service.load_messages[0]


def test_save_failure_is_announced(qtbot, tmp_path: Path) -> None:
    config_dir = tmp_path / "cfg"
    service = SettingsService(SettingsFile(config_dir))
    config_dir.write_text("a file where the folder should be")  # fails even for root
    with qtbot.waitSignal(service.save_failed, timeout=1000) as blocker:
        service.set("adaptive", False)
    assert "could not be saved" in blocker.args[0]
    assert service.get("adaptive") is False
