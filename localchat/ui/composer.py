"""The message box: Enter sends, Shift+Enter starts a new line, Up in an empty box edits the last message;
files dropped on it are attached to the message (``files_dropped``), text dropped is typed in."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent, QKeyEvent
from PySide6.QtWidgets import QPlainTextEdit, QWidget

from localchat.services.qt_signals import emit


class Composer(QPlainTextEdit):
    submitted = Signal(str)
    edit_last_requested = Signal()  # Up in an empty box, as in a terminal or a chat app
    files_dropped = Signal(list)  # local paths of files dropped on the box, to attach


    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        self.setPlaceholderText("Message  (Enter sends, Shift+Enter for a new line)")
        self.setTabChangesFocus(True)
        line = self.fontMetrics().lineSpacing()
        self.setMinimumHeight(line * 3 + 12)
        self.setMaximumHeight(line * 8 + 12)
        self.allow_empty = False  # True while files are attached: they may be sent without text

    def keyPressEvent(self, event: QKeyEvent) -> None:
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.submit()
            event.accept()
            return
        if event.key() == Qt.Key.Key_Up and not event.modifiers() and not self.toPlainText():
            emit(self.edit_last_requested)
            event.accept()
            return
        super().keyPressEvent(event)

    def submit(self) -> None:
        text = self.toPlainText().strip()
        if text or self.allow_empty:
            emit(self.submitted, text)

    @staticmethod
    def _files(event: QDragEnterEvent | QDragMoveEvent | QDropEvent) -> list[str]:
        mime = event.mimeData()
        if not mime.hasUrls():
            return []
        return [url.toLocalFile() for url in mime.urls() if url.isLocalFile()]

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if self._files(event):
            event.acceptProposedAction()
        else:
            super().dragEnterEvent(event)

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        if self._files(event):
            event.acceptProposedAction()
        else:
            super().dragMoveEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        files = self._files(event)
        if files:
            event.acceptProposedAction()
            emit(self.files_dropped, files)
        else:
            super().dropEvent(event)
