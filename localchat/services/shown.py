"""What the window shows of a chat: stored messages (``shown_messages``), a reply's start and end
(the typed changes ChatSession emits), and a reply's statistics as the store keeps them."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from localchat.chat import Message
from localchat.chat.rounds import ReplyTools
from localchat.engine.stats import GenerationStats
from localchat.engine.textruns import valid_runs
from localchat.engine.types import FinishReason, GenerationResult


@dataclass(frozen=True)
class ShownMessage:
    """A stored message as the chat view shows it, its statistics read back from JSON."""

    role: str
    content: str
    stats: GenerationStats | None
    finish_reason: FinishReason | None
    drafted_runs: tuple[int, ...]
    complete: bool
    model: str = ""  # the name of the model that wrote a reply ("" when not recorded)
    id: int | None = None  # the stored row (delete, copy, switch between answers)
    variant: tuple[int, int] = (1, 1)  # which of the answers to its message this one is, of how many
    tools: ReplyTools = field(default_factory=ReplyTools)  # a reply's tool rounds before its answer
    reasoning: str = ""  # a reply's thinking before its answer


@dataclass(frozen=True)
class ReplyStart:
    conversation_id: int
    user_message: ShownMessage | None  # the message it answers, when the send added one


@dataclass(frozen=True)
class ReplyEnd:
    """How a reply ended: its text, the engine's result (None when it failed) and why, in words."""

    conversation_id: int
    text: str
    drafted_runs: tuple[int, ...]
    result: GenerationResult | None
    sentence: str = ""  # why it ended early, a save problem, the engine's notice; may be empty
    message_id: int | None = None  # the stored reply (None: not kept, the text stays as shown)
    variant: tuple[int, int] = (1, 1)  # which of the answers to its message it is, of how many
    tools: ReplyTools = field(default_factory=ReplyTools)  # its rounds and the sentences said on the way
    reasoning: str = ""  # its thinking before the answer


def stats_json(result: GenerationResult, drafted: tuple[int, ...], length: int) -> dict[str, Any]:
    """A reply's statistics as the store keeps them (read back by ``shown``)."""
    stats = dataclasses.asdict(result.stats)
    stats["finish_reason"] = result.finish_reason.value
    stats["drafter"] = result.speculation.drafter if result.speculation.active else "off"
    if any(drafted[1::2]) and sum(drafted) == length:
        stats["drafted_runs"] = list(drafted)
    return stats


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def read_stats(stored: dict[str, Any]) -> GenerationStats | None:
    """The statistics kept with a reply, or None when there are none or they do not read back (a file
    from another version, edited by hand): every figure a number, every list a list of numbers."""
    defaults = GenerationStats()
    values: dict[str, Any] = {}
    for f in dataclasses.fields(GenerationStats):
        if f.name not in stored:
            continue
        value = stored[f.name]
        if isinstance(getattr(defaults, f.name), tuple):
            if not isinstance(value, list | tuple) or not all(_number(v) for v in value):
                return None
            value = tuple(value)
        elif not _number(value):
            return None
        values[f.name] = value
    return GenerationStats(**values) if values else None  # a reply being written has only its model


def shown(message: Message, variant: tuple[int, int] = (1, 1)) -> ShownMessage:
    stored = message.stats or {}
    stats = read_stats(stored)
    try:
        reason: FinishReason | None = FinishReason(stored.get("finish_reason"))
    except ValueError:
        reason = None
    runs = valid_runs(stored.get("drafted_runs"))
    model = stored.get("model")
    return ShownMessage(
        message.role, message.content, stats, reason, runs, message.complete,
        model if isinstance(model, str) else "", message.id, variant, message.tools, message.reasoning,
    )


def shown_messages(every: Sequence[Message], hidden: Collection[int | None] = ()) -> list[ShownMessage]:
    """The user and assistant messages the chat view shows of a chat's rows (``every=True``): the shown
    answer of each message with its place among the answers, empty replies without tools left out, and
    ``hidden`` rows (the reply being written and the answer it replaces) neither shown nor counted."""
    groups: dict[int, list[int]] = {}
    for m in every:
        if m.variant_group is not None and m.id not in hidden:
            groups.setdefault(m.variant_group, []).append(m.id)
    listed: list[ShownMessage] = []
    for m in every:
        if not m.shown or m.id in hidden or m.role not in ("user", "assistant"):
            continue
        if m.role == "assistant" and not m.content.strip() and not m.tools:
            continue
        ids = groups.get(m.variant_group, [m.id]) if m.variant_group is not None else [m.id]
        listed.append(shown(m, (ids.index(m.id) + 1, len(ids))))
    return listed
