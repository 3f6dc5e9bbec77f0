"""Per-model presets in the real window (fake engine): saved from the Models menu, applied when the
model loads (its context length) and to its replies (sampling, system prompt), cleared, and a broken
presets file set aside with a sentence."""

from __future__ import annotations

import tomllib
from pathlib import Path

from localchat.app import AppParts, build_main_window
from tests.ui.fakes import FakeEngine


def _app(qtbot, tmp_path: Path) -> AppParts:
    parts = build_main_window(tmp_path / "config", tmp_path / "data", engine=FakeEngine())
    qtbot.addWidget(parts.window)
    return parts


def _engine(parts: AppParts) -> FakeEngine:
    assert isinstance(parts.engine, FakeEngine)
    return parts.engine


def _model(tmp_path: Path) -> str:
    model = tmp_path / "tiny-coder-Q4_K_M.gguf"
    model.write_bytes(b"GGUF")
    return str(model)


def test_saving_the_current_settings_as_the_models_preset_and_using_it(qtbot, tmp_path: Path) -> None:
    parts = _app(qtbot, tmp_path)
    w, engine = parts.window, _engine(parts)
    assert not w.menus.save_preset_action.isEnabled()  # no model loaded
    w.load_model(_model(tmp_path))
    assert w.menus.save_preset_action.isEnabled() and not w.menus.clear_preset_action.isEnabled()
    parts.settings.set("temperature", 0.2)
    parts.settings.set("top_k", 12)
    w.session.send("hi")
    w.session.set_system_prompt("Answer with code first.")
    engine.finish()

    w.menus.save_preset_action.trigger()
    assert "Saved as the preset of tiny-coder-Q4_K_M.gguf" in w.notice.text()
    assert w.menus.clear_preset_action.isEnabled()
    document = tomllib.loads((tmp_path / "config" / "presets.toml").read_text(encoding="utf-8"))
    saved = document["models"]["tiny-coder-Q4_K_M"]
    assert saved["temperature"] == 0.2 and saved["top_k"] == 12 and saved["context_length"] == 4096
    assert saved["system_prompt"] == "Answer with code first."

    # The app's settings change; the model's replies keep its preset (said), and a new chat gets its prompt.
    w.apply_settings({"temperature": 1.3})
    assert "Temperature: tiny-coder-Q4_K_M.gguf's preset sets its own" in w.notice.text()
    w.new_conversation()
    assert "the model's preset, “Answer with code first.”" in w.system_prompt.placeholderText()
    w.session.send("again")
    request = engine.requests[-1]
    assert request.sampling.temperature == 0.2 and request.sampling.top_k == 12
    assert request.messages[0].role == "system" and request.messages[0].content == "Answer with code first."
    engine.finish()

    w.menus.clear_preset_action.trigger()
    assert "uses the app's settings again" in w.notice.text()
    w.session.send("and again")
    assert engine.requests[-1].sampling.temperature == 1.3
    assert engine.requests[-1].messages[0].role == "user"
    document = tomllib.loads((tmp_path / "config" / "presets.toml").read_text(encoding="utf-8"))
    assert "tiny-coder-Q4_K_M" not in document.get("models", {})


def test_a_models_preset_sets_its_context_length_when_it_loads(qtbot, tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "presets.toml").write_text(
        '[models."tiny-coder-Q4_K_M"]\ncontext_length = 8192\ntemperature = 0.3\n', encoding="utf-8")
    parts = _app(qtbot, tmp_path)
    w, engine = parts.window, _engine(parts)
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF")
    w.load_model(str(other))
    assert engine.configs[-1].n_ctx == 4096  # the app's setting: this model has no preset
    w.load_model(_model(tmp_path))
    assert engine.configs[-1].n_ctx == 8192
    assert "loaded with its preset: temperature 0.3, context length 8,192" in w.notice.text()


def test_a_broken_presets_file_is_set_aside_with_a_sentence(qtbot, tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    broken = tmp_path / "config" / "presets.toml"
    broken.write_text("[models\n", encoding="utf-8")
    parts = _app(qtbot, tmp_path)
    assert "presets.toml is not valid TOML" in parts.window.notice.text()
    assert "saved as presets.toml.bad" in parts.window.notice.text()
    assert (tmp_path / "config" / "presets.toml.bad").read_text(encoding="utf-8") == "[models\n"
