"""A conversation written out as Markdown (to read or share) or JSON (to keep or process).

The JSON carries what the store knows of each message: role, text, when it was
written, whether it was complete, and a reply's statistics as the services
layer stored them (tokens, seconds, drafted and accepted tokens, the model's
name); a reply that used tools carries its rounds (each call's tool, server,
arguments, result, outcome and time) and the sentences said along the way, and
a thinking model's reply its thinking. ``FORMAT`` names the layout so a reader
can tell a later change (2 added ``tool_rounds``, ``notes`` and ``reasoning``).
The Markdown shows each tool call with its arguments and result.
Writing goes to a temporary file beside the target and is renamed over it,
so a failed export never leaves half a file where an earlier one was; a
failure is ``ExportError`` with a sentence.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from localchat.chat.rounds import ToolCallRecord, ToolRound, call_time
from localchat.chat.store import Conversation, Message

FORMAT = "localchat-chat/2"
KINDS = ("markdown", "json")
_ROLE_HEADINGS = {"user": "You", "assistant": "Assistant", "system": "System"}


class ExportError(Exception):
    """The chat could not be written; the message is a sentence for the user."""


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(seconds))


def to_markdown(conversation: Conversation, messages: Sequence[Message]) -> str:
    """The chat as a Markdown document: a title, the system prompt, then one section per message."""
    lines = [f"# {conversation.title}", "", f"_Exported from localchat, {_iso(time.time())}_", ""]
    if conversation.system_prompt.strip():
        lines += ["**System prompt:**", "", conversation.system_prompt.strip(), ""]
    for message in messages:
        who = _ROLE_HEADINGS.get(message.role, message.role)
        model = (message.stats or {}).get("model")
        if message.role == "assistant" and isinstance(model, str) and model:
            who = model
        lines += [f"## {who}", ""]
        if message.reasoning.strip():
            lines += [_quoted("Thinking", message.reasoning), ""]
        for round_ in message.tools.rounds:
            lines += _round_markdown(round_)
        lines += [f"_{note}_" for note in message.tools.notes] + ([""] if message.tools.notes else [])
        lines += [message.content.rstrip(), ""]
        if message.role == "assistant" and not message.complete:
            lines += ["_(stopped before the end)_", ""]
    return "\n".join(lines).rstrip() + "\n"


def _quoted(title: str, text: str) -> str:
    body = [f"> {line}" if line else ">" for line in text.strip().splitlines()]
    return "\n".join([f"> **{title}**", ">", *body])


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in ``text``."""
    run = best = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        best = max(best, run)
    return "`" * max(3, best + 1)


def _call_markdown(call: ToolCallRecord) -> list[str]:
    where = f" ({call.server})" if call.server else ""
    outcome = "" if call.status == "done" else f", {call.status.replace('_', ' ')}"
    took = f", {call_time(call.seconds)}" if call.seconds > 0 else ""  # a call that never ran took no time
    lines = [f"**Tool call:** `{call.name}`{where}{took}{outcome}", ""]
    fence = _fence(call.arguments + call.result)
    lines += [f"{fence}json", call.arguments or "{}", fence, ""]
    if call.note:
        lines += [f"_{call.note}_", ""]
    lines += ["Result:", "", fence, call.result, fence, ""]
    return lines


def _round_markdown(round_: ToolRound) -> list[str]:
    lines = [_quoted("Thinking", round_.reasoning), ""] if round_.reasoning.strip() else []
    if round_.text.strip():
        lines += [round_.text.rstrip(), ""]
    for call in round_.calls:
        lines += _call_markdown(call)
    return lines


def _tools_json(message: Message) -> dict[str, Any]:
    if not message.tools and not message.reasoning:
        return {}
    extra: dict[str, Any] = {}
    if message.tools.rounds:
        extra["tool_rounds"] = [
            {"text": r.text, "reasoning": r.reasoning, "stats": r.stats,
             "calls": [dict(c.__dict__) for c in r.calls]}
            for r in message.tools.rounds
        ]
    if message.tools.notes:
        extra["notes"] = list(message.tools.notes)
    if message.reasoning:
        extra["reasoning"] = message.reasoning
    return extra


def to_json(conversation: Conversation, messages: Sequence[Message]) -> str:
    """The chat as JSON: the conversation's facts and each message with its statistics."""
    document: dict[str, Any] = {
        "format": FORMAT,
        "title": conversation.title,
        "system_prompt": conversation.system_prompt,
        "created": _iso(conversation.created),
        "updated": _iso(conversation.updated),
        "messages": [
            {
                "role": m.role,
                "content": m.content,
                "created": _iso(m.created),
                "complete": m.complete,
                "stats": m.stats,
                **_tools_json(m),
            }
            for m in messages
        ],
    }
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


def file_name(title: str, kind: str) -> str:
    """The file name an export of the chat ``title`` is offered under ("My chat.md")."""
    stem = "".join(ch if ch.isalnum() or ch in " -_" else "_" for ch in title).strip() or "chat"
    return stem + suffix(kind)


def suffix(kind: str) -> str:
    return ".md" if kind == "markdown" else ".json"


def render(kind: str, conversation: Conversation, messages: Sequence[Message]) -> str:
    if kind == "markdown":
        return to_markdown(conversation, messages)
    if kind == "json":
        return to_json(conversation, messages)
    raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")


def write_export(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all; ExportError says why it failed."""
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise ExportError(_sentence(path, exc)) from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.replace(temp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise ExportError(_sentence(path, exc)) from exc


def _sentence(path: Path, exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    if isinstance(exc, FileNotFoundError):
        reason = "the folder does not exist"
    elif isinstance(exc, PermissionError):
        reason = "you may not write in that folder"
    elif exc.errno == errno.ENOSPC:
        reason = "the disk is full"
    return f"Could not export the chat to {path}: {reason}."
