"""The main window: conversations on the left, the chat in the middle, the status bar below.

The window is layout and slots. The conversation's life (send, regenerate,
edit, stop, what is stored and when, the engine's restart after a crash)
belongs to services.ChatSession; the window asks it and shows what its
signals say.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QByteArray, QSize, Qt, QUrl, Signal
from PySide6.QtGui import QAction, QCloseEvent, QDesktopServices, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from localchat.engine.types import EngineInfo, FinishReason, TokenEvent
from localchat.services.chat_session import CHAT_OPTIONS, ChatSession, ReplyEnd, ShownMessage
from localchat.services.requests import build_engine_config
from localchat.settings import OPTIONS, folders
from localchat.ui import formatting
from localchat.ui.chat_settings_dialog import ChatSettingsDialog
from localchat.ui.chat_view import ChatView, DisplayMessage
from localchat.ui.composer import Composer
from localchat.ui.settings_dialog import SettingsDialog, TokenKeeper
from localchat.ui.sidebar import ConversationItem, ConversationSidebar
from localchat.ui.status_bar import SpeculationStatusBar
from localchat.ui.theme import apply_theme
from localchat.ui.welcome import WelcomePanel

if TYPE_CHECKING:
    from localchat.services.settings_service import SettingsService

log = logging.getLogger(__name__)

DEFAULT_SIZE = QSize(1180, 760)

STARTER_DESCRIPTION = (
    "Qwen2.5-Coder 1.5B Instruct with its 0.5B drafter: about 1.6 GB, runs on most computers. "
    "When it loads, localchat measures this computer and suggests a bigger model of the same family "
    "if one runs fast enough here."
)


class MainWindow(QMainWindow):
    """Chat window. ``session`` and ``settings`` are passed in by app.py."""

    model_manager_requested = Signal()
    starter_requested = Signal()
    suggested_model_requested = Signal(str)  # a catalog entry id the window suggested

    def __init__(
        self,
        session: ChatSession,
        settings: SettingsService,
        *,
        memory_probe: Callable[[], int | None] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("main_window")
        self.setWindowTitle("localchat")
        self.session = session
        self._settings = settings
        self._search = ""
        self._suggested = ""  # the catalog entry the suggestion line offers
        self.history_dialog: QMessageBox | None = None
        self.hub_token: TokenKeeper | None = None  # the Settings dialog's Hugging Face tab, set by app.py

        self.sidebar = ConversationSidebar(self)
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
        self.notice = QLabel("", self)
        self.notice.setObjectName("notice")
        self.notice.setWordWrap(True)
        self.notice.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notice.hide()
        # A bigger starter model that suits this computer better (services.StarterAdvisor), with a link
        # that opens the model manager on it; "Not now" hides it.
        self.suggestion = QLabel("", self)
        self.suggestion.setObjectName("suggestion")
        self.suggestion.setWordWrap(True)
        self.suggestion.setTextFormat(Qt.TextFormat.RichText)
        self.suggestion.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.suggestion.setOpenExternalLinks(False)
        self.suggestion.hide()
        self.welcome = WelcomePanel(STARTER_DESCRIPTION, self)
        self.status = SpeculationStatusBar(memory_probe, self)
        self.setStatusBar(self.status)

        buttons = QHBoxLayout()
        buttons.addWidget(self.edit_button)
        buttons.addWidget(self.regenerate_button)
        buttons.addStretch(1)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.send_button)
        chat_page = QWidget(self)
        chat_layout = QVBoxLayout(chat_page)
        chat_layout.setContentsMargins(6, 6, 6, 0)
        chat_layout.addWidget(self.system_prompt)
        chat_layout.addWidget(self.chat_view, 1)
        chat_layout.addWidget(self.notice)
        chat_layout.addWidget(self.suggestion)
        chat_layout.addWidget(self.composer)
        chat_layout.addLayout(buttons)
        self.pages = QStackedWidget(self)
        self.pages.addWidget(chat_page)
        self.pages.addWidget(self.welcome)
        self.splitter = QSplitter(self)
        self.splitter.addWidget(self.sidebar)
        self.splitter.addWidget(self.pages)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([240, 900])
        self.setCentralWidget(self.splitter)

        self._build_menus()
        self.stop_shortcut = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        self._name_shortcuts()
        self.status.set_speculation_enabled(self._settings.speculation)
        self.chat_view.set_colour_drafted(self._settings.colour_accepted_tokens)
        apply_theme(self._settings.theme)
        self._connect_signals()
        self.resize(DEFAULT_SIZE)
        self._restore_geometry()  # after the default size, which would undo it
        self._refresh_conversations()
        self._update_buttons()

    # -- construction -----------------------------------------------------------------

    def _on_log_folder_action_triggered(self) -> None:
        folder = folders.log_dir()
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._show_notice(f"The log folder {folder} cannot be created ({exc.strerror or exc}).")
            return
        if not QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder))):
            self._show_notice(f"The log folder is {folder} (no file manager could open it).")

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&Chat")
        # Standard keys where Qt has one (each platform's own), the usual chat-app keys elsewhere;
        # every shortcut is on a menu action, so the menus show it.
        self.new_action = QAction("New chat", self)
        self.new_action.setShortcut(QKeySequence.StandardKey.New)
        file_menu.addAction(self.new_action)
        self.search_action = QAction("Search chats", self)
        self.search_action.setShortcut(QKeySequence.StandardKey.Find)
        file_menu.addAction(self.search_action)
        file_menu.addSeparator()
        self.regenerate_action = QAction("Regenerate reply", self)
        self.regenerate_action.setShortcut(QKeySequence("Ctrl+R"))
        file_menu.addAction(self.regenerate_action)
        self.edit_action = QAction("Edit last message", self)
        self.edit_action.setShortcut(QKeySequence("Ctrl+E"))
        self.edit_action.setToolTip("Also Up in an empty message box")
        file_menu.addAction(self.edit_action)
        file_menu.addSeparator()
        self.chat_settings_action = QAction("Chat settings…", self)
        self.chat_settings_action.setToolTip("This chat's own temperature and reply length")
        file_menu.addAction(self.chat_settings_action)
        file_menu.addSeparator()
        self.export_markdown_action = QAction("Export chat as Markdown…", self)
        self.export_json_action = QAction("Export chat as JSON…", self)
        file_menu.addAction(self.export_markdown_action)
        file_menu.addAction(self.export_json_action)
        file_menu.addSeparator()
        self.quit_action = QAction("Quit", self)
        self.quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        file_menu.addAction(self.quit_action)
        model_menu = self.menuBar().addMenu("&Models")
        self.open_model_action = QAction("Open a GGUF file…", self)
        self.manager_action = QAction("Model manager…", self)
        model_menu.addAction(self.open_model_action)
        model_menu.addAction(self.manager_action)
        self.benchmark_action = QAction("Benchmark…", self)
        model_menu.addAction(self.benchmark_action)
        model_menu.addSeparator()
        self.speculation_action = QAction("Speculative decoding", self)
        self.speculation_action.setCheckable(True)
        self.speculation_action.setChecked(self._settings.speculation)
        self.speculation_action.setShortcut(QKeySequence("Ctrl+Shift+S"))
        model_menu.addAction(self.speculation_action)
        settings_menu = self.menuBar().addMenu("&Settings")
        self.settings_action = QAction("Settings…", self)
        self.settings_action.setShortcut(QKeySequence.StandardKey.Preferences)
        settings_menu.addAction(self.settings_action)
        help_menu = self.menuBar().addMenu("&Help")
        self.log_folder_action = QAction("Open log folder", self)
        self.log_folder_action.setToolTip("Where engine.log is: attach it to a bug report")
        help_menu.addAction(self.log_folder_action)

    def _name_shortcuts(self) -> None:
        """Say each button's key in its tooltip, as the menus show them."""
        for button, action, text in (
            (self.regenerate_button, self.regenerate_action, "Write the last reply again"),
            (self.edit_button, self.edit_action, "Change your last message and send it again"),
        ):
            key = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
            button.setToolTip(f"{text} ({key})")
        new_key = self.new_action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        self.sidebar.new_button.setToolTip(f"Start a new conversation ({new_key})")
        find_key = self.search_action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        self.sidebar.search.setPlaceholderText(f"Search chats ({find_key})")

    def _connect_signals(self) -> None:
        """Every connection this window makes, in one place."""
        session = self.session
        self.log_folder_action.triggered.connect(self._on_log_folder_action_triggered)
        session.conversations_changed.connect(self._on_session_conversations_changed)
        session.reply_started.connect(self._on_session_reply_started)
        session.text_streamed.connect(self._on_session_text_streamed)
        session.reply_finished.connect(self._on_session_reply_finished)
        session.notice.connect(self._on_session_notice)
        session.model_loading.connect(self._on_session_model_loading)
        session.model_loaded.connect(self._on_session_model_loaded)
        session.model_load_failed.connect(self._on_session_model_load_failed)
        session.engine_stopped.connect(self._on_session_engine_stopped)

        self.sidebar.new_requested.connect(self._on_sidebar_new_requested)
        self.sidebar.conversation_selected.connect(self._on_sidebar_conversation_selected)
        self.sidebar.rename_requested.connect(self._on_sidebar_rename_requested)
        self.sidebar.delete_requested.connect(self._on_sidebar_delete_requested)
        self.sidebar.search_changed.connect(self._on_sidebar_search_changed)
        self.sidebar.export_requested.connect(self._on_sidebar_export_requested)

        self.composer.submitted.connect(self._on_composer_submitted)
        self.send_button.clicked.connect(self._on_send_button_clicked)
        self.stop_button.clicked.connect(self._on_stop_button_clicked)
        self.regenerate_button.clicked.connect(self._on_regenerate_button_clicked)
        self.edit_button.clicked.connect(self._on_edit_button_clicked)
        self.system_prompt.editingFinished.connect(self._on_system_prompt_editing_finished)
        self.chat_view.code_copied.connect(self._on_chat_view_code_copied)
        self.chat_view.message_copied.connect(self._on_chat_view_message_copied)
        self.chat_view.delete_requested.connect(self._on_chat_view_delete_requested)
        self.chat_view.variant_requested.connect(self._on_chat_view_variant_requested)
        self.chat_view.edit_requested.connect(self._on_chat_view_edit_requested)
        self.status.speculation_toggled.connect(self._on_status_speculation_toggled)
        settings: Any = self._settings
        settings.changed.connect(self._on_settings_changed)
        settings.save_failed.connect(self._on_settings_save_failed)

        self.welcome.starter_requested.connect(self.starter_requested)
        self.suggestion.linkActivated.connect(self._on_suggestion_link_activated)
        self.welcome.catalog_requested.connect(self.model_manager_requested)
        self.welcome.import_requested.connect(self._on_open_model_action_triggered)

        self.new_action.triggered.connect(self._on_sidebar_new_requested)
        self.quit_action.triggered.connect(self.close)
        self.export_markdown_action.triggered.connect(self._on_export_markdown_action_triggered)
        self.chat_settings_action.triggered.connect(self._on_chat_settings_action_triggered)
        self.export_json_action.triggered.connect(self._on_export_json_action_triggered)
        self.open_model_action.triggered.connect(self._on_open_model_action_triggered)
        self.manager_action.triggered.connect(self.model_manager_requested)
        self.benchmark_action.triggered.connect(self._on_benchmark_action_triggered)
        self.settings_action.triggered.connect(self._on_settings_action_triggered)
        self.stop_shortcut.activated.connect(self._on_stop_shortcut_activated)
        self.search_action.triggered.connect(self._on_search_action_triggered)
        self.regenerate_action.triggered.connect(self._on_regenerate_button_clicked)
        self.edit_action.triggered.connect(self._on_edit_button_clicked)
        self.composer.edit_last_requested.connect(self._on_edit_button_clicked)
        self.speculation_action.toggled.connect(self._on_speculation_action_toggled)

    def _on_benchmark_action_triggered(self) -> None:
        from localchat.ui.bench_dialog import open_benchmark_dialog

        open_benchmark_dialog(self, lambda: self.session.engine_config)

    # -- public -----------------------------------------------------------------------

    @property
    def conversation_id(self) -> int | None:
        return self.session.current_id

    @property
    def generating(self) -> bool:
        return self.session.generating

    @property
    def engine_info(self) -> EngineInfo | None:
        return self.session.engine_info

    def show_welcome(self, show: bool) -> None:
        page = self.welcome if show else self.pages.widget(0)
        if page is not None:
            self.pages.setCurrentWidget(page)

    def show_history_recovered(self, headline: str, details: str) -> None:
        """Say, in a dialog that does not block, that the chat history was set aside and where it is."""
        box = QMessageBox(QMessageBox.Icon.Warning, "Chat history set aside", headline, parent=self)
        box.setInformativeText(details)
        box.setObjectName("history_dialog")
        box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.history_dialog = box
        box.open()

    def load_model(self, target_path: str, draft_path: str | None = None) -> None:
        """Ask the engine to load ``target_path`` (with a drafter); the window stays usable."""
        self.session.load_model(build_engine_config(self._settings, target_path, draft_path))
        self._update_buttons()

    def send_message(self, text: str) -> None:
        """Send ``text`` in the current chat; the typed text stays in the box if it could not be sent."""
        if self.session.send(text):
            self.composer.clear()

    def stop(self) -> None:
        self.session.cancel()

    def regenerate(self) -> None:
        self.session.regenerate()

    def edit_last(self) -> None:
        text = self.session.edit_last()
        if text is None:
            return
        self.composer.setPlainText(text)
        self.composer.setFocus()
        self._show_notice("Editing your last message: send it to replace it and its reply.")

    def new_conversation(self) -> None:
        self.session.new_conversation()
        self.system_prompt.clear()
        self.chat_view.set_messages([])
        self.sidebar.list.clearSelection()
        self.composer.setFocus()
        self._update_buttons()

    # -- session slots ----------------------------------------------------------------

    def _on_session_conversations_changed(self) -> None:
        self._refresh_conversations()

    def _on_session_reply_started(self, conversation_id: int) -> None:
        self._show_conversation(conversation_id)
        self.status.generation_started()
        self._show_notice("")
        self._update_buttons()

    def _on_session_text_streamed(
        self, conversation_id: int, event: TokenEvent, runs: tuple[int, ...]
    ) -> None:
        if conversation_id == self.session.current_id:
            if event.prompt_progress is not None and not event.text:
                done, total, elapsed = event.prompt_progress
                self.chat_view.set_reading(formatting.reading_text(done, total, elapsed))
            else:
                self.chat_view.append_reply(event.text, runs)
        self.status.show_progress(event)

    def _on_session_reply_finished(self, end: ReplyEnd) -> None:
        result = end.result
        footer = "Interrupted." if result is None and end.sentence else ""
        if result is not None:
            footer = formatting.reply_footer(result.stats)
            if result.finish_reason is FinishReason.CANCELLED:
                footer = "Stopped. " + footer
            elif result.finish_reason is FinishReason.LENGTH:
                footer = "Cut off at the length limit. " + footer
        if end.conversation_id == self.session.current_id:
            self.chat_view.end_reply(footer, end.text, end.drafted_runs)
            # Read back from the store, so the reply has its id (delete, answers to switch between),
            # unless the store could not keep it: then the text the user saw stays on screen.
            stored = self.session.messages(end.conversation_id)
            if not end.text.strip() or (stored and stored[-1].content == end.text):
                self._show_conversation(end.conversation_id)
        else:
            self.chat_view.end_reply()
            if self.session.current_id is not None:
                self._show_conversation(self.session.current_id)
        self.status.generation_finished(result)
        notices = [end.sentence]
        if result is not None and result.speculation.paused and self.status.speculation_enabled:
            notices.append(formatting.paused_sentence(result.speculation.speedup))
        elif result is not None and result.speculation.active and self.status.speculation_enabled:
            notices.append(result.speculation.reason)  # why it drafts by lookup alone, if it does
        self._show_notice(" ".join(n for n in notices if n))
        self._update_buttons()

    def _on_session_notice(self, sentence: str) -> None:
        self._show_notice(sentence)

    def _on_session_model_loading(self, name: str) -> None:
        self.show_welcome(False)
        self.status.show_loading(name)
        self._show_notice("")

    def _on_session_model_loaded(self, info: EngineInfo) -> None:
        self.status.show_engine_info(info, self.session.target_name, self.session.draft_name)
        self.show_welcome(False)
        self._update_buttons()

    def _on_session_model_load_failed(self, sentence: str) -> None:
        self.status.show_no_model()
        self._show_notice(sentence)
        self.welcome.show_message(sentence)
        self._update_buttons()

    def _on_session_engine_stopped(self, sentence: str) -> None:
        self.status.engine_stopped()
        self._show_notice(sentence)
        self._update_buttons()

    # -- widget slots -----------------------------------------------------------------

    def _on_sidebar_new_requested(self) -> None:
        self.new_conversation()

    def _on_sidebar_conversation_selected(self, conversation_id: int) -> None:
        if conversation_id == self.session.current_id:
            return
        self.session.select(conversation_id)
        self._show_conversation(conversation_id)
        self._update_buttons()

    def _on_sidebar_rename_requested(self, conversation_id: int, title: str) -> None:
        self.session.rename(conversation_id, title)

    def _on_sidebar_delete_requested(self, conversation_id: int) -> None:
        shown = conversation_id == self.session.current_id
        if self.session.delete(conversation_id) and shown:
            self.new_conversation()

    def _on_sidebar_search_changed(self, text: str) -> None:
        self._search = text
        self._refresh_conversations()

    def _on_sidebar_export_requested(self, conversation_id: int, kind: str) -> None:
        self.export_conversation(conversation_id, kind)

    def _on_export_markdown_action_triggered(self) -> None:
        if self.session.current_id is not None:
            self.export_conversation(self.session.current_id, "markdown")

    def _on_export_json_action_triggered(self) -> None:
        if self.session.current_id is not None:
            self.export_conversation(self.session.current_id, "json")

    def _on_chat_settings_action_triggered(self) -> None:
        cid = self.session.current_id
        if cid is None:
            return
        dialog = self.chat_settings_dialog(cid)
        if dialog.exec():
            self.session.set_chat_options(cid, dialog.values())
        dialog.deleteLater()

    def chat_settings_dialog(self, conversation_id: int) -> ChatSettingsDialog:
        """The Chat settings dialog of one chat, filled in (the caller runs it)."""
        app = {name: self._settings.get(name) for name in CHAT_OPTIONS}
        return ChatSettingsDialog(
            self.session.conversation(conversation_id).title,
            self.session.chat_options(conversation_id),
            app,
            self,
        )

    def export_conversation(self, conversation_id: int, kind: str) -> None:
        """Ask where to write the chat, then write it; the outcome is one sentence under the chat."""
        title = self.session.conversation(conversation_id).title
        suffix, filter_text = (".md", "Markdown (*.md)") if kind == "markdown" else (".json", "JSON (*.json)")
        name = "".join(ch if ch.isalnum() or ch in " -_" else "_" for ch in title).strip() or "chat"
        path, _ = QFileDialog.getSaveFileName(
            self, "Export chat", str(Path.home() / f"{name}{suffix}"), f"{filter_text};;All files (*)"
        )
        if not path:
            return
        target = Path(path)
        if not target.suffix:
            target = target.with_suffix(suffix)
        problem = self.session.export(conversation_id, kind, target)
        self._show_notice(problem or f"Exported “{title}” to {target}.")

    def _on_composer_submitted(self, text: str) -> None:
        self.send_message(text)

    def _on_send_button_clicked(self) -> None:
        self.composer.submit()

    def _on_stop_button_clicked(self) -> None:
        self.stop()

    def _on_stop_shortcut_activated(self) -> None:
        if self.generating:
            self.stop()
        elif self.session.editing:
            self.session.stop_editing()
            self.composer.clear()
            self._show_notice("")

    def _on_regenerate_button_clicked(self) -> None:
        self.regenerate()

    def _on_edit_button_clicked(self) -> None:
        self.edit_last()

    def _on_system_prompt_editing_finished(self) -> None:
        self.session.set_system_prompt(self.system_prompt.text())

    def _on_chat_view_code_copied(self, _code: str) -> None:
        self.status.flash("Code copied")

    def _on_chat_view_message_copied(self, _text: str) -> None:
        self.status.flash("Message copied")

    def _on_chat_view_delete_requested(self, message_id: int) -> None:
        self.delete_message(message_id)

    def _on_chat_view_edit_requested(self, message_id: int) -> None:
        self.edit_message(message_id)

    def edit_message(self, message_id: int) -> None:
        """Put one of the user's messages in the box; sending it continues the chat from there."""
        text = self.session.edit_message(message_id)
        if text is None:
            if self.generating:
                self._show_notice("Wait for the reply, or stop it, before editing a message.")
            return
        self.composer.setPlainText(text)
        self.composer.setFocus()
        self._show_notice("Editing your message: send it to replace it and all after it (Esc cancels).")

    def _on_chat_view_variant_requested(self, message_id: int, step: int) -> None:
        cid = self.session.current_id
        if self.session.switch_variant(message_id, step) and cid is not None:
            self._show_conversation(cid)

    def delete_message(self, message_id: int) -> None:
        """Delete a reply at once; for one of the user's messages, ask whether what follows goes too."""
        shown = [m for m in self.chat_view.messages if m.message_id == message_id]
        with_following = False
        if shown and shown[0].role == "user" and self.session.has_messages_after(message_id):
            box = QMessageBox(
                QMessageBox.Icon.Question,
                "Delete message",
                "Delete this message only, or also everything after it?",
                parent=self,
            )
            box.setObjectName("delete_message_dialog")
            box.setInformativeText("The replies after it answered it; this cannot be undone.")
            following = box.addButton("Delete it and what follows", QMessageBox.ButtonRole.DestructiveRole)
            only = box.addButton("Delete this message only", QMessageBox.ButtonRole.AcceptRole)
            box.addButton(QMessageBox.StandardButton.Cancel)
            box.exec()
            if box.clickedButton() not in (following, only):
                return
            with_following = box.clickedButton() is following
        if self.session.delete_message(message_id, with_following=with_following):
            cid = self.session.current_id
            if cid is not None:
                self._show_conversation(cid)
            self._update_buttons()

    def _on_search_action_triggered(self) -> None:
        self.sidebar.search.setFocus()
        self.sidebar.search.selectAll()

    def _on_speculation_action_toggled(self, enabled: bool) -> None:
        if enabled != self._settings.speculation:
            self._settings.set("speculation", enabled)

    def _on_status_speculation_toggled(self, enabled: bool) -> None:
        self._settings.set("speculation", enabled)

    def _on_open_model_action_triggered(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open a GGUF model", str(Path.home()), "GGUF models (*.gguf);;All files (*)"
        )
        if path:
            self.load_model(path)

    def _on_settings_action_triggered(self) -> None:
        values = {o.name: self._settings.get(o.name) for o in OPTIONS}
        dialog = SettingsDialog(OPTIONS, values, self, token=self.hub_token)
        if dialog.exec():
            self.apply_settings(dialog.changed_values())

    def apply_settings(self, changed: dict[str, Any]) -> None:
        """Save what the settings dialog changed; a bad value is one sentence and keeps the old one."""
        try:
            self._settings.set_many(changed)
        except ValueError as exc:
            self._show_notice(str(exc))
            return
        restart = [o.label for o in OPTIONS if o.name in changed and o.needs_restart]
        if restart and self.session.engine_info is not None:
            self._show_notice(f"{', '.join(restart)}: takes effect when a model is next loaded.")

    def _on_settings_changed(self, name: str, value: object) -> None:
        if name == "speculation":
            self.status.set_speculation_enabled(bool(value))
            self.speculation_action.setChecked(bool(value))
        elif name == "colour_accepted_tokens":
            self.chat_view.set_colour_drafted(bool(value))
        elif name == "theme":
            apply_theme(str(value))

    def _on_settings_save_failed(self, sentence: str) -> None:
        self._show_notice(sentence)

    # -- helpers ----------------------------------------------------------------------

    def _model_label(self) -> str:
        return self.session.target_name or "Assistant"

    def show_suggestion(self, sentence: str, entry_id: str, name: str) -> None:
        """Offer a model that suits this computer better: the sentence, "Get NAME" and "Not now"."""
        self._suggested = entry_id
        self.suggestion.setText(
            f"{html.escape(sentence)} <a href=\"get\">Get {html.escape(name)}</a> · "
            f"<a href=\"dismiss\">Not now</a>"
        )
        self.suggestion.setToolTip(sentence)
        self.suggestion.show()

    def _on_suggestion_link_activated(self, link: str) -> None:
        self.suggestion.hide()
        if link == "get" and self._suggested:
            self.suggested_model_requested.emit(self._suggested)

    def show_notice(self, text: str) -> None:
        """One sentence under the chat (an error, or what just happened); empty hides it."""
        self._show_notice(text)

    def _show_notice(self, text: str) -> None:
        self.notice.setText(text)
        self.notice.setVisible(bool(text))

    def _update_buttons(self) -> None:
        busy = self.generating
        has_chat = self.session.current_id is not None
        self.stop_button.setEnabled(busy)
        self.send_button.setEnabled(not busy)
        self.regenerate_button.setEnabled(not busy and has_chat)
        self.edit_button.setEnabled(not busy and has_chat)
        self.regenerate_action.setEnabled(not busy and has_chat)
        self.edit_action.setEnabled(not busy and has_chat)
        self.export_markdown_action.setEnabled(has_chat)
        self.chat_settings_action.setEnabled(has_chat)
        self.export_json_action.setEnabled(has_chat)

    def _show_conversation(self, conversation_id: int) -> None:
        self.chat_view.set_messages([_display(m) for m in self.session.messages(conversation_id)])
        self.system_prompt.setText(self.session.system_prompt(conversation_id))
        if self.session.reply_conversation_id == conversation_id:
            text, runs = self.session.reply_text
            self.chat_view.begin_reply(self._model_label())
            self.chat_view.append_reply(text, runs)

    def _refresh_conversations(self) -> None:
        items = [ConversationItem(c.id, c.title) for c in self.session.conversations(self._search)]
        self.sidebar.set_conversations(items, self.session.current_id)

    def _restore_geometry(self) -> None:
        geometry = self._settings.window_geometry
        if not geometry or not self._settings.remember_window:
            return
        if not self.restoreGeometry(QByteArray.fromBase64(geometry.encode())):
            log.info("the remembered window geometry is not usable; the default size is used")

    def closeEvent(self, event: QCloseEvent) -> None:
        self.stop()
        if self._settings.remember_window:
            try:
                self._settings.set("window_geometry", bytes(self.saveGeometry().toBase64().data()).decode())
            except ValueError:
                log.debug("could not remember the window geometry", exc_info=True)
        super().closeEvent(event)


def _display(message: ShownMessage) -> DisplayMessage:
    footer = formatting.reply_footer(message.stats) if message.stats is not None else ""
    if message.finish_reason is FinishReason.CANCELLED:
        footer = "Stopped. " + footer
    elif message.finish_reason is FinishReason.LENGTH:
        footer = "Cut off at the length limit. " + footer
    elif message.role == "assistant" and not message.complete and message.stats is None:
        footer = "Interrupted."
    return DisplayMessage(
        message.role, message.content, footer, message.drafted_runs, message.model, message.id,
        message.variant,
    )
