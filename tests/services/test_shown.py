"""services.shown: a reply's statistics go into the store as JSON and come back as they went in."""

from __future__ import annotations

from pathlib import Path

from localchat.chat import ConversationStore
from localchat.engine.stats import GenerationStats
from localchat.engine.types import FinishReason, GenerationResult, SpeculationState
from localchat.services.shown import shown, shown_messages, stats_json


def test_statistics_round_trip_through_the_store(tmp_path: Path) -> None:
    stats = GenerationStats(generated_tokens=12, generation_seconds=0.5, verify_passes=5, drafted=12,
                            accepted=7, drafted_per_position=(5, 4), accepted_per_position=(4, 3))
    result = GenerationResult("ab cd", FinishReason.LENGTH, stats, SpeculationState(True, "n-gram"))
    kept = stats_json(result, (2, 3), 5)
    assert kept["drafter"] == "n-gram" and kept["drafted_runs"] == [2, 3]
    with ConversationStore(tmp_path / "c.sqlite3") as store:
        cid = store.create("t").id
        row = store.add_message(cid, "assistant", "ab cd", stats={**kept, "model": "M"})
        message = shown(row, (2, 3))
    assert message.stats == stats and message.finish_reason is FinishReason.LENGTH
    assert message.drafted_runs == (2, 3) and message.model == "M" and message.variant == (2, 3)


def test_what_cannot_be_read_back_is_left_out(tmp_path: Path) -> None:
    with ConversationStore(tmp_path / "c.sqlite3") as store:
        cid = store.create("t").id
        row = store.add_message(cid, "assistant", "x", stats={"generated_tokens": "many",
                                                               "finish_reason": "exploded", "model": 3})
        message = shown(row)
    assert message.stats is None and message.finish_reason is None and message.model == ""



def test_the_chat_view_lists_the_shown_answers_and_leaves_the_reply_being_written_out(tmp_path: Path) -> None:
    with ConversationStore(tmp_path / "c.sqlite3") as store:
        cid = store.create("t").id
        store.add_message(cid, "user", "q")
        first = store.add_message(cid, "assistant", "a1")
        second = store.add_message(cid, "assistant", "a2", variant_of=first.id)
        store.add_message(cid, "assistant", "   ")  # an empty reply without tools is not shown
        listed = shown_messages(store.messages(cid, every=True))
        assert [(m.content, m.variant) for m in listed] == [("q", (1, 1)), ("a2", (2, 2))]
        writing = shown_messages(store.messages(cid, every=True), (second.id,))
        assert [(m.content, m.variant) for m in writing] == [("q", (1, 1))]  # neither shown nor counted
