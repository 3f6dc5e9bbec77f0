"""Entry points for the store's tests with real processes (imported by name in the spawned child)."""

from __future__ import annotations

from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

from localchat.chat import ConversationStore


def open_at_once(paths: list[str], gate: Barrier, results: Queue) -> None:  # type: ignore[type-arg]
    """For each history in turn: wait until every racer is ready, then open it as the app does
    (``open_or_recover``); report (path, whether it was moved aside, the chats it opened with)."""
    for path in paths:
        gate.wait(timeout=60)
        try:
            store, recovery = ConversationStore.open_or_recover(Path(path))
        except Exception as exc:  # reported, so the test names it instead of hanging
            results.put((path, f"{type(exc).__name__}: {exc}", -1))
            continue
        with store:
            moved = None if recovery is None else recovery.sentence
            results.put((path, moved, len(store.list_conversations())))
