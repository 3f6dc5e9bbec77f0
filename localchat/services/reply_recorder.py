"""ReplyRecorder: the reply being written, its text as it streams, kept in the store as it goes.

A reply is saved while it streams: the first text at once, then at most every
``SAVE_INTERVAL_S`` seconds (a timer saves text that arrived after the last
save even if the engine falls silent), and at the end with its statistics.
Killing the app mid-reply keeps what the user saw, give or take the last two
seconds. A write that fails is remembered as a sentence for the reply's end,
never a lost reply: the text stays on screen.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, QTimer

from localchat.chat import ChatStoreError, ConversationStore, NotFoundError
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
        reply.drafted = concat_runs(reply.drafted, runs)
        wait = reply.saved_at + SAVE_INTERVAL_S - self._clock()
        if reply.message_id is None or wait <= 0:
            self._save_partial()
        elif not self._save_timer.isActive():
            self._save_timer.start(max(1, int(wait * 1000)))
        return runs

    def end(self, result: GenerationResult | None) -> tuple[Reply | None, str]:
        """Keep the reply with its statistics; the reply as kept and a sentence if it could not be."""
        reply, self.reply = self.reply, None
        self._save_timer.stop()
        if reply is None:
            return None, ""
        if result is not None and result.text and len(result.text) >= len(reply.text):
            reply.text, reply.drafted = result.text, result.drafted_runs
        return reply, self._save_final(reply, result)

    def _on_save_timer_timeout(self) -> None:
        self._save_partial()

    def _save_partial(self) -> None:
        """Keep the streamed text so far (the row is created with the first text)."""
        reply = self.reply
        self._save_timer.stop()
        if reply is None or len(reply.text) == reply.saved_len or not reply.text.strip():
            return
        reply.saved_at = self._clock()
        try:
            if reply.message_id is None:
                # The model's name goes with the first text, so a reply cut short by a crash keeps it.
                row = self._store.add_message(
                    reply.conversation_id, "assistant", reply.text,
                    stats={"model": reply.model} if reply.model else None, complete=False,
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

    def _save_final(self, reply: Reply, result: GenerationResult | None) -> str:
        stats = stats_json(result, reply.drafted, len(reply.text)) if result is not None else None
        if stats is not None and reply.model:
            stats["model"] = reply.model
        complete = result is not None and result.finish_reason is not FinishReason.CANCELLED
        try:
            if reply.message_id is not None:
                self._store.update_message(
                    reply.message_id, content=reply.text, complete=complete, stats=stats
                )
            elif reply.text.strip():
                row = self._store.add_message(
                    reply.conversation_id, "assistant", reply.text, stats=stats, complete=complete,
                    variant_of=reply.replaces,
                )
                reply.message_id = row.id
        except NotFoundError:
            return ""  # the user deleted the chat while its reply was being written
        except ChatStoreError as exc:
            log.warning("could not save the reply: %s", exc)
            return str(exc)
        return reply.save_problem
