"""``localchat serve ID`` finds a catalog model where the app does, the other folders included."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from huggingface_hub import constants

from localchat.cli.serve import resolve_model
from localchat.settings import Settings, SettingsFile
from localchat.settings import folders as settings_folders


def test_a_catalog_id_is_found_in_an_lm_studio_folder(
    tmp_path: Path, qwen_target_path: Path, qwen_draft_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, own, other = tmp_path / "config", tmp_path / "own", tmp_path / "lmstudio" / "models"
    own.mkdir()
    for real in (qwen_target_path, qwen_draft_path):
        link = other / "lmstudio-community" / "Qwen-GGUF" / real.name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(real)
    SettingsFile(config).save(Settings({"models_folder": str(own), "extra_model_folders": str(other)}))
    monkeypatch.setattr(settings_folders, "config_dir", lambda: config)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))

    target, draft, model_id, reason = resolve_model("qwen2.5-coder-1.5b-instruct", None, False)
    assert model_id == "qwen2.5-coder-1.5b-instruct"
    assert Path(target).parent.parent.parent == other and Path(target).name == qwen_target_path.name
    assert draft is not None and Path(draft).name == qwen_draft_path.name
    assert "as the catalog recommends" in reason


def _user_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own: Path) -> None:
    config = tmp_path / "config"
    SettingsFile(config).save(Settings({"models_folder": str(own)}))
    monkeypatch.setattr(settings_folders, "config_dir", lambda: config)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))


def test_serve_names_a_file_as_the_apps_server_does_and_takes_that_id_back(
    tmp_path: Path, qwen_target_path: Path, smollm2_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's `serve --model qwen2.5-coder-1.5b` was refused, and a file path was served under its
    file stem while a catalog id was served under the catalog id: one file, two names."""
    own = tmp_path / "own"
    own.mkdir()
    for real in (qwen_target_path, smollm2_path):
        (own / real.name).symlink_to(real)
    _user_folders(tmp_path, monkeypatch, own)

    by_path = resolve_model(str(own / qwen_target_path.name), None, True)
    by_id = resolve_model("qwen2.5-coder-1.5b-instruct", None, True)
    by_start = resolve_model("qwen2.5-coder-1.5b", None, True)  # the start of exactly one catalog id
    assert by_path[2] == by_id[2] == by_start[2] == "qwen2.5-coder-1.5b-instruct"
    assert Path(by_path[0]).resolve() == Path(by_id[0]).resolve() == Path(by_start[0]).resolve()

    # A file the catalog does not list: its name without .gguf, as the id and as what --model takes.
    plain = resolve_model(smollm2_path.stem, None, True)
    assert plain[2] == smollm2_path.stem and Path(plain[0]).name == smollm2_path.name
    assert resolve_model(smollm2_path.name, None, True)[2] == smollm2_path.stem

    with pytest.raises(ValueError, match="neither a GGUF file, a catalog id nor a model in the models"):
        resolve_model("no-such-model", None, True)
    pull = re.escape("not downloaded yet: run `localchat pull qwen2.5-coder-7b-instruct`")
    with pytest.raises(ValueError, match=pull):
        resolve_model("qwen2.5-coder-7b", None, True)
