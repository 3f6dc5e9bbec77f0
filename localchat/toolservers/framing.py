"""Lines of a tool server's stdout, split in linear time, and a line too long to keep cut short.

The SDK's stdio reader joins its whole buffer to each new chunk and splits it again, which is
quadratic in a line's length: a 50 MB tool result took 35 s of CPU on a slow machine, and a larger
one would keep the process busy for minutes. Here each chunk is looked at once, and a line longer
than ``max_bytes`` is not kept whole: its first ``head_bytes`` and last ``tail_bytes`` are, so the
transport can still answer the request it belonged to (stdio_pipe.py) with the start of its text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

MAX_MESSAGE_BYTES = 8_000_000  # a JSON-RPC message longer than this is cut (about 8 MB)
HEAD_BYTES = 256_000
TAIL_BYTES = 512


@dataclass(frozen=True)
class Oversized:
    """A line longer than the framer keeps: its start, its end and its length in bytes."""

    head: bytes
    tail: bytes
    size: int


class LineFramer:
    def __init__(self, max_bytes: int = MAX_MESSAGE_BYTES, head_bytes: int = HEAD_BYTES,
                 tail_bytes: int = TAIL_BYTES) -> None:
        self._max = max_bytes
        self._head_max = min(head_bytes, max_bytes)
        self._tail_max = tail_bytes
        self._parts: list[bytes] = []
        self._size = 0
        self._head = b""  # once the line is too long: its first bytes
        self._tail = b""
        self._over = False

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        """The lines ``chunk`` completes (without their newline), in order."""
        done: list[bytes | Oversized] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            self._add(piece)
            if end < 0:
                return done
            done.append(self._take())
            start = end + 1

    def _add(self, piece: bytes) -> None:
        if not piece:
            return
        self._size += len(piece)
        if not self._over:
            self._parts.append(piece)
            if self._size <= self._max:
                return
            whole = b"".join(self._parts)
            self._parts = []
            self._head, self._tail, self._over = whole[: self._head_max], whole[-self._tail_max:], True
            return
        self._tail = (self._tail + piece)[-self._tail_max:]

    def _take(self) -> bytes | Oversized:
        line: bytes | Oversized
        line = Oversized(self._head, self._tail, self._size) if self._over else b"".join(self._parts)
        self._parts, self._size, self._head, self._tail, self._over = [], 0, b"", b"", False
        return line.rstrip(b"\r") if isinstance(line, bytes) else line


_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})')
_TEXT = re.compile(r'"text"\s*:\s*"')


def request_id(line: Oversized) -> int | str | None:
    """The JSON-RPC id of a cut message, found near its start or its end; None when neither holds it."""
    for part in (line.head[:4096], line.tail):
        found = _ID.findall(part)
        if found:
            value = json.loads(found[0] if part is line.head[:4096] else found[-1])
            return value if isinstance(value, int | str) else None
    return None


def first_text(head: bytes) -> str:
    """The start of the first ``"text"`` string of a cut JSON message ("" when there is none)."""
    text = head.decode("utf-8", errors="ignore")
    found = _TEXT.search(text)
    if found is None:
        return ""
    rest = text[found.end():]
    for trim in range(8):  # a cut in the middle of an escape ("\\", "\\u12") is trimmed off
        candidate = rest[: len(rest) - trim] if trim else rest
        try:
            value, _ = json.decoder.scanstring(candidate + '"', 0)  # type: ignore[attr-defined]
        except ValueError:
            continue
        return str(value)
    return ""
