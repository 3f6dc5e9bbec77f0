"""The window's side of tools in the chat, connected in one place: the chat's Tools button, the
question before a call runs, what the tools are doing in the status bar, and the reply's rounds in
the chat as they happen.

The Tools button turns tools on or off for the chat shown ("Tools: on" / "Tools: off"); it is
greyed, with the reason in its tooltip, where there is nothing to offer (no tool server switched on,
or a model whose chat template has no tools). Questions come one at a time from the session's
``tools`` (services.ChatTools, through its ToolLoop) and are answered with the dialog's three
buttons; Stop withdraws the open one.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QMetaObject, QObject
from PySide6.QtWidgets import QToolButton, QWidget

from localchat.services.chat_session import ChatSession
from localchat.services.tool_loop import ToolAnswer, ToolAsk
from localchat.ui.chat_view import ChatView
from localchat.ui.status_bar import SpeculationStatusBar
from localchat.ui.tool_confirm import ToolConfirmDialog


class ToolsWiring(QObject):
    def __init__(self, parent: QWidget, session: ChatSession, button: QToolButton, view: ChatView,
                 status: SpeculationStatusBar) -> None:
        super().__init__(parent)
        self._parent = parent
        self.session = session
        self.button = button
        self.view = view
        self.status = status
        self.dialog: ToolConfirmDialog | None = None
        self._servers_link: QMetaObject.Connection | None = None  # the servers' changes, until ``detach``
        self._connect_signals()
        self.refresh()

    def _connect_signals(self) -> None:
        tools = self.session.tools
        tools.ask.connect(self._on_tools_ask)
        tools.ask_withdrawn.connect(self._on_tools_ask_withdrawn)
        tools.activity.connect(self.status.show_tool_activity)
        tools.changed.connect(self._on_tools_changed)
        tools.round_started.connect(self.status.set_round)
        self.session.reply_finished.connect(self._on_session_reply_finished)
        self.button.clicked.connect(self._on_button_clicked)
        if tools.mcp is not None:
            self._servers_link = tools.mcp.servers_changed.connect(self.refresh)

    def detach(self) -> None:
        """Stop following the tool servers (the window closed): the servers stop after it and say so,
        and the chat store may be closed by then, which ``refresh`` reads. Safe to call twice."""
        link, self._servers_link = self._servers_link, None
        if link is not None:
            QObject.disconnect(link)

    def refresh(self) -> None:
        """The Tools button for the chat shown: on, off, or greyed with why."""
        state = self.session.tools.availability()
        self.button.setEnabled(state.available)
        self.button.setChecked(state.available and state.on)
        # said in words: a checked button looks much like an unchecked one in the dark theme
        self.button.setText("Tools" if not state.available else "Tools: on" if state.on else "Tools: off")
        if not state.available:
            tip = state.reason or "No tool servers."
        elif state.on:
            servers = f"{state.servers} tool server{'s' if state.servers != 1 else ''}"
            tip = (f"The tools of {servers} go to the model with each message in this chat; localchat asks "
                   "before each call. Click to turn them off for this chat.")
        else:
            tip = "Tools are off in this chat. Click to offer them to the model with each message."
        self.button.setToolTip(tip)

    def _on_button_clicked(self, checked: bool) -> None:
        self.session.tools.set_for_chat(checked)
        self.refresh()

    def _on_tools_ask(self, ask: ToolAsk) -> None:
        dialog = ToolConfirmDialog(ask, self._parent)
        dialog.answered.connect(self._on_dialog_answered)
        dialog.finished.connect(dialog.deleteLater)
        self.dialog = dialog
        dialog.open()

    def _on_dialog_answered(self, call_id: str, answer: ToolAnswer) -> None:
        self.dialog = None
        self.session.tools.answer(call_id, answer)

    def _on_tools_ask_withdrawn(self) -> None:
        dialog, self.dialog = self.dialog, None
        if dialog is not None:
            dialog.withdraw()

    def _on_tools_changed(self, conversation_id: int, tools: Any) -> None:
        if conversation_id == self.session.current_id:
            self.view.set_live_tools(tools)

    def _on_session_reply_finished(self, _end: object) -> None:
        self._on_tools_ask_withdrawn()
        self.status.show_tool_activity("")
        self.refresh()
