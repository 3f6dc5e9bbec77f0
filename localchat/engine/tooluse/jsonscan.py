"""One JSON call object read a character at a time, keeping the raw text of its top-level values.

The reply parser needs to know, while a call is still being written, its name (once
the string is closed) and the raw text of its arguments so far (to stream them).
A full JSON parser answers only at the end; this scanner tracks strings, escapes
and nesting, and records where each top-level value starts and ends. It judges
structure only at the top level (keys, colons, commas); what is inside a value is
the value's business (the arguments are passed on as written).

Small models copy the ``{{"name": ...}}`` of Qwen2.5's template (a Jinja string whose
doubled braces are not Jinja syntax there): a doubled opening brace is read as one,
and one extra closing brace after the object is taken with it.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

_WS = " \t\r\n"


class _At(enum.Enum):
    START = "start"  # before the opening brace
    KEY = "key"  # expecting a key or the closing brace
    IN_KEY = "in_key"
    COLON = "colon"
    VALUE = "value"  # expecting a value
    IN_VALUE = "in_value"
    AFTER_VALUE = "after_value"  # expecting a comma or the closing brace
    EXTRA_CLOSE = "extra_close"  # after a doubled-brace object: one more "}" may follow
    DONE = "done"
    BAD = "bad"


_EVENTS = frozenset({_At.COLON, _At.AFTER_VALUE, _At.EXTRA_CLOSE, _At.DONE, _At.BAD})


@dataclass
class Value:
    """A top-level value: its raw text span in the scanned text and its kind."""

    start: int
    end: int = -1  # -1 while it is being written
    kind: str = ""  # "container" ({ or [), "string" or "scalar"

    @property
    def complete(self) -> bool:
        return self.end >= 0


class CallScanner:
    """Feed characters of one JSON object; it stops at the object's end or at a structural error."""

    def __init__(self) -> None:
        self.text = ""
        self.values: dict[str, Value] = {}
        self.keys: list[str] = []  # in the order written
        self._at = _At.START
        self._depth = 0  # inside the current container value
        self._in_string = False
        self._escaped = False
        self._doubled = False
        self._key_start = 0
        self._current: Value | None = None
        self.events = 0  # keys and values completed, the end or an error, so far

    @property
    def done(self) -> bool:
        return self._at is _At.DONE

    @property
    def bad(self) -> bool:
        return self._at is _At.BAD

    def feed(self, chars: str) -> int:
        """Read ``chars`` up to the next event (a key or value complete, the end, an error);
        returns how many were taken. Stopping at each event lets the reader judge the call at
        the same points however the text was cut into pieces."""
        for i, ch in enumerate(chars):
            if self._at in (_At.DONE, _At.BAD):
                return i
            if self._at is _At.EXTRA_CLOSE and ch not in _WS:
                self._at = _At.DONE
                if ch != "}":
                    return i
            self.text += ch
            events = self.events
            self._step(ch, len(self.text) - 1)
            if self.events != events:
                return i + 1
        return len(chars)

    def finish(self) -> None:
        """The text ended: an object waiting for its optional extra brace is complete."""
        if self._at is _At.EXTRA_CLOSE:
            self._at = _At.DONE

    def string(self, key: str) -> str | None:
        """A complete string value's text, or None."""
        v = self.values.get(key)
        if v is None or not v.complete or v.kind != "string":
            return None
        try:
            out = json.loads(self.text[v.start : v.end])
        except json.JSONDecodeError:
            return None
        return out if isinstance(out, str) else None

    def raw(self, key: str) -> str:
        """The raw text of ``key``'s value as far as it is written."""
        v = self.values.get(key)
        if v is None:
            return ""
        return self.text[v.start : v.end if v.complete else len(self.text)]

    # -- the state machine ------------------------------------------------------------
    def _step(self, ch: str, pos: int) -> None:
        before = self._at
        self._step_at(ch, pos)
        if self._at is not before and self._at in _EVENTS:
            self.events += 1

    def _step_at(self, ch: str, pos: int) -> None:
        at = self._at
        if at is _At.START:
            if ch == "{":
                self._at = _At.KEY
            elif ch not in _WS:
                self._at = _At.BAD
        elif at is _At.KEY:
            if ch == '"':
                self._at, self._key_start = _At.IN_KEY, pos
            elif ch == "}" and not self.keys:
                self._close()
            elif ch == "{" and not self.keys and not self._doubled:
                self._doubled = True
            elif ch not in _WS:
                self._at = _At.BAD
        elif at is _At.IN_KEY:
            if self._escaped:
                self._escaped = False
            elif ch == "\\":
                self._escaped = True
            elif ch == '"':
                try:
                    key = json.loads(self.text[self._key_start : pos + 1])
                except json.JSONDecodeError:
                    key = self.text[self._key_start + 1 : pos]
                self.keys.append(key)
                self._at = _At.COLON
        elif at is _At.COLON:
            if ch == ":":
                self._at = _At.VALUE
            elif ch not in _WS:
                self._at = _At.BAD
        elif at is _At.VALUE:
            if ch in _WS:
                return
            value = Value(pos)
            self.values.setdefault(self.keys[-1], value)
            self._current = value
            self._at = _At.IN_VALUE
            if ch in "{[":
                value.kind, self._depth = "container", 1
            elif ch == '"':
                value.kind, self._in_string = "string", True
            elif ch in ",}":
                self._at = _At.BAD  # a key without a value
            else:
                value.kind = "scalar"
        elif at is _At.IN_VALUE:
            self._in_value(ch, pos)
        elif at is _At.AFTER_VALUE:
            if ch == ",":
                self._at = _At.KEY
            elif ch == "}":
                self._close()
            elif ch not in _WS:
                self._at = _At.BAD

    def _in_value(self, ch: str, pos: int) -> None:
        value = self._current
        assert value is not None
        if self._in_string:
            if self._escaped:
                self._escaped = False
            elif ch == "\\":
                self._escaped = True
            elif ch == '"':
                self._in_string = False
                if value.kind == "string":
                    self._end_value(pos + 1)
            return
        if value.kind == "scalar":
            if ch in ",}":
                raw = self.text[value.start : pos]
                self._end_value(value.start + len(raw.rstrip()))
                self._step_at(ch, pos)  # the comma or brace belongs to the object
            return
        if ch == '"':
            self._in_string = True
        elif ch in "{[":
            self._depth += 1
        elif ch in "}]":
            self._depth -= 1
            if self._depth == 0:
                self._end_value(pos + 1)

    def _end_value(self, end: int) -> None:
        assert self._current is not None
        self._current.end = end
        self._current = None
        self._at = _At.AFTER_VALUE

    def _close(self) -> None:
        self._at = _At.EXTRA_CLOSE if self._doubled else _At.DONE
