"""The conversation list: new, rename (double-click or menu), delete, export, search."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtWidgets import (
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from localchat.services.qt_signals import emit

ID_ROLE = Qt.ItemDataRole.UserRole


@dataclass(frozen=True)
class ConversationItem:
    id: object
    title: str


class ConversationSidebar(QWidget):
    new_requested = Signal()
    conversation_selected = Signal(object)
    rename_requested = Signal(object, str)
    delete_requested = Signal(object)
    search_changed = Signal(str)
    export_requested = Signal(object, str)  # conversation id, "markdown" | "json"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sidebar")
        self.new_button = QPushButton("New chat", self)
        self.new_button.setToolTip("Start a new conversation (Ctrl+N)")
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Search chats")
        self.search.setClearButtonEnabled(True)
        self.list = QListWidget(self)
        # Long titles end in "…" (full title in the tooltip) instead of scrolling sideways.
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        triggers = QListWidget.EditTrigger
        self.list.setEditTriggers(triggers.DoubleClicked | triggers.EditKeyPressed)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 0, 6)
        layout.addWidget(self.new_button)
        layout.addWidget(self.search)
        layout.addWidget(self.list, 1)
        self._filling = False
        self._connect_signals()

    def _connect_signals(self) -> None:
        self.new_button.clicked.connect(self.new_requested)
        self.search.textChanged.connect(self.search_changed)
        self.list.currentItemChanged.connect(self._on_list_current_item_changed)
        self.list.itemChanged.connect(self._on_list_item_changed)
        self.list.customContextMenuRequested.connect(self._on_list_context_menu_requested)

    def set_conversations(self, items: Sequence[ConversationItem], current: object | None) -> None:
        self._filling = True
        try:
            self.list.clear()
            for item in items:
                row = QListWidgetItem(item.title or "New chat")
                row.setData(ID_ROLE, item.id)
                row.setFlags(row.flags() | Qt.ItemFlag.ItemIsEditable)
                row.setToolTip(item.title)
                self.list.addItem(row)
                if item.id == current:
                    self.list.setCurrentItem(row)
        finally:
            self._filling = False

    def titles(self) -> list[str]:
        return [self.list.item(i).text() for i in range(self.list.count())]

    def confirm_delete(self, conversation_id: object, title: str) -> None:
        answer = QMessageBox.question(self, "Delete chat", f"Delete “{title}”? This cannot be undone.")
        if answer == QMessageBox.StandardButton.Yes:
            emit(self.delete_requested, conversation_id)

    def _on_list_current_item_changed(self, current: QListWidgetItem | None, _previous: object) -> None:
        if current is not None and not self._filling:
            emit(self.conversation_selected, current.data(ID_ROLE))

    def _on_list_item_changed(self, item: QListWidgetItem) -> None:
        if not self._filling and item.text().strip():
            emit(self.rename_requested, item.data(ID_ROLE), item.text().strip())

    def conversation_menu(self, item: QListWidgetItem) -> QMenu:
        """The right-click menu of one chat in the list."""
        menu = QMenu(self)
        conversation_id = item.data(ID_ROLE)
        rename = menu.addAction("Rename")
        rename.triggered.connect(lambda: self.list.editItem(item))
        menu.addSeparator()
        markdown = menu.addAction("Export as Markdown…")
        markdown.setObjectName("export_markdown")
        markdown.triggered.connect(lambda: emit(self.export_requested, conversation_id, "markdown"))
        as_json = menu.addAction("Export as JSON…")
        as_json.setObjectName("export_json")
        as_json.triggered.connect(lambda: emit(self.export_requested, conversation_id, "json"))
        menu.addSeparator()
        delete = menu.addAction("Delete")
        delete.triggered.connect(lambda: self.confirm_delete(conversation_id, item.text()))
        return menu

    def _on_list_context_menu_requested(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None:
            return
        menu = self.conversation_menu(item)
        menu.exec(self.list.mapToGlobal(pos))
        menu.deleteLater()
