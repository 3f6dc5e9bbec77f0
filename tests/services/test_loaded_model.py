"""LoadedModel on a fake engine with the real settings and presets files: the names the window shows,
the model's id and preset, the settings a reply is written with, a chat's settings kept as a preset, and
the model remembered for the next start."""

from __future__ import annotations

from pathlib import Path

import pytest

from localchat.chat import ConversationStore
from localchat.engine.types import EngineConfig
from localchat.services import SettingsService
from localchat.services.chat_options import ChatOptions
from localchat.services.loaded_model import LoadedModel
from localchat.services.model_presets import ModelPresets
from localchat.settings import SettingsFile
from localchat.settings.presets import ModelPreset, PresetsFile
from tests.ui.fakes import FakeEngine

QWEN = "/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


@pytest.fixture
def settings(tmp_path: Path) -> SettingsService:
    return SettingsService(SettingsFile(tmp_path / "config"))


@pytest.fixture
def presets(tmp_path: Path) -> ModelPresets:
    return ModelPresets(PresetsFile(tmp_path / "config"))


def test_names_are_the_catalogs_and_empty_before_a_load(settings: SettingsService) -> None:
    engine = FakeEngine()
    model = LoadedModel(engine, settings, None)
    assert (model.target_name, model.draft_name, model.config_name, model.model_id) == ("", "", "", "")
    engine.load(model.config_for(QWEN))
    assert model.target_name == model.config_name == "Qwen2.5-Coder 1.5B Instruct · Q4_K_M"
    assert model.draft_name == "" and model.preset is None and model.model_id == ""  # no presets


def test_the_preset_applies_to_the_load_and_the_replies(
    settings: SettingsService, presets: ModelPresets, tmp_path: Path
) -> None:
    engine = FakeEngine()
    model = LoadedModel(engine, settings, presets)
    settings.set("temperature", 0.9)
    mid = presets.model_id(QWEN)
    assert presets.save(mid, ModelPreset({"temperature": 0.2, "context_length": 8192}, "Be brief.")) == ""
    config = model.config_for(QWEN)
    assert config.n_ctx == 8192  # the preset's context length, not the setting's
    engine.load(config)
    assert model.model_id == mid and model.preset is not None and model.system_prompt == "Be brief."
    assert model.reader().temperature == 0.2 and settings.temperature == 0.9


def test_a_chats_settings_kept_as_a_preset(settings: SettingsService, presets: ModelPresets,
                                           tmp_path: Path) -> None:
    engine = FakeEngine()
    model = LoadedModel(engine, settings, presets)
    engine.load(model.config_for(QWEN))
    with ConversationStore(tmp_path / "chats.sqlite3") as store:
        options = ChatOptions(store, settings, None)
        cid = store.create("chat").id
        store.set_options(cid, {"temperature": 0.4})
        kept = model.preset_for_chat(options, cid, "")
    assert kept.values["temperature"] == 0.4 and kept.system_prompt == ""
    assert kept.values["context_length"] == settings.context_length  # what was loaded
    assert model.preset_for_chat(options, None, "Use Python.").system_prompt == "Use Python."


def test_the_model_that_loads_is_remembered_for_the_next_start(settings: SettingsService) -> None:
    engine = FakeEngine()
    model = LoadedModel(engine, settings, None)  # kept: its connection lives as long as it does
    engine.load(EngineConfig(QWEN, draft_path="/models/draft.gguf"))
    assert model.target_name
    assert settings.last_model_path == QWEN and settings.last_draft_path == "/models/draft.gguf"
    engine.fail_next_load = "no"
    engine.load(EngineConfig("/models/broken.gguf"))
    assert settings.last_model_path == QWEN  # a model that did not load is not remembered
