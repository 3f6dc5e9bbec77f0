"""The real app's window on a fake engine, with its folders (settings, data, models, the hub cache)
under a test's temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import constants

from localchat.app import AppParts, build_main_window
from tests.ui.fakes import FakeEngine


def fake_engine_app(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppParts:
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    parts = build_main_window(tmp_path / "config", tmp_path / "data", engine=FakeEngine())
    qtbot.addWidget(parts.window)
    parts.settings.set("models_folder", str(tmp_path / "own"))
    return parts
