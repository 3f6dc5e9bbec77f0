"""A chat's title: the first line of its first message (shortened to ``MAX_CHARS``), and "New chat" for
a chat written before its first message (a system prompt typed first) until that message names it."""

from __future__ import annotations

from localchat.chat.store import ChatStoreError, ConversationStore

NEW_CHAT = "New chat"
MAX_CHARS = 48


def title_from(text: str) -> str:
    """The title a chat whose first message is ``text`` gets."""
    line = text.strip().splitlines()[0] if text.strip() else NEW_CHAT
    return line if len(line) <= MAX_CHARS else line[:MAX_CHARS - 1].rstrip() + "…"


def first_message_title(store: ConversationStore, conversation_id: int, text: str) -> str | None:
    """The title ``text`` gives the chat when it is the first message of a chat still untitled (written
    before its first message, so titled "New chat"); None when the chat keeps its title."""
    try:
        untitled = store.get(conversation_id).title.strip() in ("", NEW_CHAT)
        if not untitled or store.messages(conversation_id):
            return None
    except ChatStoreError:
        return None
    return title_from(text)
