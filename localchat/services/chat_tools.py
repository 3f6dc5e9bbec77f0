"""ChatTools: the rounds of the reply being written, and whether a chat offers tools.

ChatSession hands each reply here as a ``Turn`` (its prompt and sampling) once it has begun; this
module sends its rounds to the engine and ends it between rounds. With tool servers (``mcp``), a reply
may take several rounds: the chat's tools go to the model with the message (once the servers it
needs have started), a reply that ends in tool calls hands them to the ``ToolLoop`` (which asks the
user and runs them), and their results go back to the model in the next round, at most
``tool_rounds_max`` rounds a message. The rounds are kept with the reply as they happen
(ReplyRecorder), and Stop ends whichever part is running: the round, the question, the calls. Without
tool servers, or with tools off in the chat, a reply is one round.

It also owns each chat's choice of tools (``availability``, ``set_for_chat``; a new chat's choice is
kept until it is written).

Signals (all on the GUI thread)::

    round_started(int)           the model starts writing round N (1, 2, ...) of the reply
    changed(int, ReplyTools)     the reply's tool rounds as they stand (calls asked, running)
    ask(ToolAsk)                 the user is asked whether a call may run (``answer``)
    ask_withdrawn()              that question is withdrawn (Stop)
    activity(str)                what the tools are doing, for the status bar ("" when nothing)
    ended(object, str)           the reply ends between rounds: its result (None: none) and why; the
                                 session finishes it
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from localchat.chat.rounds import ReplyTools, ToolCallRecord
from localchat.engine.types import ChatMessage, FinishReason, GenerationResult, Tool, ToolCall
from localchat.services.qt_signals import emit
from localchat.services.requests import build_request
from localchat.services.tool_loop import ToolAnswer, ToolLoop
from localchat.settings import Value

if TYPE_CHECKING:
    from localchat.services.chat_options import ChatOptions
    from localchat.services.engine_port import EnginePort
    from localchat.services.loaded_model import LoadedModel
    from localchat.services.mcp_service import McpService, ToolOffer
    from localchat.services.reply_recorder import ReplyRecorder
    from localchat.services.settings_service import SettingsService

NOT_RUN = "Not run: the reply ended before this call ran."


class Stage(enum.Enum):
    STARTING = "starting"  # the tool servers it needs are starting
    WRITING = "writing"  # the model writes a round
    CALLING = "calling"  # the round's tool calls are asked about and run


@dataclass
class Turn:
    """The reply being written, as the engine and the tools see it."""

    conversation_id: int
    messages: list[ChatMessage]
    temperature: float
    max_tokens: int
    stage: Stage = Stage.WRITING
    offer: ToolOffer | None = None
    ticket: int = 0
    rounds: int = 0  # rounds whose calls ran
    stopping: bool = False
    last: GenerationResult | None = None  # the last round's result (its figures end a stopped reply)
    resume: bool = False
    live: tuple[ToolCallRecord, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class ToolsAvailability:
    """Whether a chat offers tools: ``available`` (there is anything to offer, to a model that can use
    it), ``on`` (the chat's choice), and the sentence that says why not."""

    available: bool
    on: bool
    reason: str = ""
    servers: int = 0


class ChatTools(QObject):
    round_started = Signal(int)
    changed = Signal(int, object)
    ask = Signal(object)
    ask_withdrawn = Signal()
    activity = Signal(str)
    ended = Signal(object, str)

    def __init__(
        self,
        engine: EnginePort,
        settings: SettingsService,
        options: ChatOptions,
        model: LoadedModel,
        recorder: ReplyRecorder,
        mcp: McpService | None,
        *,
        current: Callable[[], int | None],
        set_options: Callable[[int, dict[str, Value], tuple[str, ...]], bool],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._engine = engine
        self._settings = settings
        self._options = options
        self._model = model
        self._recorder = recorder
        self.mcp = mcp
        self._current = current  # the chat the window shows (None: a new chat not yet written)
        self._set_options = set_options  # keeps a chat's own values (a failed write is the session's notice)
        self._loop = ToolLoop(mcp, self) if mcp is not None else None
        self.turn: Turn | None = None
        self._new_chat: bool | None = None  # the Tools button's choice for a chat not yet written
        if mcp is not None and self._loop is not None:
            mcp.tools_ready.connect(self._on_mcp_tools_ready)
            self._loop.ask.connect(self.ask)
            self._loop.ask_withdrawn.connect(self.ask_withdrawn)
            self._loop.activity.connect(self.activity)
            self._loop.calls_changed.connect(self._on_loop_calls_changed)
            self._loop.round_done.connect(self._on_loop_round_done)

    # -- a chat's tools ------------------------------------------------------------------

    def availability(self, conversation_id: int | None = None) -> ToolsAvailability:
        """Whether the chat (the current one by default) offers tools, and why not when it cannot."""
        cid = self._current() if conversation_id is None else conversation_id
        on = self._options.tools_on(cid) if cid is not None else (
            self._new_chat if self._new_chat is not None else self._settings.tools_in_chats)
        if self.mcp is None:
            return ToolsAvailability(False, on, "")
        self.mcp.reload_if_changed()  # mcp.json edited by hand since: a stat, then the file if it changed
        servers = len(self.mcp.enabled)
        if not servers:
            return ToolsAvailability(False, on, "No tool server is switched on: add one in Settings → Tools.")
        info = self._engine.state.info
        if info is not None and not info.target.tool_use and not self._settings.tools_for_untrained_models:
            return ToolsAvailability(False, on, (
                f"{self._model.target_name} was not trained to call tools: its chat template has none. "
                "Settings → Tools can offer them anyway."), servers)
        return ToolsAvailability(True, on, "", servers)

    def set_for_chat(self, on: bool) -> bool:
        """Turn tools on or off for the current chat (for a new chat: once it is written)."""
        cid = self._current()
        if cid is None:
            self._new_chat = on
            return True
        return self._set_options(cid, {"tools_in_chats": on}, ("tools_in_chats",))

    def chat_written(self) -> None:
        """The new chat was written: it keeps the choice made for it before (if one was)."""
        if self._new_chat is not None:
            self.set_for_chat(self._new_chat)
            self._new_chat = None

    def answer(self, call_id: str, answer: ToolAnswer) -> None:
        """The user's answer to ``ask``: run once, always for this tool, or deny."""
        if self._loop is not None:
            self._loop.answer(call_id, answer)

    # -- the reply's rounds --------------------------------------------------------------

    def begin(self, turn: Turn) -> None:
        """Write the reply ``turn``: its first round goes to the engine once the servers it needs run."""
        self.turn = turn
        tools = self.availability(turn.conversation_id)
        if self.mcp is not None and tools.available and tools.on:
            turn.stage = Stage.STARTING
            if not self.mcp.all_running():
                emit(self.activity, "Starting tool servers…")
            self.mcp.timeout_s = float(self._settings.tool_timeout_s)
            turn.ticket = self.mcp.prepare()
        else:
            self._generate(turn)

    def _generate(self, turn: Turn) -> None:
        """Send the turn's next round to the engine."""
        offered = turn.offer.tools if turn.offer is not None else ()
        request = build_request(
            self._model.reader(),
            turn.messages,
            speculation_enabled=self._settings.speculation,
            max_tokens=turn.max_tokens,
            temperature=turn.temperature,
            session=str(turn.conversation_id),  # adaptive speculation learns per conversation
            resume_speculation=turn.resume,
            tools=[Tool(t.name, t.spec.description, t.spec.schema) for t in offered],
            separate_reasoning=True,
        )
        turn.resume = False
        turn.stage = Stage.WRITING
        emit(self.round_started, turn.rounds + 1)
        self._engine.generate(request)

    def round_ended(self, result: GenerationResult) -> bool:
        """A round finished: True when it ended in tool calls, which are taken from here (asked about
        and run, or refused past the rounds a message may use); False when the reply ends with it."""
        turn = self.turn
        if (turn is None or turn.offer is None or not result.tool_calls
                or result.finish_reason is not FinishReason.TOOL_CALLS):
            return False
        assert self._loop is not None
        turn.last = result
        placeholders = tuple(ToolCallRecord(c.id, c.name, c.arguments, result=NOT_RUN, status="not_run")
                             for c in result.tool_calls)
        self._recorder.end_round(result, placeholders)
        limit = self._settings.tool_rounds_max
        if turn.rounds >= limit:
            self._emit_changed(turn)
            rounds = f"{limit} round{'s' if limit != 1 else ''}"
            why = (f"The model asked for tools again after {rounds}, the most one message may use "
                   "(Settings → Tools), so they were not run.")
            self._recorder.add_note(why)
            emit(self.ended, replace(result, text="", drafted_runs=(), reasoning=""), why)
            return True
        turn.stage = Stage.CALLING
        self._loop.run(result.tool_calls, turn.offer, self._result_chars())
        return True

    def cancel(self) -> bool:
        """Stop the servers starting or the tool calls (True); False when the engine writes a round."""
        turn = self.turn
        if turn is not None and turn.stage is Stage.CALLING and self._loop is not None:
            turn.stopping = True
            self._loop.cancel()
        elif turn is not None and turn.stage is Stage.STARTING:
            turn.ticket = -1
            emit(self.ended, self._stopped(turn), "")
        else:
            return False
        return True

    def end(self) -> None:
        """The reply ends: its calls still running are cancelled, and the status bar is told."""
        turn, self.turn = self.turn, None
        if turn is not None and turn.stage is Stage.CALLING and self._loop is not None:
            self._loop.cancel()
        emit(self.activity, "")

    def _on_mcp_tools_ready(self, ticket: int, offer: ToolOffer) -> None:
        turn = self.turn
        if turn is None or turn.stage is not Stage.STARTING or ticket != turn.ticket:
            return
        for note in offer.notes:
            self._recorder.add_note(note)
        turn.offer = offer if offer.tools else None
        emit(self.activity, "")
        self._emit_changed(turn)
        self._generate(turn)

    def _on_loop_calls_changed(self, records: tuple[ToolCallRecord, ...]) -> None:
        turn = self.turn
        if turn is not None and turn.stage is Stage.CALLING:
            turn.live = records
            self._emit_changed(turn)

    def _on_loop_round_done(self, records: tuple[ToolCallRecord, ...]) -> None:
        turn = self.turn
        reply = self._recorder.reply
        if turn is None or reply is None or turn.stage is not Stage.CALLING:
            return
        self._recorder.set_calls(records)
        turn.live = ()
        self._emit_changed(turn)
        if turn.stopping:
            emit(self.ended, self._stopped(turn), "")
            return
        turn.rounds += 1
        text = reply.rounds[-1].text if reply.rounds else ""
        turn.messages.append(ChatMessage("assistant", text, tool_calls=tuple(
            ToolCall(c.id, c.name, c.arguments) for c in records)))
        turn.messages += [ChatMessage("tool", c.result, tool_call_id=c.id, name=c.name) for c in records]
        self._generate(turn)

    def _stopped(self, turn: Turn) -> GenerationResult | None:
        """How a reply stopped between rounds ends: as stopped, with the last round's figures."""
        if turn.last is None:
            return None
        return replace(turn.last, text="", drafted_runs=(), reasoning="", tool_calls=(),
                       finish_reason=FinishReason.CANCELLED)

    def _result_chars(self) -> int:
        """The most characters of one tool result the model reads: about half its context window."""
        info = self._engine.state.info
        n_ctx = info.n_ctx if info is not None else 4096
        return max(2000, n_ctx * 3 // 2)

    def _emit_changed(self, turn: Turn) -> None:
        reply = self._recorder.reply
        if reply is None:
            return
        tools = reply.tools
        if turn.live and tools.rounds:
            tools = ReplyTools((*tools.rounds[:-1], replace(tools.rounds[-1], calls=turn.live)), tools.notes)
        emit(self.changed, turn.conversation_id, tools)
