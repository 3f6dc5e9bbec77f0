"""The app's wiring of other model folders and of the token, with the real settings file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from huggingface_hub import constants

from localchat.app import AppParts, ModelsWiring, build_main_window
from localchat.services.hub_token_service import HubTokenService
from localchat.settings import SettingsFile
from tests.ui.fakes import FakeEngine


@pytest.fixture
def parts(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppParts:
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    parts = build_main_window(tmp_path / "config", tmp_path / "data", engine=FakeEngine())
    qtbot.addWidget(parts.window)
    parts.settings.set("models_folder", str(tmp_path / "own"))
    return parts


def test_an_added_folder_is_saved_listed_read_only_and_paired_from(
    parts: AppParts, tmp_path: Path, smollm2_path: Path
) -> None:
    other = tmp_path / "lm-studio" / "models" / "publisher" / "repo"
    other.mkdir(parents=True)
    (other / smollm2_path.name).symlink_to(smollm2_path)
    top = tmp_path / "lm-studio" / "models"
    wiring = ModelsWiring(parts.window, parts.settings)

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
