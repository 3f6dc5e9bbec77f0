"""ChatSession: the life of the conversations in the window, without a widget.

It owns what happens between the user's words and the engine's reply: which
conversation is current, sending, regenerating (the earlier answers are kept
in the store, and the one the user switches to is the one the next prompt
holds), editing a message, deleting messages, stopping, a chat's own
settings and its export; the prompt (through ``chat.prompt_turns``); and the
store (every write goes through here or the ReplyRecorder, and a write that
fails is a sentence, never a lost message). The engine's state is the
engine's (``EnginePort.state``): the session keeps none of it, and after a
crash the engine's supervisor starts it again when the next reply asks.

A reply's rounds (with tool servers, the model's tool calls between them) and each chat's choice of
tools are ``tools`` (services.ChatTools, with its own signals); the loaded model's names and preset
are ``model`` (services.LoadedModel).

Signals (all on the GUI thread)::

    conversations_changed()              the list in the sidebar may differ (created, renamed, deleted)
    reply_started(ReplyStart)            a reply began: its chat, the user's message when one was added
    text_streamed(int, object, object)   conversation id, TokenEvent, its drafted runs (checked)
    reply_finished(ReplyEnd)             the text, the result (None if it failed), a sentence, and the
                                         stored message's id and place among its answers
    notice(str)                          a sentence for the user (an empty one clears it)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from localchat.catalog.names import shipped_model_name
from localchat.chat import (
    ChatStoreError,
    Conversation,
    ConversationStore,
    ExportError,
    NotFoundError,
    export,
    prompt_turns,
)
from localchat.chat.attachments import Attachment
from localchat.chat.titles import NEW_CHAT, first_message_title, title_from
from localchat.engine.types import (
    EngineConfig,
    GenerationResult,
)
from localchat.host.events import Failed, Finished, JobEvent, Phase, Tokens
from localchat.host.failure_words import Audience, sentence
from localchat.services.attachment_budget import AttachmentBudget
from localchat.services.chat_options import ChatOptions
from localchat.services.chat_tools import ChatTools, Turn
from localchat.services.engine_port import WINDOW, EnginePort
from localchat.services.loaded_model import LoadedModel
from localchat.services.qt_signals import emit
from localchat.services.reply_recorder import ReplyRecorder
from localchat.services.requests import chat_message
from localchat.services.shown import ReplyEnd, ReplyStart, ShownMessage, shown, shown_messages
from localchat.settings import InvalidValueError, Value

if TYPE_CHECKING:
    from localchat.services.mcp_service import McpService
    from localchat.services.model_presets import ModelPresets
    from localchat.services.settings_service import SettingsService

log = logging.getLogger(__name__)

NO_MODEL = "Load a model first: open a GGUF file or choose one in the model manager."


class ChatSession(QObject):
    conversations_changed = Signal()
    reply_started = Signal(object)
    text_streamed = Signal(int, object, object)
    reply_finished = Signal(object)
    notice = Signal(str)

    def __init__(
        self,
        store: ConversationStore,
        engine: EnginePort,
        settings: SettingsService,
        *,
        max_tokens: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        model_name: Callable[[str], str] = shipped_model_name,
        mcp: McpService | None = None,
        presets: ModelPresets | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._store = store
        self._engine = engine
        self._settings = settings
        self.options = ChatOptions(store, settings, max_tokens)
        self._current: int | None = None
        self._recorder = ReplyRecorder(store, clock, self)
        self._editing: int | None = None  # the user message a send replaces (with all after it)
        # The user turned speculation on since the last reply: a chat that paused it tries again.
        self._resume_speculation = False
        self.model = LoadedModel(engine, settings, presets, model_name, self)  # its names, its preset
        self.tools = ChatTools(engine, settings, self.options, self.model, self._recorder, mcp,
                               current=lambda: self._current, set_options=self.set_chat_options, parent=self)
        self._attachments = AttachmentBudget(store, engine, settings, self.options, self.model)
        self._connect_signals()

    def _connect_signals(self) -> None:
        self._engine.job_event.connect(self._on_engine_job_event)
        self._settings.changed.connect(self._on_settings_changed)
        self.tools.ended.connect(self._finish)

    # -- state ------------------------------------------------------------------------

    @property
    def current_id(self) -> int | None:
        """The conversation the window shows (None: a new chat not yet written)."""
        return self._current

    @property
    def generating(self) -> bool:
        return self._recorder.reply is not None

    @property
    def reply_conversation_id(self) -> int | None:
        reply = self._recorder.reply
        return reply.conversation_id if reply is not None else None

    @property
    def reply_text(self) -> tuple[str, tuple[int, ...]]:
        """The reply in progress so far, with its drafted runs (empty when none)."""
        reply = self._recorder.reply
        return (reply.text, reply.drafted) if reply is not None else ("", ())

    @property
    def editing(self) -> bool:
        return self._editing is not None

    # -- conversations ----------------------------------------------------------------

    def conversations(self, search: str = "") -> list[Conversation]:
        return self._store.search(search) if search.strip() else self._store.list_conversations()

    def messages(self, conversation_id: int) -> list[ShownMessage]:
        """The user and assistant messages of a conversation, as the chat view shows them.

        The reply being written is left out: its saved copy lags behind the text
        the view streams (``reply_text``).
        """
        reply = self._recorder.reply
        hidden = (reply.message_id, reply.replaces) if reply is not None else ()
        return shown_messages(self._store.messages(conversation_id, every=True), hidden)

    def switch_variant(self, message_id: int, step: int) -> bool:
        """Show the answer ``step`` places after (or before) this one among the answers to its message.

        The next reply's prompt is built from the one shown. Refused while that chat is answering.
        """
        try:
            variants = [m.id for m in self._store.variants(message_id)]
            conversation_id = self._store.message(message_id).conversation_id
        except ChatStoreError as exc:
            emit(self.notice, str(exc))
            return False
        if self.reply_conversation_id == conversation_id:
            emit(self.notice, "Wait for the reply, or stop it, before switching answers.")
            return False
        target = variants[max(0, min(len(variants) - 1, variants.index(message_id) + step))]
        if target == message_id:
            return False
        return self._write(lambda: self._store.show_variant(target))

    def system_prompt(self, conversation_id: int | None = None) -> str:
        cid = self._current if conversation_id is None else conversation_id
        return self._store.get(cid).system_prompt if cid is not None else ""

    def select(self, conversation_id: int | None) -> None:
        """Make a conversation current (None: a new, empty chat)."""
        self._current = conversation_id
        self._editing = None

    def new_conversation(self) -> None:
        if self.generating:
            self.cancel()
        self.select(None)

    def rename(self, conversation_id: int, title: str) -> bool:
        return self._write(lambda: self._store.rename(conversation_id, title), changed=True)

    def delete(self, conversation_id: int) -> bool:
        if self.reply_conversation_id == conversation_id:
            self.cancel()
        if not self._write(lambda: self._store.delete(conversation_id), changed=True):
            return False
        if conversation_id == self._current:
            self.select(None)
        return True

    def delete_message(self, message_id: int, *, with_following: bool = False) -> bool:
        """Delete one message (``with_following``: and every later one in its chat).

        Refused while a reply is being written in that chat, because the prompt it was
        started from would no longer be the chat the user sees.
        """
        try:
            message = self._store.message(message_id)
        except ChatStoreError as exc:
            emit(self.notice, str(exc))
            return False
        if self.reply_conversation_id == message.conversation_id:
            emit(self.notice, "Stop the reply before deleting messages in this chat.")
            return False
        if with_following:
            return self._write(lambda: self._store.delete_messages_from(message_id), changed=True)
        return self._write(lambda: self._store.delete_message(message_id), changed=True)

    def has_messages_after(self, message_id: int) -> bool:
        """Whether the chat holding ``message_id`` goes on after it (a delete asks about those)."""
        message = self._store.message(message_id)
        return any(m.id > message_id for m in self._store.messages(message.conversation_id))

    def conversation(self, conversation_id: int) -> Conversation:
        return self._store.get(conversation_id)

    def set_chat_options(self, conversation_id: int, options: dict[str, Value],
                         names: tuple[str, ...] | None = None) -> bool:
        """Keep the chat's own values (only those given; {} means the app's settings again). With
        ``names``, only those options change: the chat keeps its own values of the others."""
        try:
            checked = self.options.checked(options)
        except InvalidValueError as exc:
            emit(self.notice, str(exc))
            return False
        if names is not None:
            kept = {k: v for k, v in self.options.values(conversation_id).items() if k not in names}
            checked = kept | checked
        return self._write(lambda: self._store.set_options(conversation_id, checked))

    def export(self, conversation_id: int, kind: str, path: Path) -> str:
        """Write a chat to ``path`` as ``kind`` ("markdown" or "json"); "" when done, else a sentence.

        The reply being written is left out, as in ``messages``: its saved copy lags behind.
        """
        live = self._recorder.reply.message_id if self._recorder.reply is not None else None
        try:
            conversation = self._store.get(conversation_id)
            messages = [m for m in self._store.messages(conversation_id) if m.id != live]
            export.write_export(path, export.render(kind, conversation, messages))
        except (ChatStoreError, ExportError) as exc:
            log.warning("export: %s", exc)
            return str(exc)
        log.info("exported chat %s as %s to %s", conversation_id, kind, path)
        return ""

    def set_system_prompt(self, text: str) -> bool:
        """Keep ``text`` as the current chat's system prompt (a chat is created for a non-empty one)."""
        text = text.strip()
        if self._current is None:
            if not text:
                return True
            created = self._create(NEW_CHAT)
            if created is None:
                return False
            self._current = created
        cid = self._current
        if text == self.system_prompt(cid):
            return True
        return self._write(lambda: self._store.set_system_prompt(cid, text))

    # -- the conversation's life --------------------------------------------------------

    def load_model(self, config: EngineConfig) -> None:
        """Ask the engine to load a model; its state_changed says how it goes."""
        self._engine.load(config)

    def send(self, text: str, attachments: Sequence[Attachment] = ()) -> bool:
        """Send ``text`` in the current chat (a new chat when there is none), with ``attachments``
        inlined after it (``chat.attachments.inline``: what the context has room for); the stored
        message is the text as sent, files included.

        False when nothing was sent: no text, a reply running, no model, or the
        store could not keep the message (``notice`` says why; the caller keeps
        the typed text).
        """
        text = text.strip()
        if (not text and not attachments) or self.generating:
            return False
        if self._engine.state.phase in (Phase.NO_MODEL, Phase.FAILED, Phase.CLOSED):
            emit(self.notice, NO_MODEL)
            return False
        notes: tuple[str, ...] = ()
        if attachments:
            inlined = self._attachments.inline(self._current, text, attachments)
            text, notes = inlined.text, inlined.notes
        if not self._send_text(text):
            return False
        if notes:  # after reply_started, which clears the notice line
            emit(self.notice, " ".join(notes))
        return True

    def _send_text(self, text: str) -> bool:
        cid = self._current
        if cid is None:
            cid = self._create(title_from(text))
            if cid is None:
                return False
            self._current = cid
            self.tools.chat_written()
        else:
            title = first_message_title(self._store, cid, text)
            if title is not None:  # a failed rename is a notice; the message still goes
                self._write(lambda: self._store.rename(cid, title), changed=True)
        editing = self._editing is not None
        if self._editing is not None and not self._drop_from(self._editing):
            return False
        added = []
        if not self._write(lambda: added.append(self._store.add_message(cid, "user", text)), changed=True):
            return False
        self._editing = None
        # After an edit the messages from the edited one are gone: the window shows the chat again.
        self._start_reply(cid, user_message=None if editing else shown(added[0]))
        return True

    def regenerate(self) -> bool:
        """Write the last reply again (or answer a last user message that has none)."""
        cid = self._current
        if self.generating or cid is None:
            return False
        messages = self._store.messages(cid)
        replaces: int | None = None
        if messages and messages[-1].role == "assistant" and messages[-1].content.strip():
            replaces = messages[-1].id  # kept: the new answer joins it, and the user can switch back
        elif not self._drop_last_exchange(cid, keep_user=True):
            return False
        if not self._store.messages(cid):
            return False
        self._start_reply(cid, replaces=replaces)
        return True

    def edit_last(self) -> str | None:
        """Start editing the last user message: returns its text (None when there is none)."""
        if self.generating or self._current is None:
            return None
        users = [m for m in self._store.messages(self._current) if m.role == "user"]
        if not users:
            return None
        self._editing = users[-1].id
        return users[-1].content

    def edit_message(self, message_id: int) -> str | None:
        """Start editing one of the user's messages in the current chat: returns its text.

        Sending then replaces it and everything after it, and the chat continues from there.
        None (nothing to edit) while a reply is written, or for a message not the user's here.
        """
        if self.generating or self._current is None:
            return None
        try:
            message = self._store.message(message_id)
        except ChatStoreError:
            return None
        if message.role != "user" or message.conversation_id != self._current:
            return None
        self._editing = message.id
        return message.content

    def stop_editing(self) -> None:
        self._editing = None

    def cancel(self) -> None:
        """Stop the reply: the round being written, the servers being started, or the tool calls."""
        if not self.generating:
            return
        log.info("stop requested")
        if not self.tools.cancel():
            self._engine.cancel()

    # -- replies --------------------------------------------------------------------

    def _start_reply(self, cid: int, *, replaces: int | None = None,
                     user_message: ShownMessage | None = None) -> None:
        history = [m for m in self._store.messages(cid) if m.id != replaces]
        turns = prompt_turns(self.system_prompt(cid) or self.model.system_prompt, history)
        temperature, max_tokens = self.options.reply_settings(cid, self.model.reader())
        turn = Turn(cid, [chat_message(t) for t in turns], temperature, max_tokens,
                    resume=self._resume_speculation)
        self._resume_speculation = False
        self._recorder.begin(cid, self.model.target_name or self.model.config_name, replaces)
        emit(self.reply_started, ReplyStart(cid, user_message))
        self.tools.begin(turn)

    def _finish(self, result: GenerationResult | None, why: str = "") -> None:
        """End the reply: keep its text with its statistics, then tell the window."""
        self.tools.end()
        reply, problem = self._recorder.end(result)
        if reply is None:
            return
        notices = [s for s in (why, result.notice if result else "", problem) if s]
        message_id = reply.message_id if not problem else None
        variant = (1, 1)
        if message_id is not None and reply.replaces is not None:
            try:
                ids = [m.id for m in self._store.variants(message_id)]
                variant = (ids.index(message_id) + 1, len(ids))
            except (ChatStoreError, ValueError):
                message_id = None
        emit(self.reply_finished, ReplyEnd(reply.conversation_id, reply.text, reply.drafted, result,
                                           " ".join(notices), message_id, variant, reply.tools,
                                           reply.reasoning))

    # -- engine slots -----------------------------------------------------------------

    def _on_engine_job_event(self, event: JobEvent) -> None:
        if event.source != WINDOW or self._recorder.reply is None:
            return
        if isinstance(event, Tokens):
            reply = self._recorder.reply
            if not event.event.text and not event.event.n_tokens:  # the prompt being read
                emit(self.text_streamed, reply.conversation_id, event.event, ())
                return
            runs = self._recorder.add(event.event)
            emit(self.text_streamed, reply.conversation_id, event.event, runs)
        elif isinstance(event, Finished):
            log.info("reply finished: %s", event.result.stats.summary())
            if not self.tools.round_ended(event.result):
                self._finish(event.result)
        elif isinstance(event, Failed):
            log.warning("reply failed: %s", event.failure)
            self._finish(None, sentence(event.failure, Audience.WINDOW, log_path=self._engine.log_path))

    def _on_settings_changed(self, name: str, value: object) -> None:
        if name == "speculation":
            self._resume_speculation = bool(value)

    # -- the store, each write checked --------------------------------------------------

    def _write(self, action: Callable[[], object], *, changed: bool = False) -> bool:
        try:
            action()
        except ChatStoreError as exc:
            log.warning("chat store: %s", exc)
            emit(self.notice, str(exc))
            return False
        if changed:
            emit(self.conversations_changed)
        return True

    def _create(self, title: str) -> int | None:
        created: list[int] = []
        ok = self._write(lambda: created.append(self._store.create(title).id), changed=True)
        return created[0] if ok else None

    def _drop_from(self, message_id: int) -> bool:
        """Delete the message being edited and everything after it (gone already: nothing to do)."""
        try:
            self._store.message(message_id)
        except NotFoundError:
            return True
        return self._write(lambda: self._store.delete_messages_from(message_id))

    def _drop_last_exchange(self, cid: int, *, keep_user: bool) -> bool:
        """Delete the last user message (unless ``keep_user``) and everything after it."""
        messages = self._store.messages(cid)
        last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
        if last_user is None:
            return True
        start = last_user + 1 if keep_user else last_user
        if start >= len(messages):
            return True
        return self._write(lambda: self._store.delete_messages_from(messages[start].id))

