from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from localchat.chat import (
    ConversationStore,
    DamagedHistoryError,
    NewerHistoryError,
    NotFoundError,
    StoreWriteError,
)
from localchat.chat import store as store_module


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


# -- the file on disk: who may read it, and what happens when it cannot be read -------------


@pytest.mark.skipif(os.name != "posix", reason="file modes are a POSIX notion")
def test_history_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "new" / "chats.sqlite3"
    with ConversationStore(path) as s:
        s.add_message(s.create("Private").id, "user", "my secret")
        for name in ("chats.sqlite3", "chats.sqlite3-wal", "chats.sqlite3-shm"):
            assert stat.S_IMODE((path.parent / name).stat().st_mode) == 0o600, name
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


@pytest.mark.skipif(os.name != "posix", reason="file modes are a POSIX notion")
def test_history_made_before_the_rule_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite3"
    ConversationStore(path).close()
    path.chmod(0o644)
    with ConversationStore(path) as s:
        assert s.list_conversations() == []
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def _history_with_chats(path: Path) -> None:
    with ConversationStore(path) as s:
        for i in range(200):
            conv = s.create(f"chat {i}")
            s.add_message(conv.id, "user", "words " * 200)
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


@pytest.mark.parametrize("damage", ["truncated", "garbage", "zeroed header"])
def test_damaged_history_is_moved_aside_and_an_empty_one_started(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "chats.sqlite3"
    _history_with_chats(path)
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 3])
    elif damage == "garbage":
        path.write_bytes(os.urandom(50_000))
    else:
        path.write_bytes(b"\0" * 100 + data[100:])
    damaged = path.read_bytes()
    with pytest.raises(DamagedHistoryError, match="damaged"):
        ConversationStore(path)
    store, recovery = ConversationStore.open_or_recover(path)
    with store:
        assert store.list_conversations() == []
        store.create("new life")
    assert recovery is not None and recovery.reason == "damaged"
    assert recovery.moved_to.name.startswith("chats.sqlite3.damaged-")
    assert recovery.moved_to.read_bytes() == damaged
    assert str(recovery.moved_to) in recovery.sentence and "empty history" in recovery.sentence


def test_a_second_damaged_history_never_replaces_the_first(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite3"
    moved = []
    for content in (b"first garbage" * 500, b"second garbage" * 500):
        path.write_bytes(content)
        store, recovery = ConversationStore.open_or_recover(path)
        store.close()
        assert recovery is not None
        moved.append(recovery.moved_to)
        path.unlink()
    assert moved[0] != moved[1]
    assert moved[0].read_bytes() == b"first garbage" * 500
    assert moved[1].read_bytes() == b"second garbage" * 500


def test_newer_history_is_kept_aside_for_the_newer_app(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite3"
    with ConversationStore(path) as s:
        s.create("from the future")
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(NewerHistoryError):
        ConversationStore(path)
    store, recovery = ConversationStore.open_or_recover(path)
    store.close()
    assert recovery is not None and recovery.reason == "newer"
    assert recovery.moved_to.name.startswith("chats.sqlite3.newer-")
    assert "newer version of localchat" in recovery.sentence
    db = sqlite3.connect(recovery.moved_to)
    assert db.execute("SELECT title FROM conversations").fetchone()[0] == "from the future"
    db.close()


def test_a_history_locked_by_another_process_is_a_sentence(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_MS", 100)
    path = tmp_path / "chats.sqlite3"
    with ConversationStore(path) as s:
        conv = s.create("Busy")
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(StoreWriteError) as caught:
                s.add_message(conv.id, "user", "hello")
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert str(caught.value) == (
            "Could not save the chat: the chat history is in use by another localchat."
        )
        s.add_message(conv.id, "user", "hello")  # the store still works once the lock is gone
        assert [m.content for m in s.messages(conv.id)] == ["hello"]


def test_a_full_disk_is_a_sentence_and_keeps_what_was_written(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite3"
    with ConversationStore(path) as s:
        conv = s.create("Full")
        s.add_message(conv.id, "user", "before")
        pages = s._db.execute("PRAGMA page_count").fetchone()[0]
        s._db.execute(f"PRAGMA max_page_count = {pages + 1}")  # SQLite's own "disk is full"
        with pytest.raises(StoreWriteError, match=r"^Could not save the chat: the disk is full\.$"):
            s.add_message(conv.id, "assistant", "x" * 100_000)
        assert [m.content for m in s.messages(conv.id)] == ["before"]


def test_delete_one_message_keeps_the_rest(store: ConversationStore) -> None:
    c = store.create("Chat")
    first = store.add_message(c.id, "user", "one")
    reply = store.add_message(c.id, "assistant", "two")
    last = store.add_message(c.id, "user", "three")
    gone = store.delete_message(reply.id)
    assert gone.content == "two"
    assert [m.id for m in store.messages(c.id)] == [first.id, last.id]
    with pytest.raises(NotFoundError):
        store.delete_message(reply.id)


_VERSION_1 = """
CREATE TABLE conversations (
    id INTEGER PRIMARY KEY, title TEXT NOT NULL, system_prompt TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL, updated REAL NOT NULL
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
    content TEXT NOT NULL, stats TEXT, created REAL NOT NULL, complete INTEGER NOT NULL DEFAULT 1
);
INSERT INTO conversations VALUES (1, 'Old chat', 'Be brief.', 100.0, 200.0);
INSERT INTO messages VALUES (1, 1, 'user', 'Hello', NULL, 150.0, 1);
INSERT INTO messages VALUES (2, 1, 'assistant', 'Hi!', '{"generated_tokens": 3}', 160.0, 1);
PRAGMA user_version = 1;
"""


def test_a_history_in_the_first_schema_opens_and_keeps_every_chat(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(_VERSION_1)
    old.close()
    with ConversationStore(path) as store:
        (chat,) = store.list_conversations()
        assert (chat.title, chat.system_prompt, chat.options) == ("Old chat", "Be brief.", {})
        messages = [(m.role, m.content) for m in store.messages(chat.id)]
        assert messages == [("user", "Hello"), ("assistant", "Hi!")]
        assert store.messages(chat.id)[1].stats == {"generated_tokens": 3}
        store.set_options(chat.id, {"temperature": 0.2})
    version = sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0]
    assert version == store_module.SCHEMA_VERSION
    with ConversationStore(path) as again:
        assert again.get(1).options == {"temperature": 0.2}


def test_a_chat_keeps_its_own_settings(store: ConversationStore) -> None:
    c = store.create("Chat")
    assert c.options == {}
    assert store.set_options(c.id, {"temperature": 0.1, "max_reply_tokens": 64}).options == {
        "temperature": 0.1, "max_reply_tokens": 64,
    }
    assert store.set_options(c.id, {}).options == {}
    with pytest.raises(NotFoundError):
        store.set_options(c.id + 99, {"temperature": 0.1})


def test_answers_kept_by_regenerate_switch_and_delete(store: ConversationStore) -> None:
    c = store.create("Chat")
    store.add_message(c.id, "user", "Hi")
    first = store.add_message(c.id, "assistant", "Hello")
    second = store.add_message(c.id, "assistant", "Hey", variant_of=first.id)
    third = store.add_message(c.id, "assistant", "Howdy", complete=False, variant_of=second.id)
    assert [m.content for m in store.messages(c.id)] == ["Hi", "Howdy"]  # only the one shown
    assert [m.content for m in store.messages(c.id, every=True)] == ["Hi", "Hello", "Hey", "Howdy"]
    assert [m.id for m in store.variants(first.id)] == [first.id, second.id, third.id]
    store.show_variant(first.id)
    assert [m.content for m in store.messages(c.id)] == ["Hi", "Hello"]
    store.delete_message(first.id)  # the shown one goes: the newest other answer is shown
    assert [m.content for m in store.messages(c.id)] == ["Hi", "Howdy"]
    assert [m.id for m in store.variants(second.id)] == [second.id, third.id]
    store.update_message(third.id, content="Howdy!", complete=True)
    assert store.message(third.id).variant_group == first.id and store.message(third.id).shown


def test_starts_at_once_on_an_old_history_upgrade_it_once_and_move_nothing_aside(tmp_path: Path) -> None:
    """Two (here four) apps started at once on a history from before the last update: the upgrade is
    one locked transaction, so the others wait for it instead of failing on "duplicate column" and
    calling the file damaged (which moved every chat aside)."""
    import multiprocessing

    from tests.chat.store_racers import open_at_once

    rounds, racers = 8, 4
    paths = []
    for r in range(rounds):
        path = tmp_path / f"round{r}" / "chats.sqlite3"
        path.parent.mkdir()
        old = sqlite3.connect(path)
        old.executescript(_VERSION_1)
        old.close()
        paths.append(str(path))
    spawn = multiprocessing.get_context("spawn")
    gate = spawn.Barrier(racers)
    results = spawn.Queue()
    procs = [spawn.Process(target=open_at_once, args=(paths, gate, results)) for _ in range(racers)]
    for p in procs:
        p.start()
    try:
        outcomes = [results.get(timeout=120) for _ in range(rounds * racers)]
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    assert [o for o in outcomes if o[1] is not None or o[2] != 1] == []
    for path in map(Path, paths):
        assert sorted(p.name for p in path.parent.iterdir() if "-20" in p.name) == []  # nothing moved aside
        with ConversationStore(path) as store:
            assert [m.content for m in store.messages(1)] == ["Hello", "Hi!"]
        version = sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0]
        assert version == store_module.SCHEMA_VERSION
