"""Conversation history (SQLite, store.py) and the turns sent to the model (prompt.py).

Public API::

    from localchat.chat import ConversationStore, prompt_turns

    store = ConversationStore()                 # or ConversationStore(tmp_path / "chats.sqlite3")
    store, recovery = ConversationStore.open_or_recover(path)  # a damaged file is moved aside
    conv = store.create("New chat")
    store.add_message(conv.id, "user", "Hello")
    reply = store.add_message(conv.id, "assistant", "", complete=False)
    store.update_message(reply.id, content="Hi!", complete=True, stats={...})
    store.list_conversations(); store.search("hello"); store.rename(...); store.delete(...)
    store.set_system_prompt(conv.id, "Be brief."); store.messages(conv.id)
    store.delete_messages_from(message_id)      # for regenerate / edit and resend
    prompt_turns(conv.system_prompt, store.messages(conv.id))  # -> (PromptTurn(role, content), ...)
    export.render("markdown" | "json", conv, store.messages(conv.id)); export.write_export(path, text)

No Qt and no engine imports here.
"""

from localchat.chat.export import ExportError
from localchat.chat.prompt import PromptTurn, prompt_turns
from localchat.chat.store import (
    ChatStoreError,
    Conversation,
    ConversationStore,
    DamagedHistoryError,
    Message,
    NewerHistoryError,
    NotFoundError,
    Recovery,
    StoreWriteError,
    default_data_dir,
    default_path,
)

__all__ = [
    "ChatStoreError",
    "Conversation",
    "ConversationStore",
    "DamagedHistoryError",
    "ExportError",
    "Message",
    "NewerHistoryError",
    "NotFoundError",
    "PromptTurn",
    "Recovery",
    "StoreWriteError",
    "default_data_dir",
    "default_path",
    "prompt_turns",
]
