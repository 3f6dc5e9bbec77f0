"""Settings → Tools: the tool servers of mcp.json, each switched on or off, their tools listed with
their descriptions, added or edited in a form (environment values and headers masked), imported from
LM Studio or Claude Desktop, or edited as the file itself.

The page works on a copy of the list; the dialog's OK saves it through the ``ToolServersKeeper``
(services.McpService), Cancel forgets it. A server's tools are known once it has run: "Show tools"
starts the switched-on servers (as a message would) and lists what they offer, the tools left out
with the reason, and a server that failed with its sentence. Tools the user let run "always" are
marked, and "Ask before running" takes that back.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import Qt, QUrl, SignalInstance
from PySide6.QtGui import QDesktopServices, QPalette
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QToolButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from localchat.services.mcp_service import SECURITY, ServerView
from localchat.toolservers.config import HTTP, STDIO, ServerConfig, ToolsConfig
from localchat.toolservers.imports import SOURCES
from localchat.ui.theme import muted

ROLE = Qt.ItemDataRole.UserRole  # an item's (kind, server, tool): "server", "tool" or "note"


class ToolServersKeeper(Protocol):
    """Where the tool servers are kept and run (services.McpService)."""

    @property
    def servers_changed(self) -> SignalInstance: ...
    @property
    def config(self) -> ToolsConfig: ...
    @property
    def path(self) -> Path: ...

    def reload_if_changed(self) -> None: ...
    def save(self, config: ToolsConfig) -> str: ...
    def import_from(self, source: str, into: ToolsConfig) -> tuple[ToolsConfig, str]: ...
    def prepare(self) -> int: ...
    def view(self, server: ServerConfig) -> ServerView: ...


def _muted_label(text: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setWordWrap(True)
    palette = label.palette()
    palette.setColor(QPalette.ColorRole.WindowText, muted(palette))
    label.setPalette(palette)
    return label


class PairsEditor(QWidget):
    """Rows of NAME and value (environment variables, HTTP headers); values masked unless shown."""

    def __init__(self, pairs: dict[str, str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.grid = QGridLayout()
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.rows: list[tuple[QLineEdit, QLineEdit]] = []
        self._next_row = 0  # grid rows are never reused: a removed row leaves its place empty
        self.show_box = QCheckBox("Show values", self)
        self.add_button = QPushButton("Add", self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(self.grid)
        row = QHBoxLayout()
        row.addWidget(self.add_button)
        row.addStretch(1)
        row.addWidget(self.show_box)
        layout.addLayout(row)
        for key, value in pairs.items():
            self.add_row(key, value)
        self.add_button.clicked.connect(lambda: self.add_row("", ""))
        self.show_box.toggled.connect(self._on_show_box_toggled)

    def add_row(self, key: str, value: str) -> None:
        name, field = QLineEdit(key, self), QLineEdit(value, self)
        name.setPlaceholderText("NAME")
        shown = self.show_box.isChecked()
        field.setEchoMode(QLineEdit.EchoMode.Normal if shown else QLineEdit.EchoMode.Password)
        remove = QToolButton(self)
        remove.setText("✕")
        remove.setToolTip("Remove this one")
        remove.setAutoRaise(True)
        self.grid.addWidget(name, self._next_row, 0)
        self.grid.addWidget(field, self._next_row, 1)
        self.grid.addWidget(remove, self._next_row, 2)
        self._next_row += 1
        self.rows.append((name, field))
        remove.clicked.connect(lambda: self._remove_row(name, field, remove))

    def _remove_row(self, *widgets: QWidget) -> None:
        self.rows = [row for row in self.rows if row[0] is not widgets[0]]
        for widget in widgets:
            widget.hide()
            widget.deleteLater()

    def pairs(self) -> dict[str, str]:
        return {k.text().strip(): v.text() for k, v in self.rows if k.text().strip()}

    def _on_show_box_toggled(self, shown: bool) -> None:
        mode = QLineEdit.EchoMode.Normal if shown else QLineEdit.EchoMode.Password
        for _, field in self.rows:
            field.setEchoMode(mode)


class ServerEditDialog(QDialog):
    """Add or change one server: a command to run (stdio) or an address to reach (streamable HTTP)."""

    def __init__(self, server: ServerConfig | None, taken: Sequence[str],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("server_edit_dialog")
        self.setWindowTitle("Tool server")
        self.original = server or ServerConfig("")
        self.taken = set(taken) - {self.original.name}
        old = self.original
        self.name = QLineEdit(old.name, self)
        self.stdio = QRadioButton("Run a command on this computer (stdio)", self)
        self.http = QRadioButton("Reach an address (streamable HTTP)", self)
        (self.http if old.kind == HTTP and old.url else self.stdio).setChecked(True)
        self.command = QLineEdit(old.command, self)
        self.command.setPlaceholderText("uvx, npx, python, or the path of a program")
        self.args = QLineEdit(shlex.join(old.args), self)
        self.args.setPlaceholderText("mcp-server-fetch --flag value")
        self.env = PairsEditor(dict(old.env), self)
        self.url = QLineEdit(old.url, self)
        self.url.setPlaceholderText("http://127.0.0.1:8000/mcp")
        self.headers = PairsEditor(dict(old.headers), self)
        self.problem = QLabel("", self)
        self.problem.setObjectName("server_problem")
        self.problem.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Name", self.name)
        form.addRow(self.stdio)
        form.addRow("Command", self.command)
        form.addRow("Arguments", self.args)
        form.addRow("Environment", self.env)
        form.addRow(self.http)
        form.addRow("Address", self.url)
        form.addRow("Headers", self.headers)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(_muted_label(SECURITY, self))
        layout.addWidget(self.problem)
        layout.addWidget(buttons)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.stdio.toggled.connect(self._on_kind_toggled)
        self._on_kind_toggled()

    def _on_kind_toggled(self) -> None:
        local = self.stdio.isChecked()
        for widget in (self.command, self.args, self.env):
            widget.setEnabled(local)
        for widget in (self.url, self.headers):
            widget.setEnabled(not local)

    def server(self) -> ServerConfig | str:
        """The server as filled in, or the sentence that says what is missing."""
        name = self.name.text().strip()
        if not name:
            return "Give the server a name."
        if name in self.taken:
            return f"Another server is called '{name}'."
        if self.stdio.isChecked():
            try:
                args = tuple(shlex.split(self.args.text()))
            except ValueError as exc:
                return f"The arguments cannot be read: {exc}."
            if not self.command.text().strip():
                return "Give the command that starts the server."
            return replace(self.original, name=name, command=self.command.text().strip(), args=args,
                           env=self.env.pairs(), url="", headers={}, problem="")
        url = self.url.text().strip()
        if not url.lower().startswith(("http://", "https://")):
            return "The address must start with http:// or https://."
        return replace(self.original, name=name, url=url, headers=self.headers.pairs(), command="", args=(),
                       env={}, problem="")

    def accept(self) -> None:
        made = self.server()
        if isinstance(made, str):
            self.problem.setText(made)
            return
        super().accept()


class ToolServersPage(QWidget):
    def __init__(self, keeper: ToolServersKeeper, note: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.keeper = keeper
        keeper.reload_if_changed()
        self.config = keeper.config
        self.initial = self.config
        self._starting = False  # "Show tools" is waiting for the servers it started
        intro = QLabel(
            "Tool servers give the model tools (the Model Context Protocol, as in LM Studio and Claude "
            "Desktop). Their tools go to the model with each message; localchat asks before a tool runs.",
            self)
        intro.setWordWrap(True)
        self.note = QLabel(note, self)
        self.note.setObjectName("tools_note")
        self.note.setWordWrap(True)
        self.note.setVisible(bool(note))
        self.tree = QTreeWidget(self)
        self.tree.setObjectName("tool_servers")
        self.tree.setHeaderLabels(["Server and its tools", "What it is"])
        self.tree.setColumnWidth(0, 240)
        self.tree.setMinimumHeight(180)
        self.add_button = QPushButton("Add…", self)
        self.edit_button = QPushButton("Edit…", self)
        self.remove_button = QPushButton("Remove", self)
        self.show_button = QPushButton("Show tools", self)
        self.show_button.setToolTip("Start the switched-on servers and list their tools")
        self.ask_button = QPushButton("Ask before running", self)
        self.ask_button.setToolTip("Take back “Always” for the selected tool")
        self.import_buttons = {source: QPushButton(f"Import from {source}", self) for source in SOURCES}
        self.status = QLabel("", self)
        self.status.setObjectName("tools_status")
        self.status.setWordWrap(True)
        self.open_button = QPushButton("Open mcp.json", self)
        self.reload_button = QPushButton("Read it again", self)
        where = _muted_label(f"Kept in {keeper.path}, in the format LM Studio, Claude Desktop and Cursor "
                             "use; you may edit it by hand.", self)
        row = QHBoxLayout()
        for button in (self.add_button, self.edit_button, self.remove_button, self.ask_button):
            row.addWidget(button)
        row.addStretch(1)
        row.addWidget(self.show_button)
        imports_row = QHBoxLayout()
        for button in self.import_buttons.values():
            imports_row.addWidget(button)
        imports_row.addStretch(1)
        imports_row.addWidget(self.open_button)
        imports_row.addWidget(self.reload_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(intro)
        layout.addWidget(self.note)
        layout.addWidget(self.tree, 1)
        layout.addLayout(row)
        layout.addLayout(imports_row)
        layout.addWidget(self.status)
        layout.addWidget(where)
        layout.addWidget(_muted_label(SECURITY, self))
        self._connect_signals()
        self.fill()

    def _connect_signals(self) -> None:
        self.add_button.clicked.connect(self._on_add_button_clicked)
        self.edit_button.clicked.connect(self._on_edit_button_clicked)
        self.remove_button.clicked.connect(self._on_remove_button_clicked)
        self.show_button.clicked.connect(self._on_show_button_clicked)
        self.ask_button.clicked.connect(self._on_ask_button_clicked)
        self.open_button.clicked.connect(self._on_open_button_clicked)
        self.reload_button.clicked.connect(self._on_reload_button_clicked)
        for source, button in self.import_buttons.items():
            button.clicked.connect(lambda _=False, s=source: self.import_from(s))
        self.tree.itemChanged.connect(self._on_tree_item_changed)
        self.tree.itemDoubleClicked.connect(lambda item, _col: self._edit(item))
        self.tree.currentItemChanged.connect(lambda *_: self._update_buttons())
        self.keeper.servers_changed.connect(self.fill)

    def detach(self) -> None:
        """Stop listening to the keeper, which outlives this page (it belongs to the app)."""
        self.keeper.servers_changed.disconnect(self.fill)

    # -- the list ------------------------------------------------------------------------------

    def fill(self) -> None:
        current = self._selected()
        self.tree.blockSignals(True)
        self.tree.clear()
        for server in self.config.servers:
            view = self.keeper.view(server)
            # the state first: a long command line is cut at the column's edge, the state must not be
            item = QTreeWidgetItem([server.name, f"{view.status} · {server.where}"])
            item.setData(0, ROLE, ("server", server.name, ""))
            item.setCheckState(0, Qt.CheckState.Checked if server.enabled else Qt.CheckState.Unchecked)
            item.setToolTip(1, "\n".join([server.where, *view.notes]))
            for note in view.notes:
                child = QTreeWidgetItem(["", note])
                child.setToolTip(1, note)
                child.setData(0, ROLE, ("note", server.name, ""))
                item.addChild(child)
            for tool in view.tools:
                always = " · runs without asking" if tool.name in server.always_allowed else ""
                child = QTreeWidgetItem([tool.name, (tool.description or "(no description)") + always])
                child.setToolTip(1, tool.description)
                child.setData(0, ROLE, ("tool", server.name, tool.name))
                item.addChild(child)
            for name in server.always_allowed:
                if name not in {t.name for t in view.tools}:
                    child = QTreeWidgetItem([name, "runs without asking"])
                    child.setData(0, ROLE, ("tool", server.name, name))
                    item.addChild(child)
            self.tree.addTopLevelItem(item)
            item.setExpanded(bool(view.tools or view.notes))
            if current and current[1] == server.name and current[0] == "server":
                self.tree.setCurrentItem(item)
        self.tree.blockSignals(False)
        self._update_buttons()
        if self._starting and not any(self.keeper.view(s).starting for s in self.config.enabled):
            self._starting = False
            self.status.setText(self._started_sentence())

    def _started_sentence(self) -> str:
        """What "Show tools" came to: the servers running, and those that could not start."""
        views = [(s.name, self.keeper.view(s)) for s in self.config.enabled]
        running = [f"{name} ({len(view.tools)} tool{'s' if len(view.tools) != 1 else ''})"
                   for name, view in views if view.running]
        failed = [name for name, view in views if not view.running]
        words = f"Running: {', '.join(running)}." if running else ""
        if failed:
            words += f" Could not start: {', '.join(failed)} (the reason is under its name)."
        return words.strip()

    def _selected(self) -> tuple[str, str, str] | None:
        item = self.tree.currentItem()
        data = item.data(0, ROLE) if item is not None else None
        if isinstance(data, tuple | list) and len(data) == 3:
            return str(data[0]), str(data[1]), str(data[2])
        return None

    def _update_buttons(self) -> None:
        selected = self._selected()
        server = self.config.server(selected[1]) if selected else None
        self.edit_button.setEnabled(server is not None)
        self.remove_button.setEnabled(server is not None)
        self.ask_button.setEnabled(bool(selected and selected[0] == "tool" and server is not None
                                        and selected[2] in server.always_allowed))
        self.show_button.setEnabled(bool(self.config.enabled))

    def changed(self) -> bool:
        return self.config != self.initial

    def save(self) -> str:
        """Keep the list (on the dialog's OK): "" when saved or unchanged, else why not."""
        if not self.changed():
            return ""
        problem = self.keeper.save(self.config)
        if problem:
            self.status.setText(problem)
        else:
            self.initial = self.config
        return problem

    def _set(self, config: ToolsConfig, sentence: str = "") -> None:
        self.config = config
        self.status.setText(sentence)
        self.fill()

    # -- actions ---------------------------------------------------------------------------------

    def import_from(self, source: str) -> None:
        config, sentence = self.keeper.import_from(source, self.config)
        self._set(config, sentence + (" Press OK to keep them." if config != self.config else ""))

    def add_server(self, server: ServerConfig) -> None:
        self._set(self.config.with_server(server))

    def _on_add_button_clicked(self) -> None:
        dialog = ServerEditDialog(None, [s.name for s in self.config.servers], self)
        if dialog.exec():
            made = dialog.server()
            if isinstance(made, ServerConfig):
                self.add_server(made)

    def _on_edit_button_clicked(self) -> None:
        self._edit(self.tree.currentItem())

    def _edit(self, item: QTreeWidgetItem | None) -> None:
        data = item.data(0, ROLE) if item is not None else None
        server = self.config.server(data[1]) if data else None
        if server is None:
            return
        dialog = ServerEditDialog(server, [s.name for s in self.config.servers], self)
        if dialog.exec():
            made = dialog.server()
            if isinstance(made, ServerConfig):
                self._set(self.config.with_server(made, replacing=server.name))

    def _on_remove_button_clicked(self) -> None:
        selected = self._selected()
        if selected:
            self._set(self.config.without(selected[1]), f"Removed {selected[1]}. Press OK to keep this.")

    def _on_ask_button_clicked(self) -> None:
        selected = self._selected()
        server = self.config.server(selected[1]) if selected else None
        if selected and server is not None:
            self._set(self.config.with_server(server.allowing(selected[2], False)),
                      f"{selected[2]} will ask before it runs again.")

    def _on_show_button_clicked(self) -> None:
        if self.changed() and self.save():
            return
        self.status.setText("Starting the switched-on tool servers…")
        self._starting = True
        self.keeper.prepare()
        self.fill()  # servers already running answer at once

    def _on_open_button_clicked(self) -> None:
        if self.changed() and self.save():
            return
        path = self.keeper.path
        if not path.exists():
            self.keeper.save(self.config)
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(path)))
        self.status.setText(f"Opened {path}. After editing it, press “Read it again”.")

    def _on_reload_button_clicked(self) -> None:
        self.keeper.reload_if_changed()
        self.config = self.initial = self.keeper.config
        self.status.setText(f"Read {self.keeper.path} again.")
        self.fill()

    def _on_tree_item_changed(self, item: QTreeWidgetItem, column: int) -> None:
        data = item.data(0, ROLE)
        if column != 0 or not data or data[0] != "server":
            return
        server = self.config.server(data[1])
        if server is not None:
            on = item.checkState(0) == Qt.CheckState.Checked
            if on != server.enabled:
                self.config = self.config.with_server(replace(server, enabled=on))
                self._update_buttons()


__all__ = ["STDIO", "ServerEditDialog", "ToolServersKeeper", "ToolServersPage"]
