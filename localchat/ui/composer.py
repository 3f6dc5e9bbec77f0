"""The message box: Enter sends, Shift+Enter starts a new line, Up in an empty box edits the last message;
files dropped on it are attached to the message (``files_dropped``), text dropped is typed in.

Its height follows what is typed: three lines empty, growing with the text (wrapped lines counted) to
eight, then it scrolls; the chat above keeps the rest of the window."""

from __future__ import annotations

from PySide6.QtCore import QSizeF, Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent, QKeyEvent
from PySide6.QtWidgets import QPlainTextEdit, QSizePolicy, QWidget

from localchat.services.qt_signals import emit


class Composer(QPlainTextEdit):
    submitted = Signal(str)
    edit_last_requested = Signal()  # Up in an empty box, as in a terminal or a chat app
    files_dropped = Signal(list)  # local paths of files dropped on the box, to attach
    MIN_LINES, MAX_LINES = 3, 8

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        self.setPlaceholderText("Message  (Enter sends, Shift+Enter for a new line)")
        self.setTabChangesFocus(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().documentLayout().documentSizeChanged.connect(self._fit_to_text)
        self._fit_to_text(QSizeF(0, 1))
        self.allow_empty = False  # True while files are attached: they may be sent without text

    def _fit_to_text(self, size: QSizeF) -> None:
        """A plain text layout measures its height in lines (wrapped lines included)."""
        lines = max(self.MIN_LINES, min(self.MAX_LINES, round(size.height())))
        padding = 2 * self.frameWidth() + 2 * round(self.document().documentMargin()) + 2
        self.setFixedHeight(lines * self.fontMetrics().lineSpacing() + padding)

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
