"""The grammar a tool call must follow, as llguidance Lark text, for the grammar engine to enforce.

This module writes the grammar; it enforces nothing. ``tool_grammar`` returns a
``ToolGrammar``: the Lark text (each tool's JSON Schema embedded with ``%json``), and
whether it is *lazy* (tool_choice auto: the reply is free until a trigger appears,
and the grammar constrains from the trigger on, the trigger being the grammar's first
text) or *whole* (required, or one named function: the reply must be calls, after the
model's thinking if it thinks).

Markers that are single special tokens of the vocabulary (``special``: text -> token id)
are written as llguidance token references (``<[151657]>``): llguidance's tokenizer for
llama.cpp marks control tokens and user-defined ``<...>`` tokens as special, and those do
not match a quoted string. Other markers are quoted text.

Qwen2.5-Coder, two tools, parallel calls, lazy (tool_choice auto)::

    %llguidance {}
    start: call (WS? call)*
    call: <[151657]> WS? body WS? <[151658]>
    body: %json {"anyOf": [{"type": "object", "properties": {"name": {"const": "get_weather"},
        "arguments": {...}}, "required": ["name", "arguments"], "additionalProperties": false}, ...],
        "x-guidance": {"lenient": true, "whitespace_pattern": ...}}
    WS: /[ \\t\\r\\n]{1,4}/

with the trigger ``<tool_call>`` (token 151657).

``ToolGrammar.reply`` is the grammar of the whole reply, what the engine compiles and the decode loop
enforces. Whole: ``lark`` itself. Lazy: free text (after the model's thinking, where it thinks), then
optionally the calls, which start at a trigger:

    start: LC_FREE | LC_FREE? calls
    LC_FREE: /(?s:.+)/

A regular expression never matches a special token, so free text cannot hold the trigger token: the
moment the model writes it, ``calls`` takes over and forces the rest of the call (the tool's name among
the listed ones, its arguments by its schema, the closing marker). Inside a thinking block the trigger
token is not allowed at all (the think rules hold text only), so a trigger there never starts a call.
Where the trigger is not one special token of the vocabulary (the generic format on a model whose
vocabulary lacks ``<tool_call>``: SmolLM2, Gemma 3, Phi-4) ``reply`` is None and ``after_trigger`` is the
grammar of what follows the trigger's text: the engine makes it an ``OutputConstraint`` with that
trigger, whose lazy grammar (engine/grammar.py) leaves the text free until the trigger's first
occurrence, however the tokens split it, and forces the call from there. Not enforced, the calls read
from what the model writes: a thinking model's text trigger (it would start a call inside the thinking,
where the reader takes it for thinking), and Llama 3's bare JSON object (a reply that starts with ``{``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from localchat.engine.grammar import JSON_WHITESPACE
from localchat.engine.tooluse.formats import LLAMA3, ThinkingTags, ToolFormat
from localchat.engine.tooluse.validate import tool_schema
from localchat.engine.types import Tool, ToolChoice, ToolChoiceMode

# Whitespace between markers and calls: bounded, so that a model that does not know what comes next (the
# closing marker after a call) cannot pad the reply with blanks until max_tokens; after at most four the
# closer is forced. Inside the calls' JSON the same bound as a JSON-schema reply's (engine/grammar.py).
WS_RULE = "WS: /[ \\t\\r\\n]{1,4}/"


@dataclass(frozen=True)
class Trigger:
    """Text that starts a call under a lazy grammar; the grammar's match begins with it."""

    text: str
    token: int | None = None  # the text is this one special token
    at_start: bool = False  # counts only as the reply's first text (after thinking and blanks)


@dataclass(frozen=True)
class ToolGrammar:
    lark: str  # llguidance's Lark dialect
    lazy: bool  # True: free text until a trigger; False: the whole reply follows the grammar
    triggers: tuple[Trigger, ...] = ()  # lazy: what starts the grammar
    # lazy: a trigger inside the model's thinking does not count (``opens_thinking``: the prompt
    # opened the block, so the reply starts inside it)
    thinking: ThinkingTags | None = None
    opens_thinking: bool = False
    # the grammar of the whole reply (see the module's docstring); None: not enforced
    reply: str | None = None
    # lazy, where the one trigger is text, not a special token: the grammar of what follows the trigger
    # (for an OutputConstraint with that trigger, engine/grammar.py's lazy grammar); None: not enforced
    after_trigger: str | None = None


def tool_grammar(
    fmt: ToolFormat,
    tools: Sequence[Tool],
    choice: ToolChoice,
    parallel: bool,
    special: Mapping[str, int],
    thinking: ThinkingTags | None = None,
    opens_thinking: bool = False,
) -> ToolGrammar | None:
    """The grammar for a request's calls; None when no call is allowed (no tools, tool_choice none)."""
    if choice.mode is ToolChoiceMode.NONE or not tools:
        return None
    if choice.mode is ToolChoiceMode.FUNCTION:
        tools = [t for t in tools if t.name == choice.name]
        parallel = False
    body = json.dumps(_calls_schema(fmt, tools, parallel), ensure_ascii=False)
    opener = _literal(fmt.openers[0], special)
    if fmt.array:
        call_rules = [f"calls: {opener} WS? body", f"body: %json {body}"]
    elif fmt is LLAMA3:
        one = f"({opener} WS?)? body"
        calls = "call (WS? \";\"? WS? call)*" if parallel else "call"
        call_rules = [f"calls: {calls}", f"call: {one}", f"body: %json {body}"]
    else:
        closer = f" WS? {_literal(fmt.closer, special)}" if fmt.closer else ""
        calls = "call (WS? call)*" if parallel else "call"
        call_rules = [f"calls: {calls}", f"call: {opener} WS? body{closer}", f"body: %json {body}"]
    lazy = choice.mode is ToolChoiceMode.AUTO
    start, think_rules = "start: calls", list[str]()
    if not lazy and thinking is not None:
        start, think_rules = _thinking_rules(thinking, special, opens_thinking)
    rules = ["%llguidance {}", "", start, *call_rules, *think_rules, WS_RULE]
    triggers: tuple[Trigger, ...] = ()
    if lazy:
        triggers = tuple(Trigger(o, special.get(o)) for o in fmt.openers)
        if fmt is LLAMA3:  # Llama writes a call as the whole reply: a JSON object
            triggers += (Trigger("{", None, at_start=True),)
    lark = "\n".join(rules) + "\n"
    if not lazy:
        return ToolGrammar(lark, lazy, triggers, None, False, lark)
    reply = after = None
    if all(t.token is not None for t in triggers if not t.at_start):
        reply = _lazy_reply(call_rules, thinking, special, opens_thinking)
    elif thinking is None and fmt is not LLAMA3 and len(triggers) == 1:
        after = _after_trigger(fmt, call_rules, parallel, special)
    return ToolGrammar(lark, lazy, triggers, thinking, opens_thinking, reply, after)


def _after_trigger(fmt: ToolFormat, call_rules: list[str], parallel: bool, special: Mapping[str, int]) -> str:
    """What follows a text trigger (the first call's opener, which the lazy grammar matches): the rest of
    that call, then more calls where parallel calls are allowed."""
    if fmt.array:
        start = "start: WS? body"
    else:
        closer = f" WS? {_literal(fmt.closer, special)}" if fmt.closer else ""
        start = f"start: WS? body{closer}" + (" (WS? call)*" if parallel else "")
    rules = ["%llguidance {}", "", start, *call_rules[1:], WS_RULE]  # call_rules[0]: "calls", opener and all
    return "\n".join(rules) + "\n"


def _lazy_reply(call_rules: list[str], thinking: ThinkingTags | None, special: Mapping[str, int],
                opens_thinking: bool) -> str:
    """The whole reply under tool_choice auto: free text, then optionally the calls (a trigger token
    starts them); after the model's thinking where it thinks."""
    tail, think_rules = "LC_FREE | LC_FREE? calls", list[str]()
    if thinking is None:
        start = f"start: {tail}"
    else:
        think_start, think_rules = _thinking_rules(thinking, special, opens_thinking)
        # "start: think? calls" / "start: END WS? calls": the calls become the free tail
        head = think_start.removeprefix("start: ").removesuffix(" calls").removesuffix(" WS?")
        start = (f"start: {head} (WS? lc_tail)?" if opens_thinking
                 else f"start: {head} lc_tail?")
        think_rules.append(f"lc_tail: {tail}")
    rules = ["%llguidance {}", "", start, *call_rules, *think_rules, "LC_FREE: /(?s:.+)/", WS_RULE]
    return "\n".join(rules) + "\n"


def _thinking_rules(
    thinking: ThinkingTags, special: Mapping[str, int], opens_thinking: bool
) -> tuple[str, list[str]]:
    """A whole grammar lets the model think first (or finish the thinking its prompt opened)."""
    if thinking.close in special:  # text then the special token: no text can contain it
        end, rules = f"THINK_TEXT? {_literal(thinking.close, special)}", ["THINK_TEXT: /(?s:.+)/"]
    else:  # plain text: the thinking ends at the first close tag
        end, rules = "think_text", [f"think_text[lazy]: /(?s:.*){_regex_escape(thinking.close)}/"]
    if opens_thinking:
        return f"start: {end} WS? calls", rules
    return "start: think? calls", [f"think: {_literal(thinking.open, special)} {end} WS?", *rules]


def _calls_schema(fmt: ToolFormat, tools: Sequence[Tool], parallel: bool) -> dict[str, Any]:
    variants = [
        {
            "type": "object",
            "properties": {"name": {"const": t.name}, fmt.args_key: tool_schema(t)},
            "required": ["name", fmt.args_key],
            "additionalProperties": False,
        }
        for t in tools
    ]
    one: dict[str, Any] = variants[0] if len(variants) == 1 else {"anyOf": variants}
    if fmt.array:
        one = {"type": "array", "items": one, "minItems": 1, **({} if parallel else {"maxItems": 1})}
    # lenient: a keyword llguidance does not implement (a "format" it lacks) is ignored, not an error
    return {**one, "x-guidance": {"lenient": True, "whitespace_pattern": JSON_WHITESPACE}}


def _literal(text: str, special: Mapping[str, int]) -> str:
    token = special.get(text)
    return f"<[{token}]>" if token is not None else json.dumps(text)


def _regex_escape(text: str) -> str:
    """``text`` literally inside a Lark ``/.../`` regex (Rust syntax, where ``\\<`` is a word boundary)."""
    return "".join("\\" + c if c in _REGEX_META else c for c in text)


_REGEX_META = frozenset("\\.+*?()|[]{}^$#&-~/")
