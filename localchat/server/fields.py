"""Fields the API surfaces share beyond parsing.py's: tools, tool_choice, structured output, and the
small type checks their shapes need, each problem one sentence naming the field.

The tools each surface sends differ only in their wrapping (Anthropic's ``input_schema``, the
Responses API's flat ``{"type": "function", "name", "parameters"}``, the nested
``{"type": "function", "function": {...}}`` of chat completions and Ollama); each surface unwraps
them and builds engine ``Tool``s here, and ``checked_tools`` refuses a bad set with the engine's own
sentences (tooluse/validate.py) before anything is queued.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from localchat.engine.errors import ToolChoiceError, ToolRequestError
from localchat.engine.tooluse.validate import check_tools
from localchat.engine.types import (
    ChatMessage,
    ConstraintKind,
    EngineInfo,
    OutputConstraint,
    Tool,
    ToolCall,
    ToolChoice,
    ToolChoiceMode,
)
from localchat.server.errors import bad_request


def mapping(value: Any, where: str, example: str = "") -> dict[str, Any]:
    """``value`` as an object, or a 400 that says what ``where`` must be."""
    if not isinstance(value, dict):
        shown = f" like {example}" if example else ""
        raise bad_request(
            f"'{where}' must be an object{shown}, not {type(value).__name__}.", where, "invalid_type"
        )
    return value


def listing(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise bad_request(f"'{where}' must be a list, not {type(value).__name__}.", where, "invalid_type")
    return value


def text(value: Any, where: str, default: str | None = None) -> str:
    if value is None and default is not None:
        return default
    if not isinstance(value, str):
        raise bad_request(f"'{where}' must be a string, not {type(value).__name__}.", where, "invalid_type")
    return value


def flag(body: Mapping[str, Any], key: str, default: bool) -> bool:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad_request(f"'{key}' must be true or false.", key, "invalid_type")
    return value


def strings(body: Mapping[str, Any], key: str, most: int = 16) -> tuple[str, ...]:
    """A list of strings (Anthropic's ``stop_sequences``), empty ones left out."""
    value = body.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise bad_request(f"'{key}' must be a list of strings.", key, "invalid_type")
    if len(value) > most:
        raise bad_request(f"'{key}' may hold at most {most} strings.", key, "invalid_value")
    return tuple(v for v in value if v)


def tool(name: Any, description: Any, schema: Any, where: str) -> Tool:
    """One engine Tool from a surface's name, description and JSON Schema of the arguments."""
    name = text(name, f"{where}.name")
    description = text(description, f"{where}.description", "")
    if schema is None:
        schema = {"type": "object", "properties": {}}
    if not isinstance(schema, dict):
        raise bad_request(f"'{where}' needs its parameters as a JSON Schema object.", where, "invalid_type")
    return Tool(name, description, json.dumps(schema, ensure_ascii=False))


def function_tools(value: Any, where: str = "tools") -> list[Tool]:
    """Tools in the nested shape of chat completions and Ollama:
    ``[{"type": "function", "function": {"name", "description", "parameters"}}]``."""
    tools = []
    for i, raw in enumerate(listing(value or [], where)):
        at = f"{where}[{i}]"
        spec = mapping(raw, at, '{"type": "function", "function": {"name": "...", "parameters": {...}}}')
        kind = spec.get("type", "function")
        if kind != "function":
            raise bad_request(
                f"'{at}.type' is {kind!r}; this server runs function tools (type \"function\").",
                f"{at}.type",
                "unsupported_tool",
            )
        fn = mapping(spec.get("function"), f"{at}.function", '{"name": "...", "parameters": {...}}')
        tools.append(tool(fn.get("name"), fn.get("description"), fn.get("parameters"), f"{at}.function"))
    return tools


CHOICE_MODES = {"auto": ToolChoiceMode.AUTO, "none": ToolChoiceMode.NONE, "required": ToolChoiceMode.REQUIRED}


def tool_choice(value: Any) -> ToolChoice:
    """``tool_choice``: "auto", "none", "required", or a function named as chat completions do
    (``{"type": "function", "function": {"name": ...}}``) or as the Responses API does
    (``{"type": "function", "name": ...}``)."""
    if value is None:
        return ToolChoice()
    if isinstance(value, str):
        if value not in CHOICE_MODES:
            raise bad_request(
                "'tool_choice' must be auto, none, required or "
                '{"type": "function", "function": {"name": ...}}; it was ' + repr(value) + ".",
                "tool_choice",
                "invalid_value",
            )
        return ToolChoice(CHOICE_MODES[value])
    spec = mapping(value, "tool_choice", '{"type": "function", "function": {"name": "..."}}')
    if spec.get("type") != "function":
        raise bad_request(
            "'tool_choice' may name a function tool only "
            '({"type": "function", "function": {"name": ...}}).',
            "tool_choice",
            "invalid_value",
        )
    if "function" in spec:
        fn = mapping(spec["function"], "tool_choice.function", '{"name": "..."}')
        name = text(fn.get("name"), "tool_choice.function.name")
    else:
        name = text(spec.get("name"), "tool_choice.name")
    return ToolChoice(ToolChoiceMode.FUNCTION, name)


def checked_tools(
    tools: Sequence[Tool], choice: ToolChoice, info: EngineInfo | None = None
) -> tuple[Tool, ...]:
    """The tools, once the engine's own rules accept them with ``choice`` (else a 400 with its sentence);
    with ``info``, also for the loaded model (tools need its chat template)."""
    templated = info is None or info.target.has_chat_template
    try:
        check_tools(tools, choice, templated=templated)
    except ToolChoiceError as exc:
        raise bad_request(str(exc), "tool_choice", "invalid_tools") from None
    except ToolRequestError as exc:
        raise bad_request(str(exc), "tools" if tools else "tool_choice", "invalid_tools") from None
    return tuple(tools)


def reply_format(fmt: Mapping[str, Any], where: str, nested: bool) -> OutputConstraint | None:
    """The constraint a reply format asks for: ``{"type": "text"}`` (none), ``"json_object"`` or
    ``"json_schema"`` with its ``schema`` and ``strict`` under ``json_schema`` (``nested``: OpenAI
    Chat's ``response_format``) or beside the type (OpenAI Responses' ``text.format``)."""
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return OutputConstraint(ConstraintKind.JSON_OBJECT)
    if kind == "json_schema":
        spec = (mapping(fmt.get("json_schema"), f"{where}.json_schema",
                        '{"name": "answer", "schema": {...}, "strict": true}') if nested else fmt)
        at = f"{where}.json_schema.schema" if nested else f"{where}.schema"
        if not isinstance(spec.get("schema"), dict):
            raise bad_request(f"'{at}' must be the JSON Schema of the answer (an object).", at,
                              "missing_field")
        return json_constraint(spec["schema"], at, flag(spec, "strict", False))
    raise bad_request(f"'{where}.type' must be text, json_object or json_schema; it was {kind!r}.",
                      f"{where}.type", "invalid_value")


def json_constraint(schema: Any, where: str, strict: bool = True) -> OutputConstraint:
    """Structured output: a JSON Schema the whole reply must match (None or {}: any JSON object)."""
    if schema is None or schema == {}:
        return OutputConstraint(ConstraintKind.JSON_OBJECT)
    if not isinstance(schema, dict):
        raise bad_request(f"'{where}' must be a JSON Schema object.", where, "invalid_type")
    return OutputConstraint(ConstraintKind.JSON_SCHEMA, json.dumps(schema, ensure_ascii=False), strict)


def arguments_object(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as an object (Anthropic's ``input``, Ollama's ``arguments``); the engine reads
    calls whose arguments are a JSON object, and anything else is shown under "arguments"."""
    try:
        value = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError:
        return {"arguments": call.arguments}
    return value if isinstance(value, dict) else {"arguments": value}


def arguments_text(value: Any, where: str) -> str:
    """A call's arguments sent back to the model (an object, or JSON text of one) as JSON text."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    raise bad_request(f"'{where}' must be an object (or the JSON text of one).", where, "invalid_type")


def one_system(messages: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
    """The leading system messages (instructions, then a developer or system message) joined as one:
    chat templates take a single system message, first."""
    n = 0
    while n < len(messages) and messages[n].role == "system":
        n += 1
    if n <= 1:
        return tuple(messages)
    joined = "\n\n".join(m.content for m in messages[:n] if m.content)
    return (ChatMessage("system", joined), *messages[n:])
