"""The window's side of the per-model presets, connected in one place: Models → Save the current
settings as this model's preset and Clear this model's preset (enabled while a model is loaded, Clear
only where it has one), the system prompt box's placeholder naming the preset's prompt, the sentence
when a model loads with its preset, and the one when a setting changed is one the preset sets.

The presets themselves are services.ModelPresets; the loaded model's preset, and a chat's settings
taken as one, are the session's ``model`` (services.LoadedModel).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QLineEdit

from localchat.host.events import EngineState, Phase
from localchat.services.chat_session import ChatSession
from localchat.services.engine_port import EnginePort
from localchat.settings import OPTIONS
from localchat.ui.menus import WindowMenus


class PresetsWiring(QObject):
    def __init__(self, parent: QObject, session: ChatSession, engine: EnginePort, menus: WindowMenus,
                 system_prompt: QLineEdit, notice: Callable[[str], None]) -> None:
        super().__init__(parent)
        self.session = session
        self.model = session.model
        self.engine = engine
        self.menus = menus
        self.system_prompt = system_prompt
        self._notice = notice
        self._phase = engine.state.phase
        menus.save_preset_action.triggered.connect(self.save)
        menus.clear_preset_action.triggered.connect(self.clear)
        if self.model.presets is not None:
            self.model.presets.changed.connect(lambda _id: self.refresh())
        engine.state_changed.connect(self._on_engine_state_changed)

    def save(self) -> None:
        """Keep the settings the current chat's replies are written with as the loaded model's preset."""
        presets, model_id = self.model.presets, self.model.model_id
        if presets is None or not model_id or self.engine.state.info is None:
            self._notice("Load a model first: a preset is kept for the model that is loaded.")
            return
        preset = self.model.preset_for_chat(self.session.options, self.session.current_id,
                                            self.session.system_prompt())
        problem = presets.save(model_id, preset)
        self._notice(problem or (
            f"Saved as the preset of {self.model.target_name}: {preset.summary()}. It applies "
            "whenever this model loads (the context length from the next load)."))

    def clear(self) -> None:
        presets, model_id = self.model.presets, self.model.model_id
        if presets is None or not model_id:
            return
        problem = presets.clear(model_id)
        self._notice(problem or f"{self.model.target_name} uses the app's settings again "
                                "(its context length from the next load).")

    def refresh(self) -> None:
        """The menu's actions for the model loaded, and the system prompt box's placeholder."""
        loaded = self.engine.state.info is not None and self.model.presets is not None
        self.menus.save_preset_action.setEnabled(loaded)
        self.menus.clear_preset_action.setEnabled(loaded and self.model.preset is not None)
        preset = self.model.preset
        prompt = preset.system_prompt.strip() if preset is not None else ""
        shown = prompt if len(prompt) <= 80 else prompt[:79] + "…"
        self.system_prompt.setPlaceholderText(
            f"System prompt for this chat (empty: the model's preset, “{shown}”)" if prompt
            else "System prompt for this chat (optional)")

    def overridden_note(self, changed: dict[str, object]) -> str:
        """The sentence for settings just changed that the loaded model's preset sets itself ("": none)."""
        preset = self.model.preset
        overridden = [o.label for o in OPTIONS if o.name in changed and preset is not None
                      and o.name in preset.values]
        if not overridden:
            return ""
        return (f"{', '.join(overridden)}: {self.model.target_name}'s preset sets its own "
                "(Models → Clear this model's preset to use the app's).")

    def _on_engine_state_changed(self, state: EngineState) -> None:
        changed, self._phase = state.phase is not self._phase, state.phase
        preset = self.model.preset
        if state.phase is Phase.READY and changed and preset is not None and state.failure is None:
            name = self.model.target_name or (self.model.model_name(state.config.target_path)
                                              if state.config else "")
            self._notice(f"{name} loaded with its preset: {preset.summary()}.")
