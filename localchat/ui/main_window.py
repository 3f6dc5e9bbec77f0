"""The main window: conversations on the left, the chat in the middle, the status bar below.

The window owns no background work. It asks the engine client to load and to
generate and reacts to the client's signals; it asks the chat store to keep
each message as soon as it is complete (and a partial reply when the user
stops or the engine dies), so a crash of either process loses nothing
already shown.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QByteArray, QObject, Qt, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from localchat.engine.stats import GenerationStats
from localchat.engine.textruns import concat_runs, valid_runs
from localchat.engine.types import (
    ChatMessage,
    EngineInfo,
    FinishReason,
    GenerationResult,
    TokenEvent,
)
from localchat.settings import OPTIONS
from localchat.ui import formatting
from localchat.ui.chat_view import ChatView, DisplayMessage
from localchat.ui.composer import Composer
from localchat.ui.requests import build_engine_config, build_request
from localchat.ui.settings_dialog import SettingsDialog
from localchat.ui.sidebar import ConversationItem, ConversationSidebar
from localchat.ui.status_bar import SpeculationStatusBar
from localchat.ui.theme import apply_theme
from localchat.ui.welcome import WelcomePanel

if TYPE_CHECKING:
    from localchat.services.settings_service import SettingsService

log = logging.getLogger(__name__)

STARTER_DESCRIPTION = (
    "Qwen2.5-Coder 1.5B Instruct with its 0.5B drafter: about 1.6 GB, runs on most computers."
)


@dataclass
class _Reply:
    """The reply being written: which chat it belongs to and the text so far."""

    conversation_id: object
    text: str = ""
    drafted: tuple[int, ...] = ()  # which characters came from accepted drafts


class MainWindow(QMainWindow):
    """Chat window. ``store``, ``engine`` and ``settings`` are passed in by app.py."""

    model_manager_requested = Signal()
    starter_requested = Signal()

    def __init__(
        self,
        store: Any,
        engine: QObject,
        settings: SettingsService,
        *,
        memory_probe: Callable[[], int | None] | None = None,
        max_tokens: int = 1024,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("main_window")
        self.setWindowTitle("localchat")
        self._store = store
        self._engine: Any = engine
        self._settings = settings
        self._max_tokens = max_tokens
        self._conversation_id: object | None = None
        self._reply: _Reply | None = None
        self._editing = False
        self._engine_info: EngineInfo | None = None
        self._loading = False
        self._engine_dead = False
        self._pending: Callable[[], None] | None = None  # runs once the engine has loaded
        self._search = ""

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
        self.regenerate_button.setToolTip("Write the last reply again")
        self.edit_button = QPushButton("Edit last message", self)
        self.edit_button.setToolTip("Change your last message and send it again")
        self.notice = QLabel("", self)
        self.notice.setObjectName("notice")
        self.notice.setWordWrap(True)
        self.notice.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notice.hide()
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
        self.new_shortcut = QShortcut(QKeySequence("Ctrl+N"), self)
        self.status.set_speculation_enabled(self._settings.speculation)
        self.chat_view.set_colour_drafted(self._settings.colour_accepted_tokens)
        apply_theme(self._settings.theme)
        self._connect_signals()
        self._restore_geometry()
        self._refresh_conversations()
        self._update_buttons()
        self.resize(1180, 760)

    # -- construction -----------------------------------------------------------------

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&Chat")
        self.new_action = QAction("New chat", self)
        file_menu.addAction(self.new_action)
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
        settings_menu = self.menuBar().addMenu("&Settings")
        self.settings_action = QAction("Settings…", self)
        self.settings_action.setShortcut(QKeySequence.StandardKey.Preferences)
        settings_menu.addAction(self.settings_action)

    def _connect_signals(self) -> None:
        """Every connection this window makes, in one place."""
        engine = self._engine
        engine.load_started.connect(self._on_engine_load_started)
        engine.loaded.connect(self._on_engine_loaded)
        engine.load_failed.connect(self._on_engine_load_failed)
        engine.tokens_received.connect(self._on_engine_tokens_received)
        engine.generation_finished.connect(self._on_engine_generation_finished)
        engine.generation_failed.connect(self._on_engine_generation_failed)
        engine.engine_died.connect(self._on_engine_engine_died)

        self.sidebar.new_requested.connect(self._on_sidebar_new_requested)
        self.sidebar.conversation_selected.connect(self._on_sidebar_conversation_selected)
        self.sidebar.rename_requested.connect(self._on_sidebar_rename_requested)
        self.sidebar.delete_requested.connect(self._on_sidebar_delete_requested)
        self.sidebar.search_changed.connect(self._on_sidebar_search_changed)

        self.composer.submitted.connect(self._on_composer_submitted)
        self.send_button.clicked.connect(self._on_send_button_clicked)
        self.stop_button.clicked.connect(self._on_stop_button_clicked)
        self.regenerate_button.clicked.connect(self._on_regenerate_button_clicked)
        self.edit_button.clicked.connect(self._on_edit_button_clicked)
        self.system_prompt.editingFinished.connect(self._on_system_prompt_editing_finished)
        self.chat_view.code_copied.connect(self._on_chat_view_code_copied)
        self.status.speculation_toggled.connect(self._on_status_speculation_toggled)
        settings: Any = self._settings
        settings.changed.connect(self._on_settings_changed)
        settings.save_failed.connect(self._on_settings_save_failed)

        self.welcome.starter_requested.connect(self.starter_requested)
        self.welcome.catalog_requested.connect(self.model_manager_requested)
        self.welcome.import_requested.connect(self._on_open_model_action_triggered)

        self.new_action.triggered.connect(self._on_sidebar_new_requested)
        self.quit_action.triggered.connect(self.close)
        self.open_model_action.triggered.connect(self._on_open_model_action_triggered)
        self.manager_action.triggered.connect(self.model_manager_requested)
        self.benchmark_action.triggered.connect(self._on_benchmark_action_triggered)
        self.settings_action.triggered.connect(self._on_settings_action_triggered)
        self.stop_shortcut.activated.connect(self._on_stop_shortcut_activated)
        self.new_shortcut.activated.connect(self._on_sidebar_new_requested)

    def _on_benchmark_action_triggered(self) -> None:
        from localchat.ui.bench_dialog import open_benchmark_dialog

        open_benchmark_dialog(self, lambda: getattr(self, "_last_config", None))

    # -- public -----------------------------------------------------------------------

    @property
    def conversation_id(self) -> object | None:
        return self._conversation_id

    @property
    def generating(self) -> bool:
        return self._reply is not None

    @property
    def engine_info(self) -> EngineInfo | None:
        return self._engine_info

    def show_welcome(self, show: bool) -> None:
        page = self.welcome if show else self.pages.widget(0)
        if page is not None:
            self.pages.setCurrentWidget(page)

    def load_model(self, target_path: str, draft_path: str | None = None) -> None:
        """Ask the engine to load ``target_path`` (with a drafter); the window stays usable."""
        config = build_engine_config(self._settings, target_path, draft_path)
        self._last_config = config
        self._loading = True
        self.show_welcome(False)
        self.status.show_loading(Path(target_path).name)
        self._show_notice("")
        self._engine.load(config)
        self._update_buttons()

    def send_message(self, text: str) -> None:
        """Send ``text`` in the current chat (a new chat when there is none)."""
        text = text.strip()
        if not text or self.generating:
            return
        if self._engine_info is None and not self._loading and not self._engine_dead:
            self._show_notice("Load a model first: open a GGUF file or choose one in the model manager.")
            return
        if self._conversation_id is None:
            self._conversation_id = self._store_create(_title_from(text))
        if self._editing:
            self._store_drop_last_exchange(keep_user=False)
            self._editing = False
        self._store_add(self._conversation_id, "user", text)
        self.composer.clear()
        self._show_conversation(self._conversation_id)
        self._refresh_conversations()
        self._generate()

    def stop(self) -> None:
        if self.generating:
            log.info("stop requested")
            self._engine.cancel()

    def regenerate(self) -> None:
        if self.generating or self._conversation_id is None:
            return
        messages = self._store_messages(self._conversation_id)
        if not messages or _role(messages[-1]) == "assistant":
            self._store_drop_last_exchange(keep_user=True)
        if not self._store_messages(self._conversation_id):
            return
        self._show_conversation(self._conversation_id)
        self._generate()

    def edit_last(self) -> None:
        if self.generating or self._conversation_id is None:
            return
        users = [m for m in self._store_messages(self._conversation_id) if _role(m) == "user"]
        if not users:
            return
        self._editing = True
        self.composer.setPlainText(_content(users[-1]))
        self.composer.setFocus()
        self._show_notice("Editing your last message: send it to replace it and its reply.")

    def new_conversation(self) -> None:
        if self.generating:
            self.stop()
        self._conversation_id = None
        self._editing = False
        self.system_prompt.clear()
        self.chat_view.set_messages([])
        self.sidebar.list.clearSelection()
        self.composer.setFocus()
        self._update_buttons()

    # -- generation -------------------------------------------------------------------

    def _generate(self) -> None:
        assert self._conversation_id is not None
        conversation_id = self._conversation_id
        history = [ChatMessage(_role(m), _content(m)) for m in self._store_messages(conversation_id)]
        system = self._store_system_prompt(conversation_id)
        request = build_request(
            self._settings,
            history,
            system_prompt=system,
            speculation_enabled=self.status.speculation_enabled,
            max_tokens=self._max_tokens,
            session=str(conversation_id),  # adaptive speculation learns per conversation
        )
        self._reply = _Reply(conversation_id)
        self.chat_view.begin_reply(self._model_label())
        self.status.generation_started()
        self._show_notice("")
        self._update_buttons()
        if self._engine_dead or (self._engine_info is None and not self._loading):
            self._pending = lambda: self._engine.generate(request)
            self._restart_engine()
        elif self._loading:
            self._pending = lambda: self._engine.generate(request)
        else:
            self._engine.generate(request)

    def _restart_engine(self) -> None:
        config = getattr(self, "_last_config", None)
        if config is None:
            self._finish_reply(None, "Load a model first.")
            return
        log.info("starting a new engine")
        self._engine_dead = False
        self._loading = True
        restart = getattr(self._engine, "restart", None)
        if callable(restart):
            restart()
        self._engine.load(config)

    def _finish_reply(self, result: GenerationResult | None, sentence: str = "") -> None:
        """End the reply: keep whatever text arrived, say what happened, refresh the buttons."""
        reply = self._reply
        self._reply = None
        footer = ""
        if result is not None:
            footer = formatting.reply_summary(result.stats)
            if result.finish_reason is FinishReason.CANCELLED:
                footer = "Stopped. " + footer
            elif result.finish_reason is FinishReason.LENGTH:
                footer = "Cut off at the length limit. " + footer
            if reply is not None and result.text and len(result.text) >= len(reply.text):
                reply.text = result.text
                reply.drafted = result.drafted_runs
        elif sentence:
            footer = "Interrupted."
        if reply is not None and reply.text.strip():
            self._store_add(reply.conversation_id, "assistant", reply.text, result, reply.drafted)
        if reply is not None and reply.conversation_id == self._conversation_id:
            self.chat_view.end_reply(footer, reply.text, reply.drafted)
        else:
            self.chat_view.end_reply()
            if self._conversation_id is not None:
                self._show_conversation(self._conversation_id)
        self.status.generation_finished(result)
        notices = [s for s in (sentence, result.notice if result else "") if s]
        self._show_notice(" ".join(notices))
        self._update_buttons()

    # -- engine slots -----------------------------------------------------------------

    def _on_engine_load_started(self) -> None:
        self._loading = True
        self._update_buttons()

    def _on_engine_loaded(self, info: EngineInfo) -> None:
        log.info("loaded %s on %s", info.target.name, info.backend)
        self._loading = False
        self._engine_dead = False
        self._engine_info = info
        self.status.show_engine_info(info)
        config = getattr(self, "_last_config", None)
        if config is not None:
            self._settings.set("last_model_path", config.target_path)
            self._settings.set("last_draft_path", config.draft_path or "")
        self.show_welcome(False)
        self._update_buttons()
        pending, self._pending = self._pending, None
        if pending is not None:
            pending()

    def _on_engine_load_failed(self, sentence: str) -> None:
        log.warning("load failed: %s", sentence)
        self._loading = False
        self._engine_info = None
        self.status.show_no_model()
        self._pending = None
        if self._reply is not None:
            self._finish_reply(None, sentence)
        else:
            self._show_notice(sentence)
        self.welcome.show_message(sentence)
        self._update_buttons()

    def _on_engine_tokens_received(self, event: TokenEvent) -> None:
        if self._reply is None:
            return
        runs = event.drafted_runs if sum(event.drafted_runs) == len(event.text) else (len(event.text),)
        self._reply.text += event.text
        self._reply.drafted = concat_runs(self._reply.drafted, runs)
        if self._reply.conversation_id == self._conversation_id:
            self.chat_view.append_reply(event.text, runs)
        self.status.show_progress(event)

    def _on_engine_generation_finished(self, result: GenerationResult) -> None:
        if self._reply is None:
            return
        log.info("reply finished: %s", result.stats.summary())
        self._finish_reply(result)

    def _on_engine_generation_failed(self, sentence: str) -> None:
        log.warning("generation failed: %s", sentence)
        self._finish_reply(None, sentence)

    def _on_engine_engine_died(self, sentence: str) -> None:
        log.warning("engine died: %s", sentence)
        self._engine_dead = True
        self._loading = False
        self._engine_info = None
        self.status.engine_stopped()
        text = sentence or "The engine stopped unexpectedly."
        if "next message" not in text:
            text += " Your chats are safe; the next message starts a new engine."
        if self._reply is not None:
            self._finish_reply(None, text)
        else:
            self._show_notice(text)
        self._pending = None
        self._update_buttons()

    # -- widget slots -----------------------------------------------------------------

    def _on_sidebar_new_requested(self) -> None:
        self.new_conversation()

    def _on_sidebar_conversation_selected(self, conversation_id: object) -> None:
        if conversation_id == self._conversation_id:
            return
        self._editing = False
        self._conversation_id = conversation_id
        self._show_conversation(conversation_id)
        self._update_buttons()

    def _on_sidebar_rename_requested(self, conversation_id: object, title: str) -> None:
        self._store.rename(conversation_id, title)
        self._refresh_conversations()

    def _on_sidebar_delete_requested(self, conversation_id: object) -> None:
        if self._reply is not None and self._reply.conversation_id == conversation_id:
            self.stop()
        self._store.delete(conversation_id)
        if conversation_id == self._conversation_id:
            self.new_conversation()
        self._refresh_conversations()

    def _on_sidebar_search_changed(self, text: str) -> None:
        self._search = text
        self._refresh_conversations()

    def _on_composer_submitted(self, text: str) -> None:
        self.send_message(text)

    def _on_send_button_clicked(self) -> None:
        self.composer.submit()

    def _on_stop_button_clicked(self) -> None:
        self.stop()

    def _on_stop_shortcut_activated(self) -> None:
        if self.generating:
            self.stop()
        elif self._editing:
            self._editing = False
            self.composer.clear()
            self._show_notice("")

    def _on_regenerate_button_clicked(self) -> None:
        self.regenerate()

    def _on_edit_button_clicked(self) -> None:
        self.edit_last()

    def _on_system_prompt_editing_finished(self) -> None:
        text = self.system_prompt.text().strip()
        if self._conversation_id is None:
            if not text:
                return
            self._conversation_id = self._store_create("New chat")
            self._refresh_conversations()
        if text != self._store_system_prompt(self._conversation_id):
            self._store.set_system_prompt(self._conversation_id, text)

    def _on_chat_view_code_copied(self, _code: str) -> None:
        self.status.showMessage("Code copied", 2000)

    def _on_status_speculation_toggled(self, enabled: bool) -> None:
        self._settings.set("speculation", enabled)

    def _on_open_model_action_triggered(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open a GGUF model", str(Path.home()), "GGUF models (*.gguf);;All files (*)"
        )
        if path:
            self.load_model(path)

    def _on_settings_action_triggered(self) -> None:
        dialog = SettingsDialog(OPTIONS, {o.name: self._settings.get(o.name) for o in OPTIONS}, self)
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
        if restart and self._engine_info is not None:
            self._show_notice(f"{', '.join(restart)}: takes effect when a model is next loaded.")

    def _on_settings_changed(self, name: str, value: object) -> None:
        if name == "speculation":
            self.status.set_speculation_enabled(bool(value))
        elif name == "colour_accepted_tokens":
            self.chat_view.set_colour_drafted(bool(value))
        elif name == "theme":
            apply_theme(str(value))

    def _on_settings_save_failed(self, sentence: str) -> None:
        self._show_notice(sentence)

    # -- helpers ----------------------------------------------------------------------

    def _model_label(self) -> str:
        return self._engine_info.target.name if self._engine_info else "Assistant"

    def show_notice(self, text: str) -> None:
        """One sentence under the chat (an error, or what just happened); empty hides it."""
        self._show_notice(text)

    def _show_notice(self, text: str) -> None:
        self.notice.setText(text)
        self.notice.setVisible(bool(text))

    def _update_buttons(self) -> None:
        busy = self.generating
        has_chat = self._conversation_id is not None
        self.stop_button.setEnabled(busy)
        self.send_button.setEnabled(not busy)
        self.regenerate_button.setEnabled(not busy and has_chat)
        self.edit_button.setEnabled(not busy and has_chat)

    def _show_conversation(self, conversation_id: object) -> None:
        messages = [
            DisplayMessage(
                _role(m),
                _content(m),
                _footer_from_json(getattr(m, "stats", None)),
                valid_runs((getattr(m, "stats", None) or {}).get("drafted_runs")),
            )
            for m in self._store_messages(conversation_id)
            if _role(m) in ("user", "assistant")
        ]
        self.chat_view.set_messages(messages)
        self.system_prompt.setText(self._store_system_prompt(conversation_id))
        if self._reply is not None and self._reply.conversation_id == conversation_id:
            self.chat_view.begin_reply(self._model_label())
            self.chat_view.append_reply(self._reply.text, self._reply.drafted)

    def _refresh_conversations(self) -> None:
        items = [ConversationItem(c.id, c.title) for c in self._store_conversations(self._search)]
        self.sidebar.set_conversations(items, self._conversation_id)

    def _restore_geometry(self) -> None:
        geometry = self._settings.window_geometry
        if geometry:
            self.restoreGeometry(QByteArray.fromBase64(geometry.encode()))

    def closeEvent(self, event: QCloseEvent) -> None:
        self.stop()
        try:
            self._settings.set("window_geometry", bytes(self.saveGeometry().toBase64().data()).decode())
        except ValueError:
            log.debug("could not remember the window geometry", exc_info=True)
        super().closeEvent(event)

    # -- the chat store, in one place ---------------------------------------------------

    def _store_create(self, title: str) -> object:
        return self._store.create(title).id

    def _store_add(
        self,
        conversation_id: object,
        role: str,
        content: str,
        result: GenerationResult | None = None,
        drafted: tuple[int, ...] = (),
    ) -> None:
        stats = _stats_json(result) if result is not None else None
        if stats is not None and any(drafted[1::2]) and sum(drafted) == len(content):
            stats["drafted_runs"] = list(drafted)
        complete = result is not None and result.finish_reason is not FinishReason.CANCELLED
        self._store.add_message(
            conversation_id, role, content, stats=stats, complete=complete or role == "user"
        )

    def _store_messages(self, conversation_id: object) -> list[Any]:
        return list(self._store.messages(conversation_id))

    def _store_conversations(self, search: str) -> list[Any]:
        return list(self._store.search(search) if search.strip() else self._store.list_conversations())

    def _store_system_prompt(self, conversation_id: object) -> str:
        return str(self._store.get(conversation_id).system_prompt or "")

    def _store_drop_last_exchange(self, *, keep_user: bool) -> None:
        """Delete the last user message (unless ``keep_user``) and everything after it."""
        assert self._conversation_id is not None
        messages = self._store_messages(self._conversation_id)
        last_user = max((i for i, m in enumerate(messages) if _role(m) == "user"), default=None)
        if last_user is None:
            return
        start = last_user + 1 if keep_user else last_user
        if start < len(messages):
            self._store.delete_messages_from(messages[start].id)


def _stats_json(result: GenerationResult) -> dict[str, Any]:
    stats = dataclasses.asdict(result.stats)
    stats["finish_reason"] = result.finish_reason.value
    stats["drafter"] = result.speculation.drafter if result.speculation.active else "off"
    return stats


def _footer_from_json(stats: dict[str, Any] | None) -> str:
    if not stats:
        return ""
    known = {f.name for f in dataclasses.fields(GenerationStats)}
    try:
        values: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in stats.items() if k in known
        }
        summary = formatting.reply_summary(GenerationStats(**values))
    except (TypeError, ValueError):
        return ""
    if stats.get("finish_reason") == FinishReason.CANCELLED.value:
        summary = "Stopped. " + summary
    return summary


def _role(message: Any) -> str:
    role = message.role
    return str(getattr(role, "value", role))


def _content(message: Any) -> str:
    return str(message.content)


def _title_from(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "New chat"
    return line if len(line) <= 48 else line[:47].rstrip() + "…"
