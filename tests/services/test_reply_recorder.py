"""services.reply_recorder: a streaming reply is saved with its first text, then at most every
interval, and at its end with its statistics; a failed write is a sentence, the text is kept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localchat.chat import ConversationStore
from localchat.engine.stats import GenerationStats
from localchat.engine.types import FinishReason, GenerationResult, SpeculationState, TokenEvent
from localchat.services.reply_recorder import SAVE_INTERVAL_S, ReplyRecorder

ON = SpeculationState(active=True, drafter="n-gram")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ConversationStore]:
    with ConversationStore(tmp_path / "chats.sqlite3") as s:
        yield s


def _event(text: str, runs: tuple[int, ...] = ()) -> TokenEvent:
    return TokenEvent(text, 1, 0, GenerationStats(generated_tokens=1), ON, runs)


def test_saved_with_the_first_text_then_on_the_interval_then_whole(qtbot, store: ConversationStore) -> None:
    now = [100.0]
    recorder = ReplyRecorder(store, lambda: now[0])
    cid = store.create("chat").id
    store.add_message(cid, "user", "count")
    recorder.begin(cid, "Model · Q4")
    assert recorder.add(_event("one ", (2, 2))) == (2, 2)
    first = store.messages(cid)[-1]
    assert first.content == "one " and first.stats == {"model": "Model · Q4"}
    now[0] += 0.5
    assert recorder.add(_event("two ", (1, 1))) == (4,)  # runs that do not add up count as the target's
    assert store.messages(cid)[-1].content == "one "
    now[0] += SAVE_INTERVAL_S
    recorder.add(_event("three"))
    assert store.messages(cid)[-1].content == "one two three"
    result = GenerationResult("one two three", FinishReason.STOP, GenerationStats(generated_tokens=3), ON)
    reply, problem = recorder.end(result)
    assert problem == "" and reply is not None and recorder.reply is None
    row = store.messages(cid)[-1]
    assert row.id == reply.message_id and row.complete and row.stats is not None
    assert row.stats["finish_reason"] == "stop" and row.stats["model"] == "Model · Q4"


def test_a_full_disk_is_a_sentence_and_the_text_is_kept(qtbot, store: ConversationStore) -> None:
    recorder = ReplyRecorder(store, lambda: 0.0)
    cid = store.create("chat").id
    recorder.begin(cid, "")
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages + 1}")
    recorder.add(_event("x" * 200_000))
    reply, problem = recorder.end(None)
    assert "disk is full" in problem and reply is not None and reply.text == "x" * 200_000
