"""Recent Responses API answers, kept in memory so that ``previous_response_id`` and
``GET /v1/responses/{id}`` find them.

Bounded two ways: by count (the oldest forgotten first) and by the characters the kept
conversations hold, since each entry keeps its whole conversation (an agent's chain of a
hundred turns would otherwise keep a hundred copies of a growing chat). Nothing is written
to disk: a response that has been forgotten, or was made before the server started, is a 404
that says so. Only the server's event loop thread touches it, so it needs no lock.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from localchat.engine.types import ChatMessage

MAX_RESPONSES = 256
MAX_CHARS = 32_000_000  # about 64 MB of text at most, whatever the count


@dataclass(frozen=True)
class StoredResponse:
    body: dict[str, Any]  # the response object, as GET /v1/responses/{id} answers it
    conversation: tuple[ChatMessage, ...]  # its input (without instructions) and its output


def _size(messages: tuple[ChatMessage, ...]) -> int:
    return sum(
        len(m.content) + len(m.reasoning) + sum(len(c.arguments) for c in m.tool_calls) + 16 for m in messages
    )


class ResponseStore:
    def __init__(self, max_responses: int = MAX_RESPONSES, max_chars: int = MAX_CHARS) -> None:
        self.max_responses = max_responses
        self.max_chars = max_chars
        self._entries: OrderedDict[str, tuple[StoredResponse, int]] = OrderedDict()
        self._chars = 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, rid: str, stored: StoredResponse) -> None:
        size = _size(stored.conversation)
        self.delete(rid)
        self._entries[rid] = (stored, size)
        self._chars += size
        while self._entries and (len(self._entries) > self.max_responses or self._chars > self.max_chars):
            _, (_, dropped) = self._entries.popitem(last=False)
            self._chars -= dropped

    def get(self, rid: str) -> StoredResponse | None:
        entry = self._entries.get(rid)
        if entry is None:
            return None
        self._entries.move_to_end(rid)  # a chain in use stays
        return entry[0]

    def delete(self, rid: str) -> bool:
        entry = self._entries.pop(rid, None)
        if entry is None:
            return False
        self._chars -= entry[1]
        return True
