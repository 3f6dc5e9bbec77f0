"""A reply's tool rounds in the store: kept with the reply, read back, found by search, unfolded into the
prompt's turns, written in exports; a history from before them opens and takes them."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from localchat.chat import ConversationStore, PromptTurn, export, prompt_turns
from localchat.chat import store as store_module
from localchat.chat.rounds import ReplyTools, ToolCallRecord, ToolRound, call_time, load

ADD = ToolCallRecord("call_1", "add", '{"a": 2, "b": 3}', "calc", "5", "done", "", 0.25)
DENIED = ToolCallRecord("call_2", "delete_all", "{}", "files", "The user declined to run this tool.",
                        "denied")
ROUNDS = ReplyTools(
    (ToolRound("Let me add them.", (ADD, DENIED), "I need the calculator.", {"generated_tokens": 30}),),
    ("The tool server 'web' could not start: nothing answers at that address.",),
)


def _chat(store: ConversationStore) -> int:
    c = store.create("Sums")
    store.add_message(c.id, "user", "What is 2 + 3?")
    store.add_message(c.id, "assistant", "2 + 3 = 5.", tools=ROUNDS, reasoning="The tool said 5.")
    store.add_message(c.id, "user", "Thanks")
    return c.id


def test_rounds_and_thinking_are_kept_with_the_reply(tmp_path: Path) -> None:
    with ConversationStore(tmp_path / "c.sqlite3") as store:
        cid = _chat(store)
        reply = store.messages(cid)[1]
        assert reply.tools == ROUNDS and reply.reasoning == "The tool said 5."
        updated = store.update_message(reply.id, content="5.", tools=ReplyTools())
        assert updated.tools == ReplyTools() and updated.reasoning == "The tool said 5."
        assert store.messages(cid)[1].tools == ReplyTools()
        store.update_message(reply.id, tools=ROUNDS)
        assert [c.title for c in store.search("Let me add")] == ["Sums"]  # a round's text is found
        assert [c.title for c in store.search("not in any round")] == []


def test_the_prompt_unfolds_a_reply_into_the_turns_the_model_saw(tmp_path: Path) -> None:
    with ConversationStore(tmp_path / "c.sqlite3") as store:
        cid = _chat(store)
        turns = prompt_turns("", store.messages(cid))
    assert turns == (
        PromptTurn("user", "What is 2 + 3?"),
        PromptTurn("assistant", "Let me add them.", (ADD, DENIED)),
        PromptTurn("tool", "5", tool_call_id="call_1", name="add"),
        PromptTurn("tool", "The user declined to run this tool.", tool_call_id="call_2", name="delete_all"),
        PromptTurn("assistant", "2 + 3 = 5."),
        PromptTurn("user", "Thanks"),
    )


def test_a_reply_stopped_after_its_calls_still_gives_the_calls_and_results(tmp_path: Path) -> None:
    with ConversationStore(tmp_path / "c.sqlite3") as store:
        c = store.create()
        store.add_message(c.id, "user", "Add")
        store.add_message(c.id, "assistant", "", tools=ReplyTools((ToolRound("", (ADD,)),)), complete=False)
        turns = prompt_turns("", store.messages(c.id))
    assert [t.role for t in turns] == ["user", "assistant", "tool"]


def test_exports_show_each_call(tmp_path: Path) -> None:
    with ConversationStore(tmp_path / "c.sqlite3") as store:
        cid = _chat(store)
        conversation, messages = store.get(cid), store.messages(cid)
    markdown = export.to_markdown(conversation, messages)
    assert "> **Thinking**\n>\n> I need the calculator." in markdown
    assert "**Tool call:** `add` (calc), 0.2 s" in markdown  # 0.25 s, rounded to even
    assert '```json\n{"a": 2, "b": 3}\n```' in markdown and "Result:\n\n```\n5\n```" in markdown
    assert "**Tool call:** `delete_all` (files), denied\n" in markdown  # never ran: no time
    assert "_The tool server 'web' could not start" in markdown
    assert markdown.index("Let me add them.") < markdown.index("2 + 3 = 5.")
    document = json.loads(export.to_json(conversation, messages))
    assert document["format"] == "localchat-chat/2"
    reply = document["messages"][1]
    assert reply["reasoning"] == "The tool said 5."
    assert reply["tool_rounds"][0]["calls"][0] == {
        "id": "call_1", "name": "add", "arguments": '{"a": 2, "b": 3}', "server": "calc", "result": "5",
        "status": "done", "note": "", "seconds": 0.25,
    }
    assert reply["notes"] == list(ROUNDS.notes)
    assert "tool_rounds" not in document["messages"][0]


def test_a_history_of_the_previous_schema_opens_and_takes_tool_rounds(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite3"
    with ConversationStore(path) as store:
        c = store.create("Before tools")
        store.add_message(c.id, "user", "Hi")
    db = sqlite3.connect(path)  # back to schema 3: the two columns did not exist
    db.executescript("ALTER TABLE messages DROP COLUMN tools; ALTER TABLE messages DROP COLUMN reasoning;"
                     "PRAGMA user_version = 3;")
    db.close()
    with ConversationStore(path) as store:
        (message,) = store.messages(c.id)
        assert (message.content, message.tools, message.reasoning) == ("Hi", ReplyTools(), "")
        store.add_message(c.id, "assistant", "ok", tools=ROUNDS)
        assert store.messages(c.id)[1].tools == ROUNDS
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == store_module.SCHEMA_VERSION


def test_rounds_of_the_wrong_shape_are_skipped() -> None:
    assert load("{broken") == ReplyTools()
    assert load('[1]') == ReplyTools()
    text = json.dumps({"rounds": [{"text": "t", "calls": [{"id": "c", "name": "f", "status": "weird",
                                                           "seconds": "x"}, {"id": 3}]}, "junk"],
                       "notes": ["said", 4]})
    loaded = load(text)
    assert loaded.rounds == (ToolRound("t", (ToolCallRecord("c", "f", "", status="failed"),)),)
    assert loaded.notes == ("said",)


def test_a_calls_time_is_said_in_a_unit_that_shows_it() -> None:
    # a local tool answers in milliseconds: "0.0 s" said nothing
    assert [call_time(s) for s in (0.0004, 0.012, 0.4, 2.0, 12.4, 125.0, 120.0)] == [
        "1 ms", "12 ms", "0.4 s", "2.0 s", "12 s", "2 min 5 s", "2 min"]
