"""Chat settings: the temperature and reply length of one chat, over the app's settings.

Each row is a check box ("this chat's own") and the value; unchecked, the chat
follows the app's setting, whose value the row shows. Bounds, steps and the
words come from the options' one declaration (settings/options.py). The dialog
only collects values: ChatSession validates and stores them with the chat.
"""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from localchat.settings import OPTIONS_BY_NAME, Value


class ChatSettingsDialog(QDialog):
    """``own`` holds the chat's values so far; ``app`` the app's values of the same options."""

    def __init__(
        self, title: str, own: Mapping[str, Value], app: Mapping[str, Value], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("chat_settings_dialog")
        self.setWindowTitle("Chat settings")
        temperature = OPTIONS_BY_NAME["temperature"]
        length = OPTIONS_BY_NAME["max_reply_tokens"]
        self.temperature = QDoubleSpinBox(self)
        self.temperature.setRange(temperature.minimum or 0.0, temperature.maximum or 2.0)
        self.temperature.setSingleStep(temperature.step or 0.05)
        self.temperature.setDecimals(2)
        self.temperature.setToolTip(temperature.description)
        self.length = QSpinBox(self)
        self.length.setRange(int(length.minimum or 1), int(length.maximum or 32768))
        self.length.setSingleStep(int(length.step or 64))
        self.length.setSuffix(" tokens")
        self.length.setToolTip(length.description)
        self.own_temperature = QCheckBox(f"Own {temperature.label.lower()}", self)
        self.own_length = QCheckBox(f"Own {length.label.lower()}", self)
        self._app = dict(app)
        for box, spin, name in (
            (self.own_temperature, self.temperature, "temperature"),
            (self.own_length, self.length, "max_reply_tokens"),
        ):
            box.setChecked(name in own)
            spin.setValue(own.get(name, app[name]))  # type: ignore[arg-type]
            spin.setEnabled(name in own)
            box.toggled.connect(spin.setEnabled)
            box.toggled.connect(lambda on, s=spin, n=name: on or s.setValue(self._app[n]))
        intro = QLabel(f"For “{title}” only. Unchecked, the chat follows Settings → Sampling.", self)
        intro.setWordWrap(True)
        form = QFormLayout()
        form.addRow(self.own_temperature, self.temperature)
        form.addRow(self.own_length, self.length)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addWidget(buttons)

    def values(self) -> dict[str, Value]:
        """The chat's own values as chosen (only the checked rows)."""
        chosen: dict[str, Value] = {}
        if self.own_temperature.isChecked():
            chosen["temperature"] = round(self.temperature.value(), 2)
        if self.own_length.isChecked():
            chosen["max_reply_tokens"] = self.length.value()
        return chosen
