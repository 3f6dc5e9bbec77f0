"""Chat completions' fields for tools and structured output, read into the engine's types.

- ``tools`` (``[{"type": "function", "function": {...}}]``), ``tool_choice`` and
  ``parallel_tool_calls``, checked by the engine's own rules before anything is queued
  (fields.checked_tools);
- an assistant message's ``tool_calls`` (arguments as JSON text, as OpenAI sends them) and a
  ``tool`` message's ``tool_call_id``, named after the call it answers;
- llama-server's ``reasoning_format`` ("none": the thinking stays in the content);
- ``response_format`` (``text``, ``json_object``, ``json_schema``), llama-server's ``json_schema``
  and its ``grammar``: Lark (llguidance's dialect, also when it starts with llama.cpp's
  ``%llguidance`` marker), or GBNF when the text defines its rules with ``::=``, which Lark never
  does.

Each problem is a 400 with a sentence naming the field (``param``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from localchat.engine.types import ConstraintKind, EngineInfo, OutputConstraint, Tool, ToolCall, ToolChoice
from localchat.server import fields
from localchat.server.errors import bad_request

LLGUIDANCE_MARK = "%llguidance"


def chat_tools(body: Mapping[str, Any], info: EngineInfo | None) -> tuple[tuple[Tool, ...], ToolChoice, bool]:
    """(tools, tool_choice, parallel_tool_calls) of a chat completions body."""
    tools = fields.function_tools(body.get("tools"))
    choice = fields.tool_choice(body.get("tool_choice"))
    return fields.checked_tools(tools, choice, info), choice, fields.flag(body, "parallel_tool_calls", True)


def assistant_calls(message: Mapping[str, Any], index: int) -> tuple[ToolCall, ...]:
    """The ``tool_calls`` of ``messages[index]``, an assistant message: ``[{"id", "type": "function",
    "function": {"name", "arguments"}}]``, the arguments JSON text (an object is taken too)."""
    where = f"messages[{index}]"
    calls = []
    for j, raw in enumerate(fields.listing(message.get("tool_calls") or [], f"{where}.tool_calls")):
        at = f"{where}.tool_calls[{j}]"
        call = fields.mapping(raw, at, '{"id": "call_1", "type": "function", "function": {...}}')
        fn = fields.mapping(call.get("function"), f"{at}.function", '{"name": "...", "arguments": "{}"}')
        call_id = call.get("id")
        call_id = call_id if isinstance(call_id, str) and call_id else f"call_{index}_{j}"
        name = fields.text(fn.get("name"), f"{at}.function.name")
        arguments = fields.arguments_text(fn.get("arguments", "{}"), f"{at}.function.arguments")
        calls.append(ToolCall(call_id, name, arguments))
    return tuple(calls)


def separate_reasoning(body: Mapping[str, Any]) -> bool:
    """llama-server's ``reasoning_format``: "none" leaves the thinking in the content; any other
    ("auto", "deepseek"...) or none given puts it in ``reasoning_content``."""
    value = body.get("reasoning_format")
    return value is None or fields.text(value, "reasoning_format") != "none"


def _grammar(value: Any) -> OutputConstraint:
    text = fields.text(value, "grammar").strip()
    if not text:
        raise bad_request("'grammar' is empty; send a Lark grammar (or llama.cpp's GBNF).", "grammar",
                          "invalid_value")
    if text.startswith(LLGUIDANCE_MARK):
        return OutputConstraint(ConstraintKind.LARK, text.partition("\n")[2])  # "%llguidance {}" line
    kind = ConstraintKind.GBNF if "::=" in text else ConstraintKind.LARK
    return OutputConstraint(kind, text)


def _response_format(value: Any) -> OutputConstraint | None:
    fmt = fields.mapping(value, "response_format", '{"type": "json_schema", "json_schema": {...}}')
    return fields.reply_format(fmt, "response_format", nested=True)


def output_constraint(body: Mapping[str, Any]) -> tuple[OutputConstraint | None, str]:
    """(the constraint, the field it came from) of ``response_format``, ``json_schema`` or ``grammar``;
    at most one of them may constrain a reply."""
    found: list[tuple[OutputConstraint, str]] = []
    if body.get("response_format") is not None:
        made = _response_format(body["response_format"])
        if made is not None:
            found.append((made, "response_format"))
    if body.get("json_schema") is not None:
        found.append((fields.json_constraint(body["json_schema"], "json_schema"), "json_schema"))
    if body.get("grammar") is not None:
        found.append((_grammar(body["grammar"]), "grammar"))
    if len(found) > 1:
        names = " and ".join(f"'{where}'" for _, where in found)
        raise bad_request(f"Send one constraint for the reply, not {names}.", found[1][1], "invalid_value")
    return found[0] if found else (None, "")
