"""The settings dialog, generated from the one declaration of every option.

Nothing here names an option: each visible ``Option`` becomes a row in its
section's tab, with an editor chosen by its type (check box, spin box, choice
list, text or path field), its bounds, its description as help text, and a
note when it takes effect only at the next model load.

The one field that is not an option is the Hugging Face access token
(``HubTokenPage``): it is a credential, kept in huggingface-hub's own token
file rather than in settings.toml, so it is read and saved through the
``TokenKeeper`` the window passes in (services.HubTokenService), and only
when the dialog is accepted. The Tools tab likewise shows the tool servers
of mcp.json (ui/tools_page.py) above its options, saved on OK through the
``ToolServersKeeper`` (services.McpService).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import Qt, SignalInstance
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from localchat.settings import folders
from localchat.settings.options import TOOLS, Option, Value
from localchat.settings.settings import join_folders, split_folders
from localchat.ui.theme import muted
from localchat.ui.tools_page import ToolServersKeeper, ToolServersPage

log = logging.getLogger(__name__)

Getter = Callable[[], Value]
Setter = Callable[[Value], None]

HUB_TAB = "Hugging Face"
TOKENS_PAGE = "https://huggingface.co/settings/tokens"


class TokenKeeper(Protocol):
    """Where the Hugging Face token is kept and checked (services.HubTokenService)."""

    @property
    def checked(self) -> SignalInstance: ...  # (accepted: bool, sentence: str)

    def stored(self) -> str: ...
    def location(self) -> str: ...
    def env_overrides(self) -> bool: ...
    def save(self, token: str) -> str: ...  # "" when saved, else why not
    def check(self, token: str) -> None: ...


class HubTokenPage(QWidget):
    """The access token for gated models: masked, with where to get one, a check, saved on OK."""

    def __init__(self, keeper: TokenKeeper, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.keeper = keeper
        self.initial = keeper.stored()
        intro = QLabel(
            "Gated models (Gemma, Llama and others) can only be downloaded with a Hugging Face access "
            "token from an account that accepted the model's licence on its page. Create a token with "
            f'<i>read</i> access at <a href="{TOKENS_PAGE}">{TOKENS_PAGE.removeprefix("https://")}</a> '
            "and paste it here.",
            self,
        )
        intro.setWordWrap(True)
        intro.setOpenExternalLinks(True)
        intro.setTextFormat(Qt.TextFormat.RichText)
        self.edit = QLineEdit(self.initial, self)
        self.edit.setObjectName("hub_token")
        self.edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.edit.setPlaceholderText("hf_…")
        self.show_box = QCheckBox("Show", self)
        self.check_button = QPushButton("Check token", self)
        row = QHBoxLayout()
        row.addWidget(self.edit, 1)
        row.addWidget(self.show_box)
        row.addWidget(self.check_button)
        self.status = QLabel("", self)
        self.status.setObjectName("hub_token_status")
        self.status.setWordWrap(True)
        where = QLabel(
            f"Kept in Hugging Face's own token file ({keeper.location()}), which the hf command and other "
            "Hugging Face tools use too; never in localchat's settings file. Leave the field empty to "
            "remove it.",
            self,
        )
        where.setWordWrap(True)
        where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        palette = where.palette()
        palette.setColor(QPalette.ColorRole.WindowText, muted(palette))
        where.setPalette(palette)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(row)
        layout.addWidget(self.status)
        layout.addWidget(where)
        if keeper.env_overrides():
            env = QLabel(
                "HF_TOKEN is set in this app's environment: downloads use that token instead of this one.",
                self,
            )
            env.setWordWrap(True)
            layout.addWidget(env)
        layout.addStretch(1)
        self.show_box.toggled.connect(self._on_show_box_toggled)
        self.check_button.clicked.connect(self._on_check_button_clicked)
        keeper.checked.connect(self._on_keeper_checked)

    @property
    def token(self) -> str:
        return self.edit.text().strip()

    def changed(self) -> bool:
        return self.token != self.initial.strip()

    def save(self) -> str:
        """Save the token if it changed; "" when done, else the sentence saying why not."""
        if not self.changed():
            return ""
        problem = self.keeper.save(self.token)
        if problem:
            self.status.setText(problem)
        else:
            self.initial = self.token
        return problem

    def _on_show_box_toggled(self, shown: bool) -> None:
        mode = QLineEdit.EchoMode.Normal if shown else QLineEdit.EchoMode.Password
        self.edit.setEchoMode(mode)

    def _on_check_button_clicked(self) -> None:
        if not self.token:
            self.status.setText(f"Paste a token first; create one at {TOKENS_PAGE}.")
            return
        self.status.setText("Asking the hub…")
        self.check_button.setEnabled(False)
        self.keeper.check(self.token)

    def detach(self) -> None:
        """Stop listening to the keeper, which outlives this page (it belongs to the window)."""
        self.keeper.checked.disconnect(self._on_keeper_checked)

    def _on_keeper_checked(self, _accepted: bool, sentence: str) -> None:
        self.check_button.setEnabled(True)
        self.status.setText(sentence)


def empty_means(option: Option) -> str:
    """What an empty path option stands for, shown greyed in its box: the models folder's real path (it
    said "Default", which told nobody where the models go)."""
    if option.name == "models_folder":
        return str(folders.models_dir())
    if option.name == "draft_model_path":
        return "The drafter the catalog pairs with the model"
    return "None"


class PathField(QWidget):
    """A line edit with a Browse button for file or folder options."""

    def __init__(self, kind: str, parent: QWidget | None = None, empty_means: str = "") -> None:
        super().__init__(parent)
        self.kind = kind
        self.edit = QLineEdit(self)
        self.edit.setPlaceholderText(empty_means or "None")
        self.browse = QPushButton("Add folder…" if kind == "folders" else "Browse…", self)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit, 1)
        layout.addWidget(self.browse)
        self.browse.clicked.connect(self._on_browse_clicked)

    def _on_browse_clicked(self) -> None:
        if self.kind == "folders":
            chosen = QFileDialog.getExistingDirectory(self, "Add a folder", str(Path.home()))
            if chosen:
                self.edit.setText(join_folders([*split_folders(self.edit.text()), chosen]))
            return
        if self.kind == "folder":
            chosen = QFileDialog.getExistingDirectory(self, "Choose a folder", self.edit.text())
        else:
            chosen, _ = QFileDialog.getOpenFileName(
                self, "Choose a file", self.edit.text(), "GGUF models (*.gguf);;All files (*)"
            )
        if chosen:
            self.edit.setText(chosen)


def _decimals(option: Option) -> int:
    step = option.step or 0.01
    text = f"{step:.6f}".rstrip("0")
    return max(1, len(text.split(".")[1])) if "." in text else 1


def make_editor(option: Option, parent: QWidget) -> tuple[QWidget, Getter, Setter]:
    """The editor for one option and functions to read and write its value."""
    if option.type is bool:
        box = QCheckBox(option.label, parent)
        return box, box.isChecked, lambda v: box.setChecked(bool(v))
    if option.type is int:
        spin = QSpinBox(parent)
        spin.setRange(
            int(option.minimum if option.minimum is not None else -(2**31)),
            int(option.maximum if option.maximum is not None else 2**31 - 1),
        )
        spin.setSingleStep(int(option.step or 1))
        return spin, spin.value, lambda v: spin.setValue(int(v))
    if option.type is float:
        dspin = QDoubleSpinBox(parent)
        dspin.setDecimals(_decimals(option))
        dspin.setRange(
            option.minimum if option.minimum is not None else -1e9,
            option.maximum if option.maximum is not None else 1e9,
        )
        dspin.setSingleStep(option.step or 0.1)
        return dspin, dspin.value, lambda v: dspin.setValue(float(v))
    if option.choices:
        combo = QComboBox(parent)
        for value, label in option.choices:
            combo.addItem(label, value)

        def set_choice(v: Value) -> None:
            index = combo.findData(v)
            combo.setCurrentIndex(max(index, 0))

        return combo, lambda: str(combo.currentData()), set_choice
    if option.path_kind:
        field = PathField(option.path_kind, parent, empty_means(option))
        return field, field.edit.text, lambda v: field.edit.setText(str(v))
    edit = QLineEdit(parent)
    if option.secret:
        edit.setEchoMode(QLineEdit.EchoMode.PasswordEchoOnEdit)
    return edit, edit.text, lambda v: edit.setText(str(v))


class SettingsDialog(QDialog):
    """Edit every visible option; ``changed_values()`` gives what the user changed."""

    def __init__(
        self,
        options: Sequence[Option],
        values: Mapping[str, Value],
        parent: QWidget | None = None,
        *,
        token: TokenKeeper | None = None,
        tools: ToolServersKeeper | None = None,
        tools_note: str = "",
    ) -> None:
        super().__init__(parent)
        self.setObjectName("settings_dialog")
        self.setWindowTitle("Settings")
        self._options = [o for o in options if o.visible]
        self._initial = {o.name: values.get(o.name, o.default) for o in self._options}
        self._getters: dict[str, Getter] = {}
        self._setters: dict[str, Setter] = {}
        self.editors: dict[str, QWidget] = {}

        self.tabs = QTabWidget(self)
        self.tools_page = ToolServersPage(tools, tools_note) if tools is not None else None
        for section in dict.fromkeys(o.section for o in self._options):
            above = self.tools_page if section == TOOLS else None
            self.tabs.addTab(self._section_page([o for o in self._options if o.section == section], above),
                             section)
        self.token_page = HubTokenPage(token, self) if token is not None else None
        if self.token_page is not None:
            self.tabs.addTab(self.token_page, HUB_TAB)

        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok
            | QDialogButtonBox.StandardButton.Cancel
            | QDialogButtonBox.StandardButton.RestoreDefaults,
            self,
        )
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs, 1)
        layout.addWidget(self.buttons)
        self.resize(640, 520)
        self._connect_signals()

    def _connect_signals(self) -> None:
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        restore = self.buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults)
        restore.clicked.connect(self._on_restore_defaults_clicked)
        self.finished.connect(self._on_finished)

    def _section_page(self, options: Sequence[Option], above: QWidget | None = None) -> QWidget:
        page = QWidget()
        form = QFormLayout(page)
        if above is not None:
            form.addRow(above)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft)
        for option in options:
            editor, getter, setter = make_editor(option, page)
            editor.setObjectName(f"option_{option.name}")
            editor.setToolTip(option.description)
            setter(self._initial[option.name])
            self._getters[option.name] = getter
            self._setters[option.name] = setter
            self.editors[option.name] = editor
            help_text = option.description
            if option.needs_restart:
                help_text += " Takes effect when a model is next loaded."
            help_label = QLabel(help_text, page)
            help_label.setWordWrap(True)
            help_label.setObjectName(f"help_{option.name}")
            font = help_label.font()
            font.setPointSizeF(font.pointSizeF() * 0.92)
            help_label.setFont(font)
            help_palette = help_label.palette()
            help_palette.setColor(QPalette.ColorRole.WindowText, muted(help_palette))
            help_label.setPalette(help_palette)
            column = QWidget(page)
            column_layout = QVBoxLayout(column)
            column_layout.setContentsMargins(0, 0, 0, 6)
            column_layout.setSpacing(2)
            column_layout.addWidget(editor)
            column_layout.addWidget(help_label)
            form.addRow("" if option.type is bool else option.label, column)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setWidget(page)
        return scroll

    def accept(self) -> None:
        """Save the token first: a token that cannot be saved keeps the dialog open, saying why."""
        if self.token_page is not None and self.token_page.save():
            self.tabs.setCurrentWidget(self.token_page)
            return
        if self.tools_page is not None and self.tools_page.save():
            self.tabs.setCurrentIndex(list(dict.fromkeys(o.section for o in self._options)).index(TOOLS))
            return
        super().accept()

    def _on_finished(self, _result: int) -> None:
        if self.token_page is not None:
            self.token_page.detach()
        if self.tools_page is not None:
            self.tools_page.detach()

    def values(self) -> dict[str, Value]:
        return {name: getter() for name, getter in self._getters.items()}

    def set_value(self, name: str, value: Value) -> None:
        self._setters[name](value)

    def changed_values(self) -> dict[str, Value]:
        return {name: value for name, value in self.values().items() if value != self._initial[name]}

    def _on_restore_defaults_clicked(self) -> None:
        for option in self._options:
            self._setters[option.name](option.default)
