"""``localchat serve ID`` finds a catalog model where the app does, the other folders included."""

from __future__ import annotations

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
