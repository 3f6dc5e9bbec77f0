"""The main window: conversations on the left, the chat in the middle, the status bar below.

The window is layout and slots. The conversation's life (send, regenerate,
edit, stop, what is stored and when) belongs to services.ChatSession; the
engine's state and every job's progress come from the EnginePort (one typed
engine, the same objects the engine process sent). The window shows what
their signals say and words failures through host/failure_words.py.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QByteArray, QObject, QSize, Qt, Signal
from PySide6.QtGui import QCloseEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import QMainWindow, QMessageBox, QSplitter, QStackedWidget, QWidget

from localchat.host.events import EngineState, Phase
from localchat.host.failure_words import Audience, dropped_workers_sentence, sentence
from localchat.services.chat_options import DIALOG_OPTIONS
from localchat.services.chat_session import ChatSession
from localchat.services.engine_port import EnginePort
from localchat.services.shown import ReplyEnd, ReplyStart
from localchat.settings import OPTIONS
from localchat.ui import dialogs, formatting
from localchat.ui.chat_page import ChatPage
from localchat.ui.chat_settings_dialog import ChatSettingsDialog
from localchat.ui.chat_view import display_message
from localchat.ui.menus import WindowMenus
from localchat.ui.model_switch_words import switch_headline, switch_sentence
from localchat.ui.presets_wiring import PresetsWiring
from localchat.ui.settings_dialog import SettingsDialog, TokenKeeper
from localchat.ui.sidebar import ConversationItem, ConversationSidebar
from localchat.ui.status_bar import SpeculationStatusBar
from localchat.ui.theme import apply_theme
from localchat.ui.tools_page import ToolServersKeeper
from localchat.ui.tools_wiring import ToolsWiring
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
    """Chat window. ``session``, ``settings`` and ``engine`` are passed in by app.py."""

    model_manager_requested = Signal()
    starter_requested = Signal()

    def __init__(
        self, session: ChatSession, settings: SettingsService, engine: EnginePort,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("main_window")
        self.setWindowTitle("localchat")
        self.session = session
        self.engine = engine
        self._settings = settings
        self._search = ""
        self._phase = engine.state.phase
        self.history_dialog: QMessageBox | None = None
        self.hub_token: TokenKeeper | None = None  # the Settings dialog's Hugging Face tab, set by app.py
        self.tool_servers: ToolServersKeeper | None = None  # the Settings dialog's Tools tab, set by app.py

        self.sidebar = ConversationSidebar(self)
        page = ChatPage(self)
        self.chat_view, self.composer, self.system_prompt = page.chat_view, page.composer, page.system_prompt
        self.notice, self.suggestion, self.page = page.notice, page.suggestion, page
        self.send_button, self.stop_button = page.send_button, page.stop_button
        self.regenerate_button, self.edit_button = page.regenerate_button, page.edit_button
        self.welcome = WelcomePanel(STARTER_DESCRIPTION, self)
        self.status = SpeculationStatusBar(engine.memory_bytes, self)
        self.setStatusBar(self.status)
        self.pages = QStackedWidget(self)
        self.pages.addWidget(page)
        self.pages.addWidget(self.welcome)
        self.splitter = QSplitter(self)
        self.splitter.addWidget(self.sidebar)
        self.splitter.addWidget(self.pages)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([240, 900])
        self.setCentralWidget(self.splitter)
        self.tools = ToolsWiring(self, session, page.tools_button, self.chat_view, self.status)

        self.menus = WindowMenus(self, self._settings.speculation)
        self.menus.name_shortcuts(self.regenerate_button, self.edit_button, self.sidebar.new_button,
                                  self.sidebar.search)
        self.presets = PresetsWiring(self, session, engine, self.menus, self.system_prompt,
                                     self.page.show_notice)
        self.stop_shortcut = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        self.status.set_speculation_enabled(self._settings.speculation)
        self.chat_view.set_colour_drafted(self._settings.colour_accepted_tokens)
        apply_theme(self._settings.theme)
        self._connect_signals()
        self.resize(DEFAULT_SIZE)
        self._restore_geometry()  # after the default size, which would undo it
        self._refresh_conversations()
        self._update_buttons()

    def _connect_signals(self) -> None:
        """Every connection this window makes, in one place."""
        session, menus = self.session, self.menus
        session.conversations_changed.connect(self._refresh_conversations)
        session.reply_started.connect(self._on_session_reply_started)
        session.text_streamed.connect(self._on_session_text_streamed)
        session.reply_finished.connect(self._on_session_reply_finished)
        session.notice.connect(self.page.show_notice)
        self._engine_link = self.engine.state_changed.connect(self._on_engine_state_changed)
        self.engine.job_event.connect(self.status.show_job_event)

        self.sidebar.new_requested.connect(self.new_conversation)
        self.sidebar.conversation_selected.connect(self._on_sidebar_conversation_selected)
        self.sidebar.rename_requested.connect(session.rename)
        self.sidebar.delete_requested.connect(self._on_sidebar_delete_requested)
        self.sidebar.search_changed.connect(self._on_sidebar_search_changed)
        self.sidebar.export_requested.connect(self.export_conversation)

        self.composer.submitted.connect(self.send_message)
        self.composer.edit_last_requested.connect(self.edit_last)
        self.send_button.clicked.connect(self.composer.submit)
        self.stop_button.clicked.connect(session.cancel)
        self.regenerate_button.clicked.connect(session.regenerate)
        self.edit_button.clicked.connect(self.edit_last)
        self.system_prompt.editingFinished.connect(
            lambda: self.session.set_system_prompt(self.system_prompt.text()))
        self.chat_view.code_copied.connect(lambda _code: self.status.flash("Code copied"))
        self.chat_view.message_copied.connect(lambda _text: self.status.flash("Message copied"))
        self.chat_view.delete_requested.connect(self.delete_message)
        self.chat_view.variant_requested.connect(self._on_chat_view_variant_requested)
        self.chat_view.edit_requested.connect(self.edit_message)
        self.status.speculation_toggled.connect(self._on_speculation_toggled)
        settings: Any = self._settings
        settings.changed.connect(self._on_settings_changed)
        settings.save_failed.connect(self.page.show_notice)

        self.welcome.starter_requested.connect(self.starter_requested)
        self.welcome.catalog_requested.connect(self.model_manager_requested)
        self.welcome.import_requested.connect(self._on_open_model_action_triggered)

        menus.new_action.triggered.connect(self.new_conversation)
        menus.quit_action.triggered.connect(self.close)
        menus.export_markdown_action.triggered.connect(partial(self.export_current, "markdown"))
        menus.export_json_action.triggered.connect(partial(self.export_current, "json"))
        menus.chat_settings_action.triggered.connect(self._on_chat_settings_action_triggered)
        menus.open_model_action.triggered.connect(self._on_open_model_action_triggered)
        menus.manager_action.triggered.connect(self.model_manager_requested)
        menus.benchmark_action.triggered.connect(self._on_benchmark_action_triggered)
        menus.settings_action.triggered.connect(self._on_settings_action_triggered)
        menus.log_folder_action.triggered.connect(lambda: self.page.show_notice(dialogs.open_log_folder()))
        menus.search_action.triggered.connect(self._on_search_action_triggered)
        menus.regenerate_action.triggered.connect(session.regenerate)
        menus.edit_action.triggered.connect(self.edit_last)
        menus.speculation_action.toggled.connect(self._on_speculation_toggled)
        self.stop_shortcut.activated.connect(self._on_stop_shortcut_activated)

    # -- public -----------------------------------------------------------------------

    def show_welcome(self, show: bool) -> None:
        page = self.welcome if show else self.pages.widget(0)
        if page is not None:
            self.pages.setCurrentWidget(page)

    def show_history_recovered(self, headline: str, details: str) -> None:
        """Say, in a dialog that does not block, that the chat history was set aside and where it is."""
        self.history_dialog = dialogs.history_recovered_dialog(self, headline, details)

    def load_model(self, target_path: str, draft_path: str | None = None) -> None:
        """Ask the engine to load ``target_path`` (with a drafter); the window stays usable."""
        self.session.load_model(self.session.model.config_for(target_path, draft_path))
        self._update_buttons()

    def send_message(self, text: str) -> None:
        """Send ``text`` (and the attached files) in the current chat; both stay if it was not sent."""
        if self.page.attachment_reader.reading:
            self.page.show_notice("Still reading the attached files: send again in a moment.")
            return
        if self.session.send(text, self.page.attachments):
            self.composer.clear()
            self.page.set_attachments([])

    def edit_last(self) -> None:
        self._edit(self.session.edit_last(), "Editing your last message: send to replace it and its reply.")

    def edit_message(self, message_id: int) -> None:
        """Put one of the user's messages in the box; sending it continues the chat from there."""
        text = self.session.edit_message(message_id)
        if text is None and self.session.generating:
            self.page.show_notice("Wait for the reply, or stop it, before editing a message.")
        self._edit(text, "Editing your message: send it to replace it and all after it (Esc cancels).")

    def _edit(self, text: str | None, notice: str) -> None:
        if text is None:
            return
        self.composer.setPlainText(text)
        self.composer.setFocus()
        self.page.show_notice(notice)

    def new_conversation(self) -> None:
        self.session.new_conversation()
        self.system_prompt.clear()
        self.chat_view.set_messages([])
        self.sidebar.list.clearSelection()
        self.composer.setFocus()
        self._update_buttons()

    def export_conversation(self, conversation_id: int, kind: str) -> None:
        """Ask where to write the chat, then write it; the outcome is one sentence under the chat."""
        title = self.session.conversation(conversation_id).title
        target = dialogs.ask_export_path(self, title, kind)
        if target is not None:
            problem = self.session.export(conversation_id, kind, target)
            self.page.show_notice(problem or f"Exported “{title}” to {target}.")

    def export_current(self, kind: str) -> None:
        if self.session.current_id is not None:
            self.export_conversation(self.session.current_id, kind)

    def delete_message(self, message_id: int) -> None:
        """Delete a reply at once; for one of the user's messages, ask whether what follows goes too."""
        shown = [m for m in self.chat_view.messages if m.message_id == message_id]
        with_following: bool | None = False
        if shown and shown[0].role == "user" and self.session.has_messages_after(message_id):
            with_following = dialogs.ask_delete_following(self)
        if with_following is None:
            return
        if self.session.delete_message(message_id, with_following=with_following):
            self._show_current()
            self._update_buttons()

    def chat_settings_dialog(self, conversation_id: int) -> ChatSettingsDialog:
        """The Chat settings dialog of one chat, filled in (the caller runs it)."""
        app = {name: self._settings.get(name) for name in DIALOG_OPTIONS}
        return ChatSettingsDialog(self.session.conversation(conversation_id).title,
                                  self.session.options.values(conversation_id), app, self)

    def apply_settings(self, changed: dict[str, Any]) -> None:
        """Save what the settings dialog changed; a bad value is one sentence and keeps the old one."""
        try:
            self._settings.set_many(changed)
        except ValueError as exc:
            self.page.show_notice(str(exc))
            return
        notes = []
        restart = [o.label for o in OPTIONS if o.name in changed and o.needs_restart]
        if restart and self.engine.state.info is not None:
            notes.append(f"{', '.join(restart)}: takes effect when a model is next loaded.")
        notes.append(self.presets.overridden_note(changed))
        if any(notes):
            self.page.show_notice(" ".join(n for n in notes if n))

    # -- session and engine slots -----------------------------------------------------

    def _on_session_reply_started(self, start: ReplyStart) -> None:
        if start.user_message is not None and start.conversation_id == self.session.current_id and (
                self.chat_view.messages or self.chat_view.streaming_text is not None):
            self.chat_view.add_message(display_message(start.user_message))
            self.chat_view.begin_reply(self.session.model.target_name or "Assistant")
        else:
            self._show_conversation(start.conversation_id)
        self.status.generation_started()
        self.page.show_notice("")
        self._update_buttons()

    def _on_session_text_streamed(self, conversation_id: int, event: Any, runs: tuple[int, ...]) -> None:
        if conversation_id != self.session.current_id:
            return
        if event.prompt_progress is not None and not event.text:
            self.chat_view.set_reading(formatting.reading_text(*event.prompt_progress))
        else:
            self.chat_view.append_reasoning(event.reasoning)
            self.chat_view.append_reply(event.text, runs)

    def _on_session_reply_finished(self, end: ReplyEnd) -> None:
        result = end.result
        footer = (formatting.ended_footer(result.stats, result.finish_reason) if result is not None
                  else "Interrupted." if end.sentence else "")
        if end.conversation_id == self.session.current_id:
            self.chat_view.end_reply(footer, end.text, end.drafted_runs, end.message_id, end.variant,
                                     end.tools, end.reasoning)
        else:
            self.chat_view.end_reply()
            self._show_current()
        notices = [end.sentence]
        if result is not None and result.speculation.paused and self.status.speculation_enabled:
            notices.append(formatting.paused_sentence(result.speculation.speedup))
        elif result is not None and result.speculation.active and self.status.speculation_enabled:
            notices.append(result.speculation.reason)  # why it drafts by lookup alone, if it does
        self.page.show_notice(" ".join(n for n in notices if n))
        self._update_buttons()

    def _on_engine_state_changed(self, state: EngineState) -> None:
        model, config = self.session.model, state.config
        name = model.target_name or (model.model_name(config.target_path) if config else "")
        self.status.show_state(state, name, model.draft_name)
        changed, self._phase = state.phase is not self._phase, state.phase
        switched = switch_sentence(state, model.model_name)  # the API loaded (or failed to load) a model
        if switched and changed and state.phase in (Phase.LOADING, Phase.READY):
            self.show_welcome(False)
            self.page.show_notice(switched)
            if headline := switch_headline(state, model.model_name):
                self.status.flash(headline)
        elif state.phase is Phase.LOADING:
            self.show_welcome(False)
            if state.dropped_workers:
                self.page.show_notice(dropped_workers_sentence(state.dropped_workers))
            elif changed and state.failure is None:
                self.page.show_notice("")
        elif changed and state.failure is not None and state.phase in (Phase.FAILED, Phase.STOPPED):
            words = sentence(state.failure, Audience.WINDOW, log_path=self.engine.log_path)
            self.page.show_notice(words)
            if state.phase is Phase.FAILED:
                self.welcome.show_message(words)
        elif state.phase is Phase.READY:
            self.show_welcome(False)
        if changed:
            self.page.after_model_state(state)  # why it drafts without the draft model, once loaded
        self._update_buttons()

    # -- widget slots -----------------------------------------------------------------

    def _on_sidebar_conversation_selected(self, conversation_id: int) -> None:
        if conversation_id == self.session.current_id:
            return
        self.session.select(conversation_id)
        self._show_conversation(conversation_id)
        self._update_buttons()

    def _on_sidebar_delete_requested(self, conversation_id: int) -> None:
        shown = conversation_id == self.session.current_id
        if self.session.delete(conversation_id) and shown:
            self.new_conversation()

    def _on_sidebar_search_changed(self, text: str) -> None:
        self._search = text
        self._refresh_conversations()

    def _on_chat_settings_action_triggered(self) -> None:
        cid = self.session.current_id
        if cid is None:
            return
        dialog = self.chat_settings_dialog(cid)
        if dialog.exec():
            self.session.set_chat_options(cid, dialog.values(), DIALOG_OPTIONS)
        dialog.deleteLater()

    def _on_stop_shortcut_activated(self) -> None:
        if self.session.generating:
            self.session.cancel()
        elif self.session.editing:
            self.session.stop_editing()
            self.composer.clear()
            self.page.show_notice("")

    def _on_chat_view_variant_requested(self, message_id: int, step: int) -> None:
        if self.session.switch_variant(message_id, step):
            self._show_current()

    def _on_search_action_triggered(self) -> None:
        self.sidebar.search.setFocus()
        self.sidebar.search.selectAll()

    def _on_speculation_toggled(self, enabled: bool) -> None:
        if enabled != self._settings.speculation:
            self._settings.set("speculation", enabled)

    def _on_open_model_action_triggered(self) -> None:
        path = dialogs.ask_model_file(self)
        if path:
            self.load_model(path)

    def _on_benchmark_action_triggered(self) -> None:
        from localchat.ui.bench_dialog import open_benchmark_dialog

        dialog = open_benchmark_dialog(self, lambda: self.engine.state.config)
        # Loading a model with the dialog open enables Run (greyed while none is loaded).
        self.engine.state_changed.connect(dialog.models_changed, Qt.ConnectionType.UniqueConnection)

    def _on_settings_action_triggered(self) -> None:
        values = {o.name: self._settings.get(o.name) for o in OPTIONS}
        dialog = SettingsDialog(OPTIONS, values, self, token=self.hub_token, tools=self.tool_servers,
                                tools_note=self.session.tools.availability().reason)
        if dialog.exec():
            self.apply_settings(dialog.changed_values())

    def _on_settings_changed(self, name: str, value: object) -> None:
        if name == "speculation":
            self.status.set_speculation_enabled(bool(value))
            self.menus.speculation_action.setChecked(bool(value))
        elif name == "colour_accepted_tokens":
            self.chat_view.set_colour_drafted(bool(value))
        elif name == "theme":
            apply_theme(str(value))

    # -- helpers ----------------------------------------------------------------------

    def _update_buttons(self) -> None:
        busy, has_chat = self.session.generating, self.session.current_id is not None
        self.page.set_busy(busy, has_chat)
        self.tools.refresh()
        for action in (self.menus.regenerate_action, self.menus.edit_action):
            action.setEnabled(not busy and has_chat)
        self.presets.refresh()
        for action in (self.menus.export_markdown_action, self.menus.export_json_action,
                       self.menus.chat_settings_action):
            action.setEnabled(has_chat)

    def _show_current(self) -> None:
        if self.session.current_id is not None:
            self._show_conversation(self.session.current_id)

    def _show_conversation(self, conversation_id: int) -> None:
        self.chat_view.set_messages([display_message(m) for m in self.session.messages(conversation_id)])
        self.system_prompt.setText(self.session.system_prompt(conversation_id))
        if self.session.reply_conversation_id == conversation_id:
            text, runs = self.session.reply_text
            self.chat_view.begin_reply(self.session.model.target_name or "Assistant")
            self.chat_view.append_reply(text, runs)

    def _refresh_conversations(self) -> None:
        items = [ConversationItem(c.id, c.title) for c in self.session.conversations(self._search)]
        self.sidebar.set_conversations(items, self.session.current_id)

    def _restore_geometry(self) -> None:
        geometry = self._settings.window_geometry if self._settings.remember_window else ""
        if geometry and not self.restoreGeometry(QByteArray.fromBase64(geometry.encode())):
            log.info("the remembered window geometry is not usable; the default size is used")

    def closeEvent(self, event: QCloseEvent) -> None:
        self.session.cancel()
        QObject.disconnect(self._engine_link)  # the store may close next (False when closed twice)
        self.tools.detach()  # so may the tool servers, which report each one stopped
        if self._settings.remember_window:
            try:
                self._settings.set("window_geometry", bytes(self.saveGeometry().toBase64().data()).decode())
            except ValueError:
                log.debug("could not remember the window geometry", exc_info=True)
        super().closeEvent(event)
