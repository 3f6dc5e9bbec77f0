"""The app's wiring of other model folders and of the token, with the real settings file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from localchat.app import AppParts
from localchat.services.hub_token_service import HubTokenService
from localchat.settings import SettingsFile
from tests.ui.apps import fake_engine_app


@pytest.fixture
def parts(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppParts:
    return fake_engine_app(qtbot, tmp_path, monkeypatch)


def test_an_added_folder_is_saved_listed_read_only_and_paired_from(
    parts: AppParts, tmp_path: Path, smollm2_path: Path
) -> None:
    other = tmp_path / "lm-studio" / "models" / "publisher" / "repo"
    other.mkdir(parents=True)
    (other / smollm2_path.name).symlink_to(smollm2_path)
    top = tmp_path / "lm-studio" / "models"
    wiring = parts.models
    assert wiring is not None
    library, sentence = wiring.add_folder(str(top))
    assert sentence.startswith(f"Added {top.resolve()}: 1 model found there.")
    assert "never moves or deletes" in sentence
    assert parts.settings.extra_model_folder_list() == [str(top.resolve())]
    saved = SettingsFile(tmp_path / "config").load().settings
    assert saved.extra_model_folder_list() == [str(top.resolve())]
    [model] = [m for m in library.refresh() if m.name == smollm2_path.name]
    assert model.read_only and model.folder == top.resolve() and model.usable

    _library, sentence = wiring.add_folder(str(top))
    assert sentence == f"{top.resolve()} is already listed."
    assert parts.settings.extra_model_folder_list() == [str(top.resolve())]
    with pytest.raises(ValueError, match="is not a folder"):
        wiring.add_folder(str(tmp_path / "nowhere"))

    second = tmp_path / "more"
    second.mkdir()
    wiring.add_folder(str(second))
    assert parts.settings.extra_model_folders == os.pathsep.join([str(top.resolve()), str(second.resolve())])


def test_the_settings_dialog_gets_the_token_service(parts: AppParts) -> None:
    assert isinstance(parts.window.hub_token, HubTokenService)


def test_the_manager_marks_what_the_engine_has_loaded(
    qtbot, parts: AppParts, tmp_path: Path, smollm2_path: Path
) -> None:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from localchat.ui.model_manager import LOCAL_COLUMNS, ModelManagerDialog

    own = tmp_path / "own"
    own.mkdir()
    (own / smollm2_path.name).symlink_to(smollm2_path)
    wiring = parts.models
    assert wiring is not None
    parts.window.load_model(str(own / smollm2_path.name))  # the fake engine loads at once
    seen: list[str] = []

    def look() -> None:  # the manager is modal: read it while it is open, then close it
        dialog = QApplication.activeModalWidget()
        assert isinstance(dialog, ModelManagerDialog)
        seen.append(dialog.local_table.item(0, LOCAL_COLUMNS.index("Status")).text())
        dialog.reject()

    QTimer.singleShot(0, look)
    wiring.open_manager()
    assert seen == ["Loaded"]
