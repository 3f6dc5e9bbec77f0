"""PresetsWiring in the real window (fake engine): the Models menu's preset actions follow the model
loaded, the system prompt box names the preset's prompt while empty, and a setting the preset sets
itself is said so when changed."""

from __future__ import annotations

from pathlib import Path

from localchat.app import build_main_window
from localchat.settings.presets import ModelPreset
from tests.ui.fakes import FakeEngine


def test_the_preset_shows_in_the_menu_the_prompt_box_and_the_settings_notes(qtbot, tmp_path: Path) -> None:
    parts = build_main_window(tmp_path / "config", tmp_path / "data", engine=FakeEngine())
    qtbot.addWidget(parts.window)
    w = parts.window
    presets = w.session.model.presets
    assert presets is not None
    assert not w.menus.save_preset_action.isEnabled() and not w.menus.clear_preset_action.isEnabled()
    assert w.system_prompt.placeholderText() == "System prompt for this chat (optional)"
    model = tmp_path / "tiny-coder-Q4_K_M.gguf"
    model.write_bytes(b"GGUF")
    presets.save(presets.model_id(str(model)), ModelPreset({"temperature": 0.3}, "Answer in French."))
    w.load_model(str(model))
    assert w.menus.save_preset_action.isEnabled() and w.menus.clear_preset_action.isEnabled()
    assert "Answer in French." in w.system_prompt.placeholderText()
    assert w.presets.overridden_note({"top_k": 5}) == ""
    assert w.presets.overridden_note({"temperature": 0.5}).endswith(
        "preset sets its own (Models → Clear this model's preset to use the app's).")
    w.menus.clear_preset_action.trigger()
    assert not w.menus.clear_preset_action.isEnabled()
    assert w.system_prompt.placeholderText() == "System prompt for this chat (optional)"
    assert "uses the app's settings again" in w.notice.text()
