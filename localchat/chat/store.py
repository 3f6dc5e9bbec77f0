"""The conversation store: SQLite under localchat's data folder.

Every write commits before the method returns (autocommit, one short
transaction per call), and the database runs in WAL mode, so killing the app
with ``kill -9`` loses nothing a method has already written. ``synchronous``
is NORMAL: in WAL mode that is durable against a crashed or killed process
(the kernel holds the written pages); only a power cut can lose the last
commits, and it keeps each write well under the GUI thread's 50 ms budget.

The store is pure Python and used from one thread (the GUI thread, through
services.ChatSession); it knows nothing about the engine: a message's stats
are a JSON object the services layer fills in.

The file holds what people wrote, so on POSIX it is created readable by its
owner only (0600; SQLite gives its -wal and -shm files the same mode). A file
that cannot be read as a chat history (truncated, garbage, or written by a
newer localchat) raises ``DamagedHistoryError``/``NewerHistoryError`` at
open; ``open_or_recover`` moves such a file aside and starts an empty
history, so the app opens anyway and can say where the old file went. A
write that fails because the disk is full or another process holds the
database past the busy timeout raises ``StoreWriteError`` with a sentence.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localchat.chat import rounds as tool_rounds
from localchat.chat.rounds import ReplyTools
from localchat.settings import folders

log = logging.getLogger(__name__)

FILE_NAME = "chats.sqlite3"
SCHEMA_VERSION = 4
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

# What each later version adds to the one before, applied in order to a file of an older version
# (the tables above are version 1's): columns are added, never renamed or dropped, so a file
# upgraded here still holds every chat it held.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    # A chat's own settings (temperature, reply length) over the app's, as a JSON object.
    2: ("ALTER TABLE conversations ADD COLUMN options TEXT",),
    # Regenerate keeps the earlier answers: the answers to one message share a variant group (the
    # first answer's id) and one of them is shown; the prompt and the view read only shown rows.
    3: (
        "ALTER TABLE messages ADD COLUMN shown INTEGER NOT NULL DEFAULT 1",
        "ALTER TABLE messages ADD COLUMN variant_group INTEGER",
    ),
    # Tools in the chat: a reply's tool rounds (chat/rounds.py) as JSON, and the model's thinking.
    4: (
        "ALTER TABLE messages ADD COLUMN tools TEXT",
        "ALTER TABLE messages ADD COLUMN reasoning TEXT",
    ),
}


class ChatStoreError(Exception):
    """The store could not do what was asked; the message is a sentence for the user."""


class NotFoundError(ChatStoreError):
    """No conversation or message with that id."""


class DamagedHistoryError(ChatStoreError):
    """The file is not a readable chat history (truncated, overwritten, or not SQLite at all)."""


class NewerHistoryError(ChatStoreError):
    """The file was written by a newer localchat whose schema this version does not know."""


class StoreWriteError(ChatStoreError):
    """A write failed (disk full, database locked by another process); the message says which."""


BUSY_TIMEOUT_MS = 2000


def write_error_sentence(exc: sqlite3.Error) -> str:
    """What a failed write means for the user, in one sentence."""
    text = str(exc).lower()
    if "full" in text:
        reason = "the disk is full"
    elif "locked" in text or "busy" in text:
        reason = "the chat history is in use by another localchat"
    elif "readonly" in text or "read-only" in text:
        reason = "the chat history file is read-only"
    else:
        reason = f"the chat history could not be written ({exc})"
    return f"Could not save the chat: {reason}."


@dataclass(frozen=True)
class Recovery:
    """Why the history on disk was set aside at start, and where it now is."""

    reason: str  # "damaged" | "newer"
    moved_to: Path
    detail: str  # the store's own sentence about the file

    @property
    def headline(self) -> str:
        if self.reason == "newer":
            return "Your chat history was written by a newer version of localchat, which this one can't read."
        return "Your chat history could not be read: the file is damaged."

    @property
    def details(self) -> str:
        hint = (
            "Open it with the newer version, or keep it until you update."
            if self.reason == "newer"
            else "Nothing was deleted: a backup, or an SQLite recovery tool, may get the chats back."
        )
        kept = f"localchat started with an empty history. The old file was kept at:\n{self.moved_to}"
        return f"{kept}\n\n{hint}"

    @property
    def sentence(self) -> str:
        """Headline and details as one text (for the log and the command line)."""
        return f"{self.headline} {self.details}".replace("\n\n", " ").replace(":\n", ": ")


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
    # The chat's own values of some settings, by option name ({"temperature": 0.2}); {} when none.
    options: JsonObject = field(default_factory=dict)


@dataclass(frozen=True)
class Message:
    id: int
    conversation_id: int
    role: str  # "system" | "user" | "assistant"
    content: str
    stats: JsonObject | None  # the reply's statistics as JSON, None for user messages
    created: float
    complete: bool  # False while streaming, or when stopped or cut short by an engine crash
    shown: bool = True  # False for an earlier answer the user switched away from
    variant_group: int | None = None  # shared by the answers to one message; None: the only one
    tools: ReplyTools = field(default_factory=ReplyTools)  # a reply's tool rounds before its answer
    reasoning: str = ""  # a reply's thinking before its answer


class ConversationStore:
    """Conversations and their messages in one SQLite file (``path``; the data folder by default)."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        if not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
        _create_private(self.path)
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None)
        except sqlite3.Error as exc:
            raise ChatStoreError(f"The chat history at {self.path} could not be opened ({exc}).") from exc
        try:
            self._db.row_factory = sqlite3.Row
            self._db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            self._use_wal()
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._check_readable()
            self._migrate()
        except ChatStoreError:
            self._db.close()
            raise
        except sqlite3.OperationalError as exc:
            self._db.close()
            if "locked" in str(exc).lower() or "busy" in str(exc).lower():
                raise StoreWriteError(
                    f"The chat history at {self.path} is in use by another localchat."
                ) from exc
            raise DamagedHistoryError(f"The chat history at {self.path} is damaged ({exc}).") from exc
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise DamagedHistoryError(f"The chat history at {self.path} is damaged ({exc}).") from exc

    @classmethod
    def open_or_recover(cls, path: Path | str | None = None) -> tuple[ConversationStore, Recovery | None]:
        """Open the history; a damaged or newer one is moved aside and an empty one started.

        The moved file keeps its name with ``.damaged-<time>`` (or ``.newer-<time>``) added,
        never replacing an earlier one; its -wal and -shm files go with it.
        """
        target = Path(path) if path is not None else default_path()
        try:
            return cls(target), None
        except (DamagedHistoryError, NewerHistoryError) as exc:
            reason = "newer" if isinstance(exc, NewerHistoryError) else "damaged"
            moved = _move_aside(target, reason)
            log.warning("%s Moved it to %s and started an empty history.", exc, moved)
            return cls(target), Recovery(reason, moved, str(exc))

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
            return Conversation(cur.lastrowid, title, system_prompt, now, now, {})

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
                          WHERE m.conversation_id = c.id AND (m.content LIKE :p ESCAPE '\\'
                                                              OR m.tools LIKE :p ESCAPE '\\'))
            ORDER BY c.updated DESC, c.id DESC
            """,
            {"p": pattern},
        ).fetchall()
        return [_conversation(row) for row in rows]

    def rename(self, conversation_id: int, title: str) -> Conversation:
        return self._update_conversation(conversation_id, "title", title)

    def set_system_prompt(self, conversation_id: int, system_prompt: str) -> Conversation:
        return self._update_conversation(conversation_id, "system_prompt", system_prompt)

    def set_options(self, conversation_id: int, options: JsonObject) -> Conversation:
        """Keep the chat's own settings (option name to value; {} goes back to the app's)."""
        with self._write() as db:
            cur = db.execute(
                "UPDATE conversations SET options = ?, updated = ? WHERE id = ?",
                (_dump_stats(options) if options else None, time.time(), conversation_id),
            )
            if cur.rowcount == 0:
                raise NotFoundError(f"There is no conversation {conversation_id}.")
        return self.get(conversation_id)

    def delete(self, conversation_id: int) -> None:
        """Delete a conversation and its messages."""
        with self._write() as db:
            cur = db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
            if cur.rowcount == 0:
                raise NotFoundError(f"There is no conversation {conversation_id}.")

    # Messages

    def messages(self, conversation_id: int, *, every: bool = False) -> list[Message]:
        """The conversation's messages in the order they were added: the ones shown, or ``every`` one
        (with the earlier answers a regenerate kept)."""
        self.get(conversation_id)
        shown = "" if every else " AND shown = 1"
        rows = self._db.execute(
            f"SELECT * FROM messages WHERE conversation_id = ?{shown} ORDER BY id", (conversation_id,)
        ).fetchall()
        return [_message(row) for row in rows]

    def variants(self, message_id: int) -> list[Message]:
        """The answers that stand in for each other with ``message_id`` (itself included), oldest first."""
        message = self.message(message_id)
        if message.variant_group is None:
            return [message]
        rows = self._db.execute(
            "SELECT * FROM messages WHERE variant_group = ? ORDER BY id", (message.variant_group,)
        ).fetchall()
        return [_message(row) for row in rows]

    def show_variant(self, message_id: int) -> Message:
        """Show this answer instead of the others of its group."""
        with self._write() as db:
            row = db.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"There is no message {message_id}.")
            if row["variant_group"] is not None:
                db.execute(
                    "UPDATE messages SET shown = (id = ?) WHERE variant_group = ?",
                    (message_id, row["variant_group"]),
                )
            self._touch(db, row["conversation_id"], time.time())
        return self.message(message_id)

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
        variant_of: int | None = None,
        tools: ReplyTools | None = None,
        reasoning: str = "",
    ) -> Message:
        """Add a message; ``variant_of`` makes it another answer in that message's place (regenerate):
        the earlier answers are kept, hidden, and this one is shown. ``tools``: a reply's tool rounds."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        now = time.time()
        stats_json = _dump_stats(stats)
        with self._write() as db:
            self._touch(db, conversation_id, now)
            group: int | None = None
            if variant_of is not None:
                row = db.execute("SELECT variant_group FROM messages WHERE id = ?", (variant_of,)).fetchone()
                if row is None:
                    raise NotFoundError(f"There is no message {variant_of}.")
                group = row[0] if row[0] is not None else variant_of
                db.execute("UPDATE messages SET variant_group = ? WHERE id = ?", (group, variant_of))
                db.execute("UPDATE messages SET shown = 0 WHERE variant_group = ?", (group,))
            kept = tools or ReplyTools()
            cur = db.execute(
                "INSERT INTO messages (conversation_id, role, content, stats, created, complete, "
                "variant_group, tools, reasoning) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (conversation_id, role, content, stats_json, now, int(complete), group,
                 tool_rounds.dump(kept), reasoning or None),
            )
            assert cur.lastrowid is not None
            return Message(cur.lastrowid, conversation_id, role, content, stats, now, complete, True, group,
                           kept, reasoning)

    def update_message(
        self,
        message_id: int,
        *,
        content: str | None = None,
        complete: bool | None = None,
        stats: JsonObject | None = None,
        tools: ReplyTools | None = None,
        reasoning: str | None = None,
    ) -> Message:
        """Change a message's content, complete flag, stats, tool rounds and/or thinking (None leaves a
        field as it is)."""
        now = time.time()
        with self._write() as db:
            row = db.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"There is no message {message_id}.")
            old = _message(row)
            new = dataclasses.replace(
                old,
                content=old.content if content is None else content,
                stats=old.stats if stats is None else stats,
                complete=old.complete if complete is None else complete,
                tools=old.tools if tools is None else tools,
                reasoning=old.reasoning if reasoning is None else reasoning,
            )
            db.execute(
                "UPDATE messages SET content = ?, stats = ?, complete = ?, tools = ?, reasoning = ? "
                "WHERE id = ?",
                (new.content, _dump_stats(new.stats), int(new.complete), tool_rounds.dump(new.tools),
                 new.reasoning or None, message_id),
            )
            self._touch(db, old.conversation_id, now)
            return new

    def delete_message(self, message_id: int) -> Message:
        """Delete one message, leaving the rest of its conversation as it is; returns what was deleted.

        When it was the shown one of several answers, the newest of the others is shown instead.
        """
        with self._write() as db:
            row = db.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"There is no message {message_id}.")
            db.execute("DELETE FROM messages WHERE id = ?", (message_id,))
            if row["shown"] and row["variant_group"] is not None:
                db.execute(
                    "UPDATE messages SET shown = 1 WHERE id = "
                    "(SELECT MAX(id) FROM messages WHERE variant_group = ?)",
                    (row["variant_group"],),
                )
            self._touch(db, row["conversation_id"], time.time())
            return _message(row)

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
        """One transaction, committed on return: the unit that survives a kill -9.

        A full disk or a lock held past the busy timeout becomes StoreWriteError with a sentence.
        """
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise StoreWriteError(write_error_sentence(exc)) from exc
        try:
            yield self._db
        except BaseException as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError):
                raise StoreWriteError(write_error_sentence(exc)) from exc
            raise
        else:
            try:
                self._db.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise StoreWriteError(write_error_sentence(exc)) from exc

    def _use_wal(self) -> None:
        """Put the file in WAL mode, waiting for other localchats as long as any write would.

        Switching a file that is not in WAL mode yet (a history from an early version) needs every
        other connection out of it, and SQLite answers "locked" at once instead of calling the busy
        handler when another process is opening the same file: so the wait is here.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                text = str(exc).lower()
                if ("locked" not in text and "busy" not in text) or time.monotonic() > deadline:
                    raise
            time.sleep(0.01)

    def _check_readable(self) -> None:
        """Refuse a file SQLite can open but not read (a truncated or overwritten history)."""
        rows = self._db.execute("PRAGMA quick_check").fetchall()
        problems = [str(r[0]) for r in rows if str(r[0]).lower() != "ok"]
        if problems:
            raise DamagedHistoryError(f"The chat history at {self.path} is damaged ({problems[0]}).")

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
        """Bring an older file up to ``SCHEMA_VERSION`` in one transaction.

        The version is read again after the write lock is taken: two localchats started at once on an
        old file would otherwise both see the old version, and the second, upgrading a file the first
        had just upgraded, failed on "duplicate column" and called the history damaged (it was moved
        aside while the first kept writing into it). Here the second waits for the lock (the busy
        timeout) and then finds nothing left to do.
        """
        version = self._schema_version()
        if version == SCHEMA_VERSION:
            return
        if version < SCHEMA_VERSION:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                version = self._schema_version()
                if version < SCHEMA_VERSION:
                    for statement in _upgrade(version):
                        self._db.execute(statement)
                    self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            if 0 < version < SCHEMA_VERSION:
                log.info("upgraded the chat history from schema %s to %s", version, SCHEMA_VERSION)
        if version > SCHEMA_VERSION:
            raise NewerHistoryError(
                f"The chat history at {self.path} was written by a newer localchat (schema {version})."
            )

    def _schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])


def _upgrade(version: int) -> list[str]:
    """The statements that turn a file of schema ``version`` (0: a new, empty file) into today's."""
    statements = [s for s in _SCHEMA.split(";") if s.strip()] if version < 1 else []
    for v in range(max(version, 1) + 1, SCHEMA_VERSION + 1):
        statements += _MIGRATIONS[v]
    return statements

def _create_private(path: Path) -> None:
    """Create the file readable by its owner only (POSIX), and tighten one made before that rule."""
    if os.name != "posix":
        return  # on Windows the per-user profile folder already keeps other users out
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.close(fd)
    elif path.stat().st_mode & 0o077:
        try:
            os.chmod(path, 0o600)
        except OSError:
            log.warning("could not make %s private", path, exc_info=True)


def _move_aside(path: Path, reason: str) -> Path:
    """Rename ``path`` (and its -wal/-shm) to ``<name>.<reason>-<time>``, never over an earlier one."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = path.with_name(f"{path.name}.{reason}-{stamp}")
    moved = base
    n = 1
    while moved.exists():
        moved = base.with_name(f"{base.name}-{n}")
        n += 1
    path.replace(moved)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            try:
                side.replace(moved.with_name(moved.name + suffix))
            except OSError:
                log.warning("could not move %s aside", side, exc_info=True)
    return moved


def _dump_stats(stats: JsonObject | None) -> str | None:
    return None if stats is None else json.dumps(stats, separators=(",", ":"))


def _conversation(row: sqlite3.Row) -> Conversation:
    options: JsonObject = {}
    if row["options"]:
        try:
            loaded = json.loads(row["options"])
        except ValueError:
            log.warning("conversation %s has unreadable settings; the app's are used", row["id"])
        else:
            options = loaded if isinstance(loaded, dict) else {}
    return Conversation(
        row["id"], row["title"], row["system_prompt"], row["created"], row["updated"], options
    )


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
        bool(row["shown"]),
        row["variant_group"],
        tool_rounds.load(row["tools"], f"message {row['id']}"),
        row["reasoning"] or "",
    )
