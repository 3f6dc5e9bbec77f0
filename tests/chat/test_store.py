from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from localchat.chat import ConversationStore, NotFoundError


@pytest.fixture
def store(tmp_path: Path):
    with ConversationStore(tmp_path / "data" / "chats.sqlite3") as s:
        yield s


def test_create_list_rename_delete(store: ConversationStore) -> None:
    a = store.create("First")
    b = store.create("Second", system_prompt="Be brief.")
    assert [c.id for c in store.list_conversations()] == [b.id, a.id]
    renamed = store.rename(a.id, "Renamed")
    assert renamed.title == "Renamed"
    assert renamed.updated >= a.updated
    assert store.list_conversations()[0].id == a.id  # most recently updated first
    assert store.get(b.id).system_prompt == "Be brief."
    store.set_system_prompt(b.id, "Answer in French.")
    assert store.get(b.id).system_prompt == "Answer in French."
    store.delete(a.id)
    assert [c.id for c in store.list_conversations()] == [b.id]
    with pytest.raises(NotFoundError):
        store.get(a.id)
    with pytest.raises(NotFoundError):
        store.delete(a.id)
    with pytest.raises(NotFoundError):
        store.rename(a.id, "x")


def test_messages_add_update_and_cascade(store: ConversationStore) -> None:
    conv = store.create()
    user = store.add_message(conv.id, "user", "Hello")
    reply = store.add_message(conv.id, "assistant", "", complete=False)
    assert reply.stats is None and not reply.complete
    stats = {"generated_tokens": 3, "tokens_per_s": 12.5, "per_position": [1, 0]}
    updated = store.update_message(reply.id, content="Hi there", complete=True, stats=stats)
    assert updated.content == "Hi there" and updated.complete and updated.stats == stats
    assert store.update_message(reply.id, content="Hi there!").stats == stats
    messages = store.messages(conv.id)
    assert [(m.role, m.content, m.complete) for m in messages] == [
        ("user", "Hello", True),
        ("assistant", "Hi there!", True),
    ]
    assert messages[1].stats == stats
    assert store.message(user.id) == messages[0]
    with pytest.raises(ValueError):
        store.add_message(conv.id, "robot", "x")
    with pytest.raises(NotFoundError):
        store.add_message(conv.id + 100, "user", "x")
    with pytest.raises(NotFoundError):
        store.update_message(reply.id + 100, content="x")
    store.delete(conv.id)
    with pytest.raises(NotFoundError):
        store.message(user.id)


def test_delete_messages_from(store: ConversationStore) -> None:
    conv = store.create()
    other = store.create()
    ids = [store.add_message(conv.id, "user" if i % 2 == 0 else "assistant", f"m{i}").id for i in range(4)]
    keep = store.add_message(other.id, "user", "elsewhere")
    assert store.delete_messages_from(ids[2]) == 2
    assert [m.content for m in store.messages(conv.id)] == ["m0", "m1"]
    assert store.messages(other.id) == [keep]


def test_search_title_and_content(store: ConversationStore) -> None:
    a = store.create("Python questions")
    b = store.create("Recipes")
    c = store.create("Other")
    store.add_message(b.id, "user", "How long to boil an EGG?")
    store.add_message(c.id, "assistant", "100% sure: use under_scores")
    assert [x.id for x in store.search("python")] == [a.id]
    assert [x.id for x in store.search("egg")] == [b.id]
    assert [x.id for x in store.search("100%")] == [c.id]
    assert [x.id for x in store.search("r_s")] == [c.id]  # _ is not a wildcard
    assert store.search("0%s") == []
    assert len(store.search("  ")) == 3


def test_survives_reopen_and_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite3"
    with ConversationStore(path) as s:
        conv = s.create("Kept")
        s.add_message(conv.id, "user", "é ✓ 日本")
    with ConversationStore(path) as s:
        assert s.list_conversations()[0].title == "Kept"
        assert s.messages(conv.id)[0].content == "é ✓ 日本"
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite3"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.close()
    from localchat.chat import ChatStoreError

    with pytest.raises(ChatStoreError, match="newer"):
        ConversationStore(path)
