"""ReplyRecorder: the reply being written, its text as it streams, kept in the store as it goes.

A reply is saved while it streams: the first text at once, then at most every
``SAVE_INTERVAL_S`` seconds (a timer saves text that arrived after the last
save even if the engine falls silent), and at the end with its statistics.
Killing the app mid-reply keeps what the user saw, give or take the last two
seconds. A write that fails is remembered as a sentence for the reply's end,
never a lost reply: the text stays on screen.

A reply that used tools is one stored message too: each round the model ended
with tool calls (its text, thinking, figures and calls) is kept with it as it
happens (``end_round``, ``set_calls``), and the text streamed after the
results is the answer (see chat/rounds.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from PySide6.QtCore import QObject, QTimer

from localchat.chat import ChatStoreError, ConversationStore, NotFoundError
from localchat.chat.rounds import ReplyTools, ToolCallRecord, ToolRound
from localchat.engine.textruns import concat_runs
from localchat.engine.types import FinishReason, GenerationResult, TokenEvent
from localchat.services.shown import stats_json

log = logging.getLogger(__name__)

SAVE_INTERVAL_S = 2.0


@dataclass
class Reply:
    conversation_id: int
    model: str  # the name of the model writing it, kept with its first text
    text: str = ""
    drafted: tuple[int, ...] = ()  # which characters came from accepted drafts
    message_id: int | None = None  # the stored row once the first text is saved
    saved_len: int = 0
    saved_at: float = 0.0
    save_problem: str = ""
    replaces: int | None = None  # regenerate: the answer this one joins as another variant
    reasoning: str = ""  # the thinking of the round being written
    rounds: list[ToolRound] = field(default_factory=list)  # the rounds that ended in tool calls
    notes: list[str] = field(default_factory=list)  # sentences said along the way
    tools_saved: ReplyTools = field(default_factory=ReplyTools)

    @property
    def tools(self) -> ReplyTools:
        return ReplyTools(tuple(self.rounds), tuple(self.notes))


class ReplyRecorder(QObject):
    def __init__(self, store: ConversationStore, clock: Callable[[], float],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._store = store
        self._clock = clock
        self.reply: Reply | None = None
        self._save_timer = QTimer(self)
        self._save_timer.setSingleShot(True)
        self._save_timer.timeout.connect(self._on_save_timer_timeout)

    def begin(self, conversation_id: int, model: str, replaces: int | None = None) -> None:
        self.reply = Reply(conversation_id, model, replaces=replaces)

    def add(self, event: TokenEvent) -> tuple[int, ...]:
        """Take streamed text; returns its drafted runs (checked against the text)."""
        reply = self.reply
        assert reply is not None
        runs = event.drafted_runs if sum(event.drafted_runs) == len(event.text) else (len(event.text),)
        reply.text += event.text
        reply.reasoning += event.reasoning
        reply.drafted = concat_runs(reply.drafted, runs)
        wait = reply.saved_at + SAVE_INTERVAL_S - self._clock()
        if reply.message_id is None or wait <= 0:
            self._save_partial()
        elif not self._save_timer.isActive():
            self._save_timer.start(max(1, int(wait * 1000)))
        return runs

    def end_round(self, result: GenerationResult, calls: tuple[ToolCallRecord, ...]) -> None:
        """The model ended this round with tool calls: keep its text, thinking and figures with the calls,
        and start the next round's text empty."""
        reply = self.reply
        assert reply is not None
        text = result.text if len(result.text) >= len(reply.text) else reply.text
        reasoning = result.reasoning or reply.reasoning
        reply.rounds.append(ToolRound(text, calls, reasoning, stats_json(result, (), 0)))
        reply.text, reply.drafted, reply.reasoning, reply.saved_len = "", (), "", 0
        self._save_partial()

    def set_calls(self, calls: tuple[ToolCallRecord, ...]) -> None:
        """The last round's calls as they stand now (their results, once they have them)."""
        reply = self.reply
        if reply is None or not reply.rounds:
            return
        reply.rounds[-1] = replace(reply.rounds[-1], calls=calls)
        self._save_partial()

    def add_note(self, sentence: str) -> None:
        """A sentence said while the reply is written (a server that failed), kept with the reply."""
        reply = self.reply
        if reply is None or not sentence or sentence in reply.notes:
            return
        reply.notes.append(sentence)
        self._save_partial()

    def end(self, result: GenerationResult | None) -> tuple[Reply | None, str]:
        """Keep the reply with its statistics; the reply as kept and a sentence if it could not be."""
        reply, self.reply = self.reply, None
        self._save_timer.stop()
        if reply is None:
            return None, ""
        if result is not None and result.text and len(result.text) >= len(reply.text):
            reply.text, reply.drafted = result.text, result.drafted_runs
        if result is not None and result.reasoning:
            reply.reasoning = result.reasoning
        return reply, self._save_final(reply, result)

    def _on_save_timer_timeout(self) -> None:
        self._save_partial()

    def _save_partial(self) -> None:
        """Keep the streamed text so far, and the tool rounds (the row is created with the first of them)."""
        reply = self.reply
        self._save_timer.stop()
        if reply is None:
            return
        tools = reply.tools
        text_new = len(reply.text) != reply.saved_len and bool(reply.text.strip())
        if not text_new and tools == reply.tools_saved:
            return
        reply.saved_at = self._clock()
        try:
            if reply.message_id is None:
                # The model's name goes with the first text, so a reply cut short by a crash keeps it.
                row = self._store.add_message(
                    reply.conversation_id, "assistant", reply.text,
                    stats={"model": reply.model} if reply.model else None, complete=False,
                    variant_of=reply.replaces, tools=tools,
                )
                reply.message_id = row.id
            else:
                self._store.update_message(reply.message_id, content=reply.text, tools=tools)
        except NotFoundError:
            reply.save_problem = ""  # the user deleted the chat while its reply was being written
            return
        except ChatStoreError as exc:
            log.warning("could not save the streamed reply: %s", exc)
            reply.save_problem = str(exc)
            return
        reply.saved_len = len(reply.text)
        reply.tools_saved = tools

    def _save_final(self, reply: Reply, result: GenerationResult | None) -> str:
        stats = stats_json(result, reply.drafted, len(reply.text)) if result is not None else None
        if stats is not None and reply.model:
            stats["model"] = reply.model
        complete = result is not None and result.finish_reason is not FinishReason.CANCELLED
        try:
            if reply.message_id is not None:
                self._store.update_message(
                    reply.message_id, content=reply.text, complete=complete, stats=stats, tools=reply.tools,
                    reasoning=reply.reasoning,
                )
            elif reply.text.strip() or reply.tools:
                row = self._store.add_message(
                    reply.conversation_id, "assistant", reply.text, stats=stats, complete=complete,
                    variant_of=reply.replaces, tools=reply.tools, reasoning=reply.reasoning,
                )
                reply.message_id = row.id
        except NotFoundError:
            return ""  # the user deleted the chat while its reply was being written
        except ChatStoreError as exc:
            log.warning("could not save the reply: %s", exc)
            return str(exc)
        return reply.save_problem
