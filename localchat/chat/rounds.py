"""A reply's tool rounds, as the store keeps them: what the model wrote before each set of calls,
each call with what went back to the model, and the sentences said along the way.

A reply that used tools is still one stored message: its ``content`` is the answer the model gave last,
and its ``tools`` column holds the rounds before it (``{"rounds": [...], "notes": [...]}``), so
regenerating, switching between answers, deleting and exporting treat it as one reply. The prompt
unfolds it again into the assistant-call / tool-result turns the model saw (chat/prompt.py).

Plain JSON in, frozen values out: a value of the wrong shape (a file edited by hand, another
version's) is skipped with a log line, never an error that keeps a chat from opening.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# What became of a call, as stored ("done": the tool answered; "error": it answered with an error).
CALL_STATUSES = ("done", "error", "failed", "timed_out", "cancelled", "denied", "not_run")


@dataclass(frozen=True)
class ToolCallRecord:
    id: str
    name: str  # the tool's name as the model called it
    arguments: str  # the arguments as the model wrote them (JSON text)
    server: str = ""  # the tool server that ran it ("" when none did)
    result: str = ""  # exactly what went back to the model
    status: str = "done"
    note: str = ""  # a sentence for the user (an error, a time-out, a result cut short)
    seconds: float = 0.0


def call_time(seconds: float) -> str:
    """How long a call took, in a unit that shows it: "12 ms", "0.4 s", "12 s", "2 min 5 s"."""
    if seconds < 0.1:
        return f"{max(1, round(seconds * 1000))} ms"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{round(seconds)} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


@dataclass(frozen=True)
class ToolRound:
    """One reply of the model that ended in tool calls, and what became of them."""

    text: str  # what the model wrote before its calls
    calls: tuple[ToolCallRecord, ...]
    reasoning: str = ""  # its thinking before them
    stats: dict[str, Any] | None = None  # the round's statistics, as a reply's are kept


@dataclass(frozen=True)
class ReplyTools:
    rounds: tuple[ToolRound, ...] = ()
    notes: tuple[str, ...] = ()  # sentences said while the reply was written (a server that failed)

    def __bool__(self) -> bool:
        return bool(self.rounds or self.notes)


def dump(tools: ReplyTools) -> str | None:
    if not tools:
        return None
    return json.dumps({
        "rounds": [
            {"text": r.text, "reasoning": r.reasoning, "stats": r.stats,
             "calls": [c.__dict__ for c in r.calls]}
            for r in tools.rounds
        ],
        "notes": list(tools.notes),
    }, separators=(",", ":"), ensure_ascii=False)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _call(raw: object) -> ToolCallRecord | None:
    if not isinstance(raw, dict) or not all(isinstance(raw.get(k), str) for k in ("id", "name")):
        return None
    seconds = raw.get("seconds", 0.0)
    status = raw.get("status")
    return ToolCallRecord(
        raw["id"], raw["name"], _text(raw.get("arguments")), _text(raw.get("server")),
        _text(raw.get("result")), status if status in CALL_STATUSES else "failed", _text(raw.get("note")),
        float(seconds) if isinstance(seconds, int | float) and not isinstance(seconds, bool) else 0.0,
    )


def load(text: str | None, where: str = "") -> ReplyTools:
    """The rounds kept in a message's ``tools`` column (empty when there are none or they do not read)."""
    if not text:
        return ReplyTools()
    try:
        raw = json.loads(text)
    except ValueError:
        log.warning("%s: unreadable tool rounds; shown without them", where)
        return ReplyTools()
    if not isinstance(raw, dict):
        return ReplyTools()
    rounds: list[ToolRound] = []
    for item in raw.get("rounds", []) if isinstance(raw.get("rounds"), list) else []:
        if not isinstance(item, dict):
            continue
        calls = tuple(c for c in (_call(x) for x in item.get("calls", []) or []) if c is not None)
        stats = item.get("stats")
        rounds.append(ToolRound(_text(item.get("text")), calls, _text(item.get("reasoning")),
                                stats if isinstance(stats, dict) else None))
    notes = raw.get("notes", [])
    return ReplyTools(tuple(rounds), tuple(n for n in notes if isinstance(n, str)) if isinstance(notes, list)
                      else ())
