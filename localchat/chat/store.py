"""The conversation store: SQLite under localchat's data folder.

Every write commits before the method returns (autocommit, one short
transaction per call), and the database runs in WAL mode, so killing the app
with ``kill -9`` loses nothing a method has already written. ``synchronous``
is NORMAL: in WAL mode that is durable against a crashed or killed process
(the kernel holds the written pages); only a power cut can lose the last
commits, and it keeps each write well under the GUI thread's 50 ms budget.

The store is pure Python and used from one thread (the GUI thread, through
services.ChatService); it knows nothing about the engine: a message's stats
are a JSON object the services layer fills in.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localchat.settings import folders

log = logging.getLogger(__name__)

FILE_NAME = "chats.sqlite3"
SCHEMA_VERSION = 1
ROLES = ("system", "user", "assistant")

JsonObject = dict[str, Any]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    system_prompt TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
    content TEXT NOT NULL,
    stats TEXT,
    created REAL NOT NULL,
    complete INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id);
CREATE INDEX IF NOT EXISTS conversations_by_updated ON conversations(updated);
"""


class ChatStoreError(Exception):
    """The store could not do what was asked; the message is a sentence for the user."""


class NotFoundError(ChatStoreError):
    """No conversation or message with that id."""


def default_data_dir() -> Path:
    """The platform's data folder for localchat (e.g. ~/.local/share/localchat)."""
    return folders.data_dir()


def default_path() -> Path:
    return default_data_dir() / FILE_NAME


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    system_prompt: str
    created: float  # seconds since the epoch
    updated: float  # last change to the conversation or any of its messages


@dataclass(frozen=True)
class Message:
    id: int
    conversation_id: int
    role: str  # "system" | "user" | "assistant"
    content: str
    stats: JsonObject | None  # the reply's statistics as JSON, None for user messages
    created: float
    complete: bool  # False while streaming, or when stopped or cut short by an engine crash


class ConversationStore:
    """Conversations and their messages in one SQLite file (``path``; the data folder by default)."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA busy_timeout=2000")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise ChatStoreError(f"The chat history at {self.path} could not be opened ({exc}).") from exc

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ConversationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Conversations

    def create(self, title: str = "New chat", system_prompt: str = "") -> Conversation:
        now = time.time()
        with self._write() as db:
            cur = db.execute(
                "INSERT INTO conversations (title, system_prompt, created, updated) VALUES (?, ?, ?, ?)",
                (title, system_prompt, now, now),
            )
            assert cur.lastrowid is not None
            return Conversation(cur.lastrowid, title, system_prompt, now, now)

    def get(self, conversation_id: int) -> Conversation:
        row = self._db.execute("SELECT * FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"There is no conversation {conversation_id}.")
        return _conversation(row)

    def list_conversations(self) -> list[Conversation]:
        """All conversations, the most recently updated first."""
        rows = self._db.execute("SELECT * FROM conversations ORDER BY updated DESC, id DESC").fetchall()
        return [_conversation(row) for row in rows]

    def search(self, text: str) -> list[Conversation]:
        """Conversations whose title or any message contains ``text`` (case-insensitive), newest first."""
        if not text.strip():
            return self.list_conversations()
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self._db.execute(
            """
            SELECT * FROM conversations c
            WHERE c.title LIKE :p ESCAPE '\\'
               OR EXISTS (SELECT 1 FROM messages m
                          WHERE m.conversation_id = c.id AND m.content LIKE :p ESCAPE '\\')
            ORDER BY c.updated DESC, c.id DESC
            """,
            {"p": pattern},
        ).fetchall()
        return [_conversation(row) for row in rows]

    def rename(self, conversation_id: int, title: str) -> Conversation:
        return self._update_conversation(conversation_id, "title", title)

    def set_system_prompt(self, conversation_id: int, system_prompt: str) -> Conversation:
        return self._update_conversation(conversation_id, "system_prompt", system_prompt)

    def delete(self, conversation_id: int) -> None:
        """Delete a conversation and its messages."""
        with self._write() as db:
            cur = db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
            if cur.rowcount == 0:
                raise NotFoundError(f"There is no conversation {conversation_id}.")

    # Messages

    def messages(self, conversation_id: int) -> list[Message]:
        """The conversation's messages in the order they were added."""
        self.get(conversation_id)
        rows = self._db.execute(
            "SELECT * FROM messages WHERE conversation_id = ? ORDER BY id", (conversation_id,)
        ).fetchall()
        return [_message(row) for row in rows]

    def message(self, message_id: int) -> Message:
        row = self._db.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"There is no message {message_id}.")
        return _message(row)

    def add_message(
        self,
        conversation_id: int,
        role: str,
        content: str,
        *,
        stats: JsonObject | None = None,
        complete: bool = True,
    ) -> Message:
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        now = time.time()
        stats_json = _dump_stats(stats)
        with self._write() as db:
            self._touch(db, conversation_id, now)
            cur = db.execute(
                "INSERT INTO messages (conversation_id, role, content, stats, created, complete) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (conversation_id, role, content, stats_json, now, int(complete)),
            )
            assert cur.lastrowid is not None
            return Message(cur.lastrowid, conversation_id, role, content, stats, now, complete)

    def update_message(
        self,
        message_id: int,
        *,
        content: str | None = None,
        complete: bool | None = None,
        stats: JsonObject | None = None,
    ) -> Message:
        """Change a message's content, complete flag and/or stats (None leaves a field as it is)."""
        now = time.time()
        with self._write() as db:
            row = db.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"There is no message {message_id}.")
            old = _message(row)
            new = Message(
                old.id,
                old.conversation_id,
                old.role,
                old.content if content is None else content,
                old.stats if stats is None else stats,
                old.created,
                old.complete if complete is None else complete,
            )
            db.execute(
                "UPDATE messages SET content = ?, stats = ?, complete = ? WHERE id = ?",
                (new.content, _dump_stats(new.stats), int(new.complete), message_id),
            )
            self._touch(db, old.conversation_id, now)
            return new

    def delete_messages_from(self, message_id: int) -> int:
        """Delete a message and every later one in its conversation (regenerate, edit and resend).

        Returns how many messages were deleted.
        """
        with self._write() as db:
            row = db.execute("SELECT conversation_id FROM messages WHERE id = ?", (message_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"There is no message {message_id}.")
            cur = db.execute(
                "DELETE FROM messages WHERE conversation_id = ? AND id >= ?", (row[0], message_id)
            )
            self._touch(db, row[0], time.time())
            return cur.rowcount

    # Internals

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One transaction, committed on return: the unit that survives a kill -9."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")

    def _touch(self, db: sqlite3.Connection, conversation_id: int, now: float) -> None:
        cur = db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id))
        if cur.rowcount == 0:
            raise NotFoundError(f"There is no conversation {conversation_id}.")

    def _update_conversation(self, conversation_id: int, column: str, value: str) -> Conversation:
        assert column in ("title", "system_prompt")
        with self._write() as db:
            cur = db.execute(
                f"UPDATE conversations SET {column} = ?, updated = ? WHERE id = ?",
                (value, time.time(), conversation_id),
            )
            if cur.rowcount == 0:
                raise NotFoundError(f"There is no conversation {conversation_id}.")
        return self.get(conversation_id)

    def _migrate(self) -> None:
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise ChatStoreError(
                f"The chat history at {self.path} was written by a newer localchat (schema {version})."
            )
        if version < SCHEMA_VERSION:
            self._db.executescript(_SCHEMA + f"PRAGMA user_version = {SCHEMA_VERSION};")


def _dump_stats(stats: JsonObject | None) -> str | None:
    return None if stats is None else json.dumps(stats, separators=(",", ":"))


def _conversation(row: sqlite3.Row) -> Conversation:
    return Conversation(row["id"], row["title"], row["system_prompt"], row["created"], row["updated"])


def _message(row: sqlite3.Row) -> Message:
    stats: JsonObject | None = None
    if row["stats"] is not None:
        try:
            loaded = json.loads(row["stats"])
        except ValueError:
            log.warning("message %s has unreadable stats; ignoring them", row["id"])
        else:
            stats = loaded if isinstance(loaded, dict) else None
    return Message(
        row["id"],
        row["conversation_id"],
        row["role"],
        row["content"],
        stats,
        row["created"],
        bool(row["complete"]),
    )
