"""Per-model presets in presets.toml: round trip, bad values as sentences, a broken file set aside,
and the overlay a model's replies and load are built from."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from localchat.settings import InvalidValueError, Settings
from localchat.settings.presets import ModelPreset, PresetReader, PresetsFile

QWEN = "qwen2.5-coder-1.5b-instruct"


def test_no_file_means_no_presets_and_no_message(tmp_path: Path) -> None:
    result = PresetsFile(tmp_path).load()
    assert (result.presets, result.messages) == ({}, [])


def test_a_saved_preset_reads_back_and_another_model_keeps_its_own(tmp_path: Path) -> None:
    f = PresetsFile(tmp_path / "cfg")
    f.save(QWEN, ModelPreset({"temperature": 0.2, "context_length": 8192}, "Answer with code first."))
    f.save("smollm2-135m", ModelPreset({"top_k": 20}))
    document = tomllib.loads(f.path.read_text(encoding="utf-8"))
    assert document["models"][QWEN] == {"system_prompt": "Answer with code first.", "temperature": 0.2,
                                        "context_length": 8192}
    loaded = f.load()
    assert loaded.messages == []
    assert dict(loaded.presets[QWEN].values) == {"temperature": 0.2, "context_length": 8192}
    assert loaded.presets[QWEN].system_prompt == "Answer with code first."
    assert dict(loaded.presets["smollm2-135m"].values) == {"top_k": 20}

    f.save(QWEN, None)  # cleared
    assert set(f.load().presets) == {"smollm2-135m"}


def test_bad_values_are_sentences_and_stay_in_the_file_when_another_model_is_saved(tmp_path: Path) -> None:
    f = PresetsFile(tmp_path)
    f.path.write_text(
        "# my presets\n"
        f'[models."{QWEN}"]\ntemperature = 9\ntop_p = 0.8\ncolour = "blue"\nsystem_prompt = 3\n',
        encoding="utf-8")
    result = f.load()
    assert dict(result.presets[QWEN].values) == {"top_p": 0.8}
    text = " ".join(result.messages)
    assert "temperature must be at most 2, not 9; the app's setting is used" in text
    assert "colour is not something a preset holds" in text
    assert "system_prompt must be text" in text

    f.save("gemma-3-1b-it", ModelPreset({"temperature": 1.0}))
    kept = f.path.read_text(encoding="utf-8")
    assert kept.startswith("# my presets\n") and "temperature = 9" in kept and 'colour = "blue"' in kept


def test_a_file_that_is_not_toml_is_set_aside_with_a_sentence(tmp_path: Path) -> None:
    f = PresetsFile(tmp_path)
    f.path.write_text("[models\ntemperature = ", encoding="utf-8")
    (tmp_path / "presets.toml.bad").write_text("an earlier broken copy", encoding="utf-8")
    result = f.load()
    assert result.presets == {}
    assert "is not valid TOML" in result.messages[0] and "presets.toml.bad-2" in result.messages[0]
    assert (tmp_path / "presets.toml.bad-2").read_text(encoding="utf-8") == "[models\ntemperature = "
    assert (tmp_path / "presets.toml.bad").read_text(encoding="utf-8") == "an earlier broken copy"
    assert not f.path.exists()
    f.save(QWEN, ModelPreset({"min_p": 0.1}))  # a new file, with its header
    assert dict(f.load().presets[QWEN].values) == {"min_p": 0.1}


def test_a_preset_validates_its_values_and_says_what_it_sets() -> None:
    with pytest.raises(InvalidValueError):
        ModelPreset({"context_length": 100})
    with pytest.raises(InvalidValueError, match="not a setting a model's preset can hold"):
        ModelPreset({"theme": "dark"})
    preset = ModelPreset({"context_length": 8192, "temperature": 0.2}, "Be brief.")
    assert preset.summary() == "temperature 0.2, context length 8,192, a system prompt"
    assert ModelPreset().empty and ModelPreset().summary() == "nothing"


def test_the_reader_gives_the_presets_values_over_the_settings() -> None:
    settings = Settings()
    settings.set("temperature", 0.9)
    reader = PresetReader(settings, ModelPreset({"temperature": 0.1, "context_length": 16384}))
    assert (reader.temperature, reader.context_length, reader.top_k) == (0.1, 16384, settings.top_k)
    assert PresetReader(settings, None).temperature == 0.9
