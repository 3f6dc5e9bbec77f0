"""ModelPresets: the per-model presets (settings/presets.py) for the window, with a ``changed`` signal.

A model's preset is found by its file's path through the model id the API uses
(``catalog.names.served_id``), so every quantization of a catalog model shares one. Saving or clearing
writes presets.toml at once; a write that fails is a sentence (the caller shows it) and the change
still applies for this session, as a setting's does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from localchat.catalog.names import shipped_served_id
from localchat.services.qt_signals import emit
from localchat.settings.presets import ModelPreset, PresetsFile

log = logging.getLogger(__name__)


class ModelPresets(QObject):
    changed = Signal(str)  # the model id whose preset was saved or cleared

    def __init__(self, file: PresetsFile, model_id: Callable[[str], str] = shipped_served_id,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.file = file
        self.model_id = model_id  # a model file's path -> its id
        result = file.load()
        self._presets = result.presets
        self.load_messages: list[str] = list(result.messages)

    def for_id(self, model_id: str) -> ModelPreset | None:
        preset = self._presets.get(model_id)
        return preset if preset is not None and not preset.empty else None

    def for_path(self, path: str | None) -> ModelPreset | None:
        """The preset of the model file at ``path`` (None: it has none, or no path)."""
        return self.for_id(self.model_id(path)) if path else None

    def save(self, model_id: str, preset: ModelPreset) -> str:
        """Keep ``preset`` as ``model_id``'s; "" when written, else the sentence why not."""
        self._presets[model_id] = preset
        return self._write(model_id, preset)

    def clear(self, model_id: str) -> str:
        """Remove ``model_id``'s preset; "" when written, else the sentence why not."""
        self._presets.pop(model_id, None)
        return self._write(model_id, None)

    def _write(self, model_id: str, preset: ModelPreset | None) -> str:
        problem = ""
        try:
            self.file.save(model_id, preset)
        except OSError as exc:
            problem = (f"The model presets could not be saved to {self.file.path} ({exc.strerror or exc}); "
                       "the change applies until localchat closes.")
            log.warning(problem)
        emit(self.changed, model_id)
        return problem
