"""The chat page of the main window: the chat's system prompt, the conversation, a notice line, the
suggestion line, the message box, its attached files and its buttons, laid out; the window connects them.

The page also owns the files attached to the next message (``attachments``): picked with Attach… or
dropped on the message box, read off the GUI thread (services.AttachmentReader), shown as chips that
✕ removes; a file that cannot be attached is a sentence in the notice line, and the others go.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QPushButton, QToolButton, QVBoxLayout, QWidget

from localchat.chat.attachments import Attachment
from localchat.host.events import EngineState, Phase
from localchat.services.attachment_reader import AttachmentReader
from localchat.ui import dialogs
from localchat.ui.attachment_chips import AttachmentChips
from localchat.ui.chat_view import ChatView
from localchat.ui.composer import Composer
from localchat.ui.suggestion_banner import SuggestionBanner


class ChatPage(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.chat_view = ChatView(self)
        self.chat_view.set_placeholder("Type a message below to start.")
        self.composer = Composer(self)
        self.system_prompt = QLineEdit(self)
        self.system_prompt.setObjectName("system_prompt")
        self.system_prompt.setPlaceholderText("System prompt for this chat (optional)")
        self.send_button = QPushButton("Send", self)
        self.stop_button = QPushButton("Stop", self)
        self.stop_button.setToolTip("Stop the reply (Esc)")
        self.regenerate_button = QPushButton("Regenerate", self)
        self.edit_button = QPushButton("Edit last message", self)
        self.attach_button = QPushButton("Attach…", self)
        self.attach_button.setObjectName("attach_button")
        self.attach_button.setToolTip("Attach text, code or PDF files to the message (or drop them on it)")
        # The files attached to the message being written, under the message box.
        self.chips = AttachmentChips(self)
        # This chat's tools on or off (greyed, with the reason, where there are none to offer).
        self.tools_button = QToolButton(self)
        self.tools_button.setObjectName("tools_button")
        self.tools_button.setText("Tools")
        self.tools_button.setCheckable(True)
        self.tools_button.setAutoRaise(False)
        self.notice = QLabel("", self)
        self.notice.setObjectName("notice")
        self.notice.setWordWrap(True)
        self.notice.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notice.hide()
        self._after_load = ""  # a sentence for under the chat once the next model loaded (say_after_load)
        # A bigger starter model that suits this computer better (services.StarterAdvisor).
        self.suggestion = SuggestionBanner(self)

        buttons = QHBoxLayout()
        buttons.addWidget(self.edit_button)
        buttons.addWidget(self.regenerate_button)
        buttons.addStretch(1)
        buttons.addWidget(self.attach_button)
        buttons.addWidget(self.tools_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.send_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 0)
        layout.addWidget(self.system_prompt)
        layout.addWidget(self.chat_view, 1)
        for widget in (self.notice, self.suggestion, self.composer, self.chips):
            layout.addWidget(widget)
        layout.addLayout(buttons)

        self.attachments: list[Attachment] = []  # the files going with the next message
        self.attachment_reader = AttachmentReader(self)  # reads them off the GUI thread
        self.composer.files_dropped.connect(self.attach_files)
        self.attach_button.clicked.connect(lambda: self.attach_files(dialogs.ask_attachments(self.window())))
        self.chips.removed.connect(self.remove_attachment)
        self.attachment_reader.done.connect(self._on_attachments_read)

    def attach_files(self, paths: list[str]) -> None:
        """Read each file for the next message (off the GUI thread; chips appear when read)."""
        if paths:
            self.attachment_reader.read(paths)
            self.composer.setFocus()

    def remove_attachment(self, index: int) -> None:
        if 0 <= index < len(self.attachments):
            self.set_attachments(self.attachments[:index] + self.attachments[index + 1:])

    def set_attachments(self, attachments: list[Attachment]) -> None:
        self.attachments = attachments
        self.chips.set_attachments(attachments)
        self.composer.allow_empty = bool(attachments)

    def _on_attachments_read(self, read: list[Attachment], problems: list[str]) -> None:
        """Add the files read as chips; one that cannot be attached is a sentence, the rest go."""
        attached = list(self.attachments)
        for attachment in read:
            if not any(a.path == attachment.path for a in attached):
                attached.append(attachment)
        self.set_attachments(attached)
        self.show_notice(" ".join(problems))

    def show_notice(self, text: str) -> None:
        """One sentence under the chat (an error, or what just happened); empty hides it."""
        self.notice.setText(text)
        self.notice.setVisible(bool(text))

    def say_after_load(self, sentence: str) -> None:
        """Show ``sentence`` under the chat once the next model has loaded (why its drafter was not
        taken: the model manager's pairing), before the engine's own reason; "" forgets it."""
        self._after_load = sentence

    def after_model_state(self, state: EngineState) -> None:
        """On a new engine phase. Once a model is ready: why it drafts without a draft model, under the
        chat after what is there already (the preset's sentence), not only in the status bar's tooltip
        and the log: the pairing's refusal (``say_after_load``), and where a draft model was loaded, the
        engine's reason (its vocabulary does not match, or the measurement at load says it costs more
        than it saves). A load that failed or stopped forgets the pairing's sentence."""
        if state.phase is not Phase.READY:
            if state.failure is not None and state.phase in (Phase.FAILED, Phase.STOPPED):
                self._after_load = ""
            return
        info, config = state.info, state.config
        said, self._after_load = self._after_load, ""
        engine = (info.speculation.reason if info is not None and config is not None and config.draft_path
                  else "")
        if not said and not engine:
            return
        shown = "" if self.notice.isHidden() else self.notice.text()
        self.show_notice(" ".join(t for t in (shown, said, engine) if t))

    def set_busy(self, busy: bool, has_chat: bool) -> None:
        self.stop_button.setEnabled(busy)
        self.send_button.setEnabled(not busy)
        self.regenerate_button.setEnabled(not busy and has_chat)
        self.edit_button.setEnabled(not busy and has_chat)
