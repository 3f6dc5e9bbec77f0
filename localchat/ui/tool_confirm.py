"""The question before a tool runs: run it once, always for this tool, or deny (as LM Studio asks).

The dialog shows which tool of which server the model wants to run, with the arguments it chose and
what the server is (its command line or address), and says that tool servers run with the user's
rights. It is window-modal but does not block the event loop (``open``): the reply, the status bar
and Stop stay alive while it waits. Closing it is a "deny".
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent, QFontDatabase
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from localchat.services.mcp_service import SECURITY
from localchat.services.qt_signals import emit
from localchat.services.tool_loop import ToolAnswer, ToolAsk
from localchat.ui.theme import muted


class ToolConfirmDialog(QDialog):
    answered = Signal(str, object)  # the call's id, ToolAnswer

    def __init__(self, ask: ToolAsk, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ask = ask
        self._done = False
        self.setObjectName("tool_confirm_dialog")
        self.setWindowTitle("Run a tool?")
        self.setWindowModality(Qt.WindowModality.WindowModal)
        headline = QLabel(
            f"The model wants to run <b>{html.escape(ask.tool)}</b> from the tool server "
            f"<b>{html.escape(ask.server)}</b>.", self)
        headline.setWordWrap(True)
        description = QLabel(ask.description, self)
        description.setWordWrap(True)
        description.setVisible(bool(ask.description))
        self.arguments = QPlainTextEdit(ask.arguments, self)
        self.arguments.setObjectName("tool_arguments")
        self.arguments.setReadOnly(True)
        self.arguments.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.arguments.setMaximumHeight(160)
        where = QLabel(f"{ask.server} is {ask.where}\n{SECURITY}" if ask.where else SECURITY, self)
        where.setWordWrap(True)
        where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        palette = where.palette()
        palette.setColor(where.foregroundRole(), muted(palette))
        where.setPalette(palette)
        self.once_button = QPushButton("Run once", self)
        self.once_button.setObjectName("run_once")
        self.once_button.setDefault(True)
        self.always_button = QPushButton(f"Always run {ask.tool}", self)
        self.always_button.setObjectName("run_always")
        self.always_button.setToolTip(f"Run {ask.tool} of {ask.server} from now on without asking "
                                      "(Settings → Tools can take this back)")
        self.deny_button = QPushButton("Deny", self)
        self.deny_button.setObjectName("deny")
        self.deny_button.setToolTip("Do not run it: the model is told you declined")
        buttons = QHBoxLayout()
        buttons.addWidget(self.deny_button)
        buttons.addStretch(1)
        buttons.addWidget(self.always_button)
        buttons.addWidget(self.once_button)
        layout = QVBoxLayout(self)
        layout.addWidget(headline)
        layout.addWidget(description)
        layout.addWidget(QLabel("With these arguments:", self))
        layout.addWidget(self.arguments)
        layout.addWidget(where)
        layout.addLayout(buttons)
        self.resize(520, 360)
        self.once_button.clicked.connect(lambda: self._answer(ToolAnswer.ONCE))
        self.always_button.clicked.connect(lambda: self._answer(ToolAnswer.ALWAYS))
        self.deny_button.clicked.connect(lambda: self._answer(ToolAnswer.DENY))

    def _answer(self, answer: ToolAnswer) -> None:
        if not self._done:
            self._done = True
            emit(self.answered, self.ask.call_id, answer)
        self.accept()

    def withdraw(self) -> None:
        """The question is no longer asked (Stop): close without an answer."""
        self._done = True
        self.reject()

    def reject(self) -> None:  # Esc, or the window's close button: a "deny"
        if not self._done:
            self._answer(ToolAnswer.DENY)
            return
        super().reject()

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self._done:
            self._done = True
            emit(self.answered, self.ask.call_id, ToolAnswer.DENY)
        super().closeEvent(event)
