"""ChatSession: the life of the conversations in the window, without a widget.

It owns what happens between the user's words and the engine's reply: which
conversation is current, sending, regenerating (the earlier answers are kept
in the store, and the one the user switches to is the one the next prompt
holds), editing the last message, deleting messages, stopping, a chat's own
settings and its export; the prompt (through ``chat.prompt_turns``); the store (every write
goes through here, and a write that fails is a sentence, never a lost
message); and when the engine is started again after a crash. What to load
again is the engine client's own ``config`` (one owner); ChatSession only
decides that the next message is the moment to do it.

A reply is saved while it streams: the first text at once, then at most every
``SAVE_INTERVAL_S`` seconds (a timer saves text that arrived after the last
save even if the engine falls silent), and at the end with its statistics.
Killing the app mid-reply keeps what the user saw, give or take the last two
seconds.

Signals (all on the GUI thread)::

    conversations_changed()           the list in the sidebar may differ (created, renamed, deleted)
    reply_started(int)                a reply began in this conversation
    text_streamed(int, object, object)  conversation id, TokenEvent, its drafted runs (checked)
    reply_finished(object)            ReplyEnd: the text, the result (None if it failed), a sentence
    notice(str)                       a sentence for the user (an empty one clears it)
    model_loading(str)                a load was asked for (the model's name, from the catalog)
    model_loaded(object)              EngineInfo
    model_load_failed(str)            a sentence
    engine_stopped(str)               a sentence: the engine process ended; chats are kept
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from PySide6.QtCore import QObject, QTimer, Signal

from localchat.catalog.names import shipped_model_name
from localchat.catalog.sizes import Fit, fits_in_memory, total_ram
from localchat.chat import (
    ChatStoreError,
    Conversation,
    ConversationStore,
    ExportError,
    Message,
    NotFoundError,
    export,
    prompt_turns,
)
from localchat.engine.rpc_wire import gone_worker
from localchat.engine.stats import GenerationStats
from localchat.engine.textruns import concat_runs, valid_runs
from localchat.engine.types import (
    ChatMessage,
    EngineConfig,
    EngineInfo,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    TokenEvent,
)
from localchat.services.qt_signals import emit
from localchat.services.requests import build_request
from localchat.settings import OPTIONS_BY_NAME, InvalidValueError, Value

if TYPE_CHECKING:
    from localchat.services.settings_service import SettingsService

log = logging.getLogger(__name__)

SAVE_INTERVAL_S = 2.0
# The settings a chat may hold its own value of (by option name), over the app's.
CHAT_OPTIONS = ("temperature", "max_reply_tokens")
NO_MODEL = "Load a model first: open a GGUF file or choose one in the model manager."


class EngineLike(Protocol):
    """What the session needs from services.EngineClient besides its signals."""

    @property
    def config(self) -> EngineConfig | None: ...
    def load(self, config: EngineConfig) -> None: ...
    def generate(self, request: GenerationRequest) -> object: ...
    def cancel(self) -> None: ...


@dataclass(frozen=True)
class ShownMessage:
    """A stored message as the chat view shows it, its statistics read back from JSON."""

    role: str
    content: str
    stats: GenerationStats | None
    finish_reason: FinishReason | None
    drafted_runs: tuple[int, ...]
    complete: bool
    model: str = ""  # the name of the model that wrote a reply ("" when not recorded)
    id: int | None = None  # the stored row (delete, copy, switch between answers)
    variant: tuple[int, int] = (1, 1)  # which of the answers to its message this one is, of how many


@dataclass(frozen=True)
class ReplyEnd:
    """How a reply ended: its text, the engine's result (None when it failed) and why, in words."""

    conversation_id: int
    text: str
    drafted_runs: tuple[int, ...]
    result: GenerationResult | None
    sentence: str = ""  # why it ended early, a save problem, the engine's notice; may be empty


@dataclass
class _Reply:
    conversation_id: int
    text: str = ""
    drafted: tuple[int, ...] = ()  # which characters came from accepted drafts
    message_id: int | None = None  # the stored row once the first text is saved
    saved_len: int = 0
    saved_at: float = 0.0
    save_problem: str = ""
    replaces: int | None = None  # regenerate: the answer this one joins as another variant


class ChatSession(QObject):
    conversations_changed = Signal()
    reply_started = Signal(int)
    text_streamed = Signal(int, object, object)
    reply_finished = Signal(object)
    notice = Signal(str)
    model_loading = Signal(str)
    model_loaded = Signal(object)
    model_load_failed = Signal(str)
    engine_stopped = Signal(str)

    def __init__(
        self,
        store: ConversationStore,
        engine: QObject,
        settings: SettingsService,
        *,
        max_tokens: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        model_name: Callable[[str], str] = shipped_model_name,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._store = store
        self._engine_object = engine
        self._engine = cast(EngineLike, engine)
        self._settings = settings
        self._max_tokens = max_tokens  # None: the max_reply_tokens setting (or the chat's own)
        self._clock = clock
        self._model_name = model_name
        self._current: int | None = None
        self._reply: _Reply | None = None
        self._editing: int | None = None  # the user message a send replaces (with all after it)
        self._info: EngineInfo | None = None
        self._loading = False
        self._dead = False
        # The user turned speculation on since the last reply: a chat that paused it tries again.
        self._resume_speculation = False
        self._save_timer = QTimer(self)
        self._save_timer.setSingleShot(True)
        self._connect_signals()

    def _connect_signals(self) -> None:
        engine: Any = self._engine_object
        engine.load_started.connect(self._on_engine_load_started)
        engine.loaded.connect(self._on_engine_loaded)
        engine.load_failed.connect(self._on_engine_load_failed)
        engine.tokens_received.connect(self._on_engine_tokens_received)
        engine.generation_finished.connect(self._on_engine_generation_finished)
        engine.generation_failed.connect(self._on_engine_generation_failed)
        engine.engine_died.connect(self._on_engine_engine_died)
        self._save_timer.timeout.connect(self._on_save_timer_timeout)
        settings: Any = self._settings
        settings.changed.connect(self._on_settings_changed)

    # -- state ------------------------------------------------------------------------

    @property
    def current_id(self) -> int | None:
        """The conversation the window shows (None: a new chat not yet written)."""
        return self._current

    @property
    def generating(self) -> bool:
        return self._reply is not None

    @property
    def reply_conversation_id(self) -> int | None:
        return self._reply.conversation_id if self._reply is not None else None

    @property
    def reply_text(self) -> tuple[str, tuple[int, ...]]:
        """The reply in progress so far, with its drafted runs (empty when none)."""
        return (self._reply.text, self._reply.drafted) if self._reply is not None else ("", ())

    @property
    def editing(self) -> bool:
        return self._editing is not None

    @property
    def engine_info(self) -> EngineInfo | None:
        return self._info

    @property
    def target_name(self) -> str:
        """The loaded target's name as the window shows it (catalog name and quantization)."""
        return self._model_name(self._info.target.path) if self._info is not None else ""

    @property
    def draft_name(self) -> str:
        """The loaded draft model's name as the window shows it; "" when there is none."""
        draft = self._info.draft if self._info is not None else None
        return self._model_name(draft.path) if draft is not None else ""

    @property
    def engine_config(self) -> EngineConfig | None:
        """What the engine last loaded (the engine client keeps it; the benchmark reads it)."""
        return self._engine.config

    # -- conversations ----------------------------------------------------------------

    def conversations(self, search: str = "") -> list[Conversation]:
        return self._store.search(search) if search.strip() else self._store.list_conversations()

    def messages(self, conversation_id: int) -> list[ShownMessage]:
        """The user and assistant messages of a conversation, as the chat view shows them.

        The reply being written is left out: its saved copy lags behind the text
        the view streams (``reply_text``).
        """
        reply = self._reply
        hidden = {reply.message_id, reply.replaces} if reply is not None else set()
        every = self._store.messages(conversation_id, every=True)
        groups: dict[int, list[int]] = {}
        for m in every:
            if m.variant_group is not None and m.id not in hidden:
                groups.setdefault(m.variant_group, []).append(m.id)
        shown: list[ShownMessage] = []
        for m in every:
            if not m.shown or m.id in hidden or m.role not in ("user", "assistant"):
                continue
            if m.role == "assistant" and not m.content.strip():
                continue
            ids = groups.get(m.variant_group, [m.id]) if m.variant_group is not None else [m.id]
            shown.append(dataclasses.replace(_shown(m), variant=(ids.index(m.id) + 1, len(ids))))
        return shown

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
        if self._reply is not None and self._reply.conversation_id == conversation_id:
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

    def chat_options(self, conversation_id: int) -> dict[str, Value]:
        """The chat's own values of CHAT_OPTIONS; one that no longer fits its option is left out."""
        options: dict[str, Value] = {}
        for name, value in self._store.get(conversation_id).options.items():
            if name not in CHAT_OPTIONS:
                continue
            try:
                options[name] = OPTIONS_BY_NAME[name].validate(value)
            except InvalidValueError as exc:
                log.warning("chat %s: %s; the app's setting is used", conversation_id, exc)
        return options

    def set_chat_options(self, conversation_id: int, options: dict[str, Value]) -> bool:
        """Keep the chat's own values (only those given; {} means the app's settings again)."""
        checked: dict[str, Value] = {}
        for name, value in options.items():
            if name not in CHAT_OPTIONS:
                raise ValueError(f"{name} is not a setting a chat can hold")
            try:
                checked[name] = OPTIONS_BY_NAME[name].validate(value)
            except InvalidValueError as exc:
                emit(self.notice, str(exc))
                return False
        return self._write(lambda: self._store.set_options(conversation_id, checked))

    def reply_settings(self, conversation_id: int | None) -> tuple[float, int]:
        """The temperature and reply length the next reply in this chat is written with."""
        own = self.chat_options(conversation_id) if conversation_id is not None else {}
        temperature = own.get("temperature", self._settings.temperature)
        length = own.get("max_reply_tokens", self._max_tokens or self._settings.max_reply_tokens)
        return float(temperature), int(length)

    def export(self, conversation_id: int, kind: str, path: Path) -> str:
        """Write a chat to ``path`` as ``kind`` ("markdown" or "json"); "" when done, else a sentence.

        The reply being written is left out, as in ``messages``: its saved copy lags behind.
        """
        live = self._reply.message_id if self._reply is not None else None
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
            created = self._create("New chat")
            if created is None:
                return False
            self._current = created
        cid = self._current
        if text == self.system_prompt(cid):
            return True
        return self._write(lambda: self._store.set_system_prompt(cid, text))

    # -- the conversation's life --------------------------------------------------------

    def _without_gone_workers(self, config: EngineConfig) -> EngineConfig:
        """After a crash with workers: when one is gone and the pair fits in this computer's memory,
        run on this computer alone (and say so) rather than fail to load; else keep the config."""
        if not config.rpc_servers:
            return config
        gone = gone_worker(config.rpc_servers)
        if gone is None:
            return config
        size = sum(Path(p).stat().st_size for p in (config.target_path, config.draft_path or "")
                   if p and Path(p).is_file())
        if fits_in_memory(size, total_ram()) is not Fit.YES:
            return config  # the load names the missing worker
        emit(self.notice, f"The worker {gone} is gone; the model runs on this computer alone for now "
                          "(Settings → Workers to change it).")
        return dataclasses.replace(config, rpc_servers=(), tensor_split=())

    def load_model(self, config: EngineConfig) -> None:
        """Ask the engine to load a model; model_loaded or model_load_failed answers."""
        self._loading = True
        emit(self.model_loading, self._model_name(config.target_path))
        self._engine.load(config)

    def send(self, text: str) -> bool:
        """Send ``text`` in the current chat (a new chat when there is none).

        False when nothing was sent: no text, a reply running, no model, or the
        store could not keep the message (``notice`` says why; the caller keeps
        the typed text).
        """
        text = text.strip()
        if not text or self.generating:
            return False
        if self._info is None and not self._loading and not self._dead:
            emit(self.notice, NO_MODEL)
            return False
        cid = self._current
        if cid is None:
            cid = self._create(_title_from(text))
            if cid is None:
                return False
            self._current = cid
        if self._editing is not None and not self._drop_from(self._editing):
            return False
        if not self._write(lambda: self._store.add_message(cid, "user", text), changed=True):
            return False
        self._editing = None
        self._start_reply(cid)
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
        if self.generating:
            log.info("stop requested")
            self._engine.cancel()

    # -- replies --------------------------------------------------------------------

    def _start_reply(self, cid: int, *, replaces: int | None = None) -> None:
        history = [m for m in self._store.messages(cid) if m.id != replaces]
        turns = prompt_turns(self.system_prompt(cid), history)
        temperature, max_tokens = self.reply_settings(cid)
        request = build_request(
            self._settings,
            [ChatMessage(t.role, t.content) for t in turns],
            speculation_enabled=self._settings.speculation,
            max_tokens=max_tokens,
            temperature=temperature,
            session=str(cid),  # adaptive speculation learns per conversation
            resume_speculation=self._resume_speculation,
        )
        self._resume_speculation = False
        self._reply = _Reply(cid, replaces=replaces)
        emit(self.reply_started, cid)
        if self._dead or (self._info is None and not self._loading):
            # After a crash the next message is the moment to start again, with what the engine last loaded.
            config = self._engine.config
            if config is None:
                self._finish(None, "Load a model first.")
                return
            log.info("starting a new engine")
            self._dead = False
            config = self._without_gone_workers(config)
            self.load_model(config)
            if self._reply is None:  # the load failed at once and ended the reply
                return
        self._engine.generate(request)

    def _save_partial(self) -> None:
        """Keep the streamed text so far (the row is created with the first text)."""
        reply = self._reply
        self._save_timer.stop()
        if reply is None or len(reply.text) == reply.saved_len or not reply.text.strip():
            return
        reply.saved_at = self._clock()
        try:
            if reply.message_id is None:
                # The model's name goes with the first text, so a reply cut short by a crash keeps it.
                model = {"model": self.target_name} if self.target_name else None
                row = self._store.add_message(
                    reply.conversation_id, "assistant", reply.text, stats=model, complete=False,
                    variant_of=reply.replaces,
                )
                reply.message_id = row.id
            else:
                self._store.update_message(reply.message_id, content=reply.text)
        except NotFoundError:
            reply.save_problem = ""  # the user deleted the chat while its reply was being written
            return
        except ChatStoreError as exc:
            log.warning("could not save the streamed reply: %s", exc)
            reply.save_problem = str(exc)
            return
        reply.saved_len = len(reply.text)

    def _finish(self, result: GenerationResult | None, sentence: str = "") -> None:
        """End the reply: keep its text with its statistics, then tell the window."""
        reply, self._reply = self._reply, None
        self._save_timer.stop()
        if reply is None:
            return
        if result is not None and result.text and len(result.text) >= len(reply.text):
            reply.text, reply.drafted = result.text, result.drafted_runs
        problem = self._save_final(reply, result)
        notices = [s for s in (sentence, result.notice if result else "", problem) if s]
        end = ReplyEnd(reply.conversation_id, reply.text, reply.drafted, result, " ".join(notices))
        emit(self.reply_finished, end)

    def _save_final(self, reply: _Reply, result: GenerationResult | None) -> str:
        stats = stats_json(result, reply.drafted, len(reply.text)) if result is not None else None
        if stats is not None and self.target_name:
            stats["model"] = self.target_name
        complete = result is not None and result.finish_reason is not FinishReason.CANCELLED
        try:
            if reply.message_id is not None:
                self._store.update_message(
                    reply.message_id, content=reply.text, complete=complete, stats=stats
                )
            elif reply.text.strip():
                self._store.add_message(
                    reply.conversation_id, "assistant", reply.text, stats=stats, complete=complete,
                    variant_of=reply.replaces,
                )
        except NotFoundError:
            return ""  # the user deleted the chat while its reply was being written
        except ChatStoreError as exc:
            log.warning("could not save the reply: %s", exc)
            return str(exc)
        return reply.save_problem

    # -- engine slots -----------------------------------------------------------------

    def _on_engine_load_started(self) -> None:
        self._loading = True

    def _on_engine_loaded(self, info: EngineInfo) -> None:
        log.info("loaded %s on %s", info.target.name, info.backend)
        self._loading = False
        self._dead = False
        self._info = info
        config = self._engine.config
        if config is not None:
            self._settings.set("last_model_path", config.target_path)
            self._settings.set("last_draft_path", config.draft_path or "")
        emit(self.model_loaded, info)

    def _on_engine_load_failed(self, sentence: str) -> None:
        log.warning("load failed: %s", sentence)
        self._loading = False
        self._info = None
        if self._reply is not None:
            self._finish(None, sentence)
        emit(self.model_load_failed, sentence)

    def _on_engine_tokens_received(self, event: TokenEvent) -> None:
        reply = self._reply
        if reply is None:
            return
        if not event.text and not event.n_tokens:  # the prompt being read: shown, nothing to save
            emit(self.text_streamed, reply.conversation_id, event, ())
            return
        runs = event.drafted_runs if sum(event.drafted_runs) == len(event.text) else (len(event.text),)
        reply.text += event.text
        reply.drafted = concat_runs(reply.drafted, runs)
        emit(self.text_streamed, reply.conversation_id, event, runs)
        wait = reply.saved_at + SAVE_INTERVAL_S - self._clock()
        if reply.message_id is None or wait <= 0:
            self._save_partial()
        elif not self._save_timer.isActive():
            self._save_timer.start(max(1, int(wait * 1000)))

    def _on_settings_changed(self, name: str, value: object) -> None:
        if name == "speculation":
            self._resume_speculation = bool(value)

    def _on_save_timer_timeout(self) -> None:
        self._save_partial()

    def _on_engine_generation_finished(self, result: GenerationResult) -> None:
        if self._reply is None:
            return
        log.info("reply finished: %s", result.stats.summary())
        self._finish(result)

    def _on_engine_generation_failed(self, sentence: str) -> None:
        log.warning("generation failed: %s", sentence)
        self._finish(None, sentence)

    def _on_engine_engine_died(self, sentence: str) -> None:
        log.warning("engine died: %s", sentence)
        self._dead = True
        self._loading = False
        self._info = None
        text = sentence or "The engine stopped unexpectedly."
        if "next message" not in text:
            text += " Your chats are safe; the next message starts a new engine."
        if self._reply is not None:
            self._finish(None, text)
        emit(self.engine_stopped, text)

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


def stats_json(result: GenerationResult, drafted: tuple[int, ...], length: int) -> dict[str, Any]:
    """A reply's statistics as the store keeps them (read back by ``_shown``)."""
    stats = dataclasses.asdict(result.stats)
    stats["finish_reason"] = result.finish_reason.value
    stats["drafter"] = result.speculation.drafter if result.speculation.active else "off"
    if any(drafted[1::2]) and sum(drafted) == length:
        stats["drafted_runs"] = list(drafted)
    return stats


def _shown(message: Message) -> ShownMessage:
    stored = message.stats or {}
    known = {f.name for f in dataclasses.fields(GenerationStats)}
    stats: GenerationStats | None = None
    values: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in stored.items() if k in known
    }
    if values:  # a reply still being written has only its model's name
        try:
            stats = GenerationStats(**values)
        except (TypeError, ValueError):
            stats = None
    try:
        reason: FinishReason | None = FinishReason(stored.get("finish_reason"))
    except ValueError:
        reason = None
    runs = valid_runs(stored.get("drafted_runs"))
    model = stored.get("model")
    return ShownMessage(
        message.role, message.content, stats, reason, runs, message.complete,
        model if isinstance(model, str) else "",
        message.id,
    )


def _title_from(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "New chat"
    return line if len(line) <= 48 else line[:47].rstrip() + "…"
