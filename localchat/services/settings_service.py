"""SettingsService: the settings with a ``changed(name, value)`` signal, saved on every change.

Wraps ``localchat.settings`` for the GUI: typed properties to read
(``settings.draft_tokens``), ``set``/``reset`` by option name, ``changed``
after a value really changed, and the file written at once (only
non-defaults). The messages from reading the file (bad values, a broken
file set aside) are in ``load_messages`` for the window to show once; a save
that fails is logged and announced with ``save_failed(sentence)``, and the
value still applies for this session.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from PySide6.QtCore import QObject, Signal

from localchat.services.qt_signals import emit
from localchat.settings import OptionReader, Settings, SettingsFile, Value, option

log = logging.getLogger(__name__)


class SettingsService(QObject, OptionReader):
    """The current settings (typed properties from OptionReader), saved and announced on change."""

    changed = Signal(str, object)  # option name, new value
    save_failed = Signal(str)

    def __init__(self, file: SettingsFile | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.file = file if file is not None else SettingsFile()
        result = self.file.load()
        self._settings = result.settings
        self.load_messages: list[str] = list(result.messages)

    @property
    def settings(self) -> Settings:
        """A copy of the current values (change them through ``set``)."""
        return self._settings.copy()

    def get(self, name: str) -> Value:
        return self._settings.get(name)

    def set(self, name: str, value: object) -> Value:
        """Validate, store, save and announce; InvalidValueError (old value kept) on a bad value."""
        return self.set_many({name: value})[name]

    def set_many(self, values: Mapping[str, object]) -> dict[str, Value]:
        """Set several options with one save; all are validated before any is applied."""
        checked = {name: option(name).validate(value) for name, value in values.items()}
        changed = {name: v for name, v in checked.items() if self._settings.get(name) != v}
        for name, value in changed.items():
            self._settings.set(name, value)
        if changed:
            self._save()
        for name, value in changed.items():
            emit(self.changed, name, value)
        return checked

    def reset(self, name: str) -> Value:
        """Return ``name`` to its default."""
        return self.set(name, option(name).default)

    def _save(self) -> None:
        try:
            self.file.save(self._settings)
        except OSError as exc:
            sentence = f"The settings could not be saved to {self.file.path} ({exc.strerror or exc})."
            log.warning(sentence)
            emit(self.save_failed, sentence)
