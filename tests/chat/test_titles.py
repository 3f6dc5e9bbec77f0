"""Chat titles: the first line of the first message, shortened; a chat written before its first message
("New chat") is named by it, and a chat with a title or messages keeps its own."""

from __future__ import annotations

from pathlib import Path

from localchat.chat import ConversationStore
from localchat.chat.titles import MAX_CHARS, NEW_CHAT, first_message_title, title_from


def test_the_title_is_the_first_line_shortened() -> None:
    assert title_from("  Sort a list\nin Python ") == "Sort a list"
    assert title_from("   ") == NEW_CHAT
    long = title_from("word " * 30)
    assert len(long) == MAX_CHARS and long.endswith("…") and not long[:-1].endswith(" ")


def test_only_an_untitled_chat_without_messages_is_named_by_its_first_message(tmp_path: Path) -> None:
    with ConversationStore(tmp_path / "chats.sqlite3") as store:
        untitled = store.create(NEW_CHAT).id
        assert first_message_title(store, untitled, "Write a haiku") == "Write a haiku"
        named = store.create("Haiku").id
        assert first_message_title(store, named, "Write a haiku") is None
        store.add_message(untitled, "user", "first")
        assert first_message_title(store, untitled, "second") is None  # its first message named it
        assert first_message_title(store, 9999, "gone") is None  # a chat deleted meanwhile
