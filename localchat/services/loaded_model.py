"""LoadedModel: the model the engine has loaded (or is loading) as the chat sees it.

It owns what the chat asks of that model: its names in the window (``catalog.names``), its id among the
per-model presets, its preset, the settings a reply is written with (the preset over the app's), a
chat's current settings taken as its preset, and remembering it as the model to load at the next
start (``last_model_path`` / ``last_draft_path``). It keeps no engine state: each answer reads
``EnginePort.state``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject

from localchat.catalog.names import shipped_model_name
from localchat.engine.types import EngineConfig
from localchat.host.events import EngineState, Phase
from localchat.services.requests import build_engine_config
from localchat.settings import OptionReader, Value
from localchat.settings.presets import PRESET_OPTIONS, ModelPreset, PresetReader

if TYPE_CHECKING:
    from localchat.services.chat_options import ChatOptions
    from localchat.services.engine_port import EnginePort
    from localchat.services.model_presets import ModelPresets
    from localchat.services.settings_service import SettingsService


class LoadedModel(QObject):
    def __init__(self, engine: EnginePort, settings: SettingsService, presets: ModelPresets | None,
                 model_name: Callable[[str], str] = shipped_model_name,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._engine = engine
        self._settings = settings
        self.presets = presets  # the models' own system prompt, sampling and context (None: no presets)
        self.model_name = model_name  # a model file's path -> its name in the window
        engine.state_changed.connect(self._on_engine_state_changed)

    @property
    def target_name(self) -> str:
        """The loaded target's name as the window shows it (catalog name and quantization)."""
        info = self._engine.state.info
        return self.model_name(info.target.path) if info is not None else ""

    @property
    def draft_name(self) -> str:
        """The loaded draft model's name as the window shows it; "" when there is none."""
        info = self._engine.state.info
        return self.model_name(info.draft.path) if info is not None and info.draft is not None else ""

    @property
    def config_name(self) -> str:
        """The name of the model loaded or loading (its config's target); "" when none was asked for."""
        config = self._engine.state.config
        return self.model_name(config.target_path) if config is not None else ""

    @property
    def model_id(self) -> str:
        """The id of the model loaded (or loading), as the API and the presets name it; "" if none."""
        config = self._engine.state.config
        if config is None or self.presets is None:
            return ""
        return self.presets.model_id(config.target_path)

    @property
    def preset(self) -> ModelPreset | None:
        """The preset of the model loaded (or loading); None when it has none."""
        return self.presets.for_id(self.model_id) if self.presets is not None and self.model_id else None

    def config_for(self, target_path: str, draft_path: str | None = None) -> EngineConfig:
        """How to load ``target_path`` (with a drafter): its preset (its context length) over the app's
        settings."""
        preset = self.presets.for_path(target_path) if self.presets is not None else None
        return build_engine_config(PresetReader(self._settings, preset), target_path, draft_path)

    def reader(self) -> OptionReader:
        """The settings a reply is written with: the loaded model's preset over the app's settings."""
        return PresetReader(self._settings, self.preset)

    @property
    def system_prompt(self) -> str:
        """The preset's system prompt ("" without one): a chat's own prompt goes over it."""
        preset = self.preset
        return preset.system_prompt if preset is not None else ""

    def preset_for_chat(self, options: ChatOptions, conversation_id: int | None,
                        chat_prompt: str) -> ModelPreset:
        """The settings a reply in this chat is written with now, as a preset for the loaded model:
        sampling (the chat's own temperature and reply length where it has them), the context length
        loaded, and the chat's system prompt ``chat_prompt`` (else the model's preset's)."""
        reader = self.reader()
        temperature, length = options.reply_settings(conversation_id, reader)
        info = self._engine.state.info
        values: dict[str, Value] = {name: reader.get(name) for name in PRESET_OPTIONS}
        values.update(temperature=temperature, max_reply_tokens=length,
                      context_length=info.n_ctx if info is not None else reader.context_length)
        return ModelPreset(values, chat_prompt or self.system_prompt)

    def _on_engine_state_changed(self, state: EngineState) -> None:
        config = state.config
        if state.phase is Phase.READY and config is not None:
            if config.target_path != self._settings.last_model_path:
                self._settings.set("last_model_path", config.target_path)
            if (config.draft_path or "") != self._settings.last_draft_path:
                self._settings.set("last_draft_path", config.draft_path or "")
