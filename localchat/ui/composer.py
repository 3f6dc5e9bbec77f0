"""The message box: Enter sends, Shift+Enter starts a new line, Up in an empty box edits the last message."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QPlainTextEdit, QWidget

from localchat.services.qt_signals import emit


class Composer(QPlainTextEdit):
    submitted = Signal(str)
    edit_last_requested = Signal()  # Up in an empty box, as in a terminal or a chat app

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        self.setPlaceholderText("Message  (Enter sends, Shift+Enter for a new line)")
        self.setTabChangesFocus(True)
        line = self.fontMetrics().lineSpacing()
        self.setMinimumHeight(line * 3 + 12)
        self.setMaximumHeight(line * 8 + 12)

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
        if text:
            emit(self.submitted, text)
