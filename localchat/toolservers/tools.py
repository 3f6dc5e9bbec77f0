"""The tools of a server as localchat offers them, checked one by one, and a call's result as text.

A tool whose name or input schema the engine could not use (a schema that is not valid JSON Schema,
say) is left out with a sentence; the server's other tools stay. A result is text for the model:
text blocks as they are, other blocks named in brackets, and at most ``max_chars`` of it, the rest
cut and said.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class ToolSpec:
    """One tool of one server: its own name there, its description, its input schema as JSON text."""

    server: str
    name: str
    description: str
    schema: str


def schema_problem(name: str, schema: object) -> str:
    """Why a tool with this input schema cannot be offered ("" when it can)."""
    if not _NAME.match(name):
        return (f"its name '{name[:80]}' has characters a model's tool call cannot carry "
                "(letters, digits, '_', '-' and '.' only, at most 64)")
    if not isinstance(schema, dict):
        return "its input schema is not a JSON object"
    if schema.get("type", "object") != "object":
        return f"its input schema describes {json.dumps(schema.get('type'))}, not an object"
    from jsonschema import exceptions, validators

    try:
        validators.validator_for(schema, default=validators.Draft202012Validator).check_schema(schema)
    except exceptions.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        return f"its input schema is not valid JSON Schema ({exc.message}{f' at {where}' if where else ''})"
    try:
        json.dumps(schema)
    except (TypeError, ValueError):
        return "its input schema cannot be written as JSON"
    return ""


def left_out_sentence(server: str, tool: str, problem: str) -> str:
    return f"The tool '{tool}' of the tool server '{server}' was left out: {problem}."


def block_text(block: Any) -> str:
    """One content block of a result as text for the model."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        size = len(getattr(block, "data", "") or "") * 3 // 4
        return f"[{kind}: {getattr(block, 'mime_type', '')}, {size:,} bytes, not shown to the model]"
    if kind == "resource_link":
        return f"[resource: {block.uri}]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        return str(text) if text is not None else f"[binary resource: {resource.uri}]"
    return f"[{kind or 'unknown'} content]"


def result_text(content: list[Any], structured: object) -> str:
    """The whole result as one text: its blocks, or the structured content when there are none."""
    parts = [block_text(b) for b in content]
    if not parts and structured is not None:
        return json.dumps(structured, ensure_ascii=False)
    return "\n".join(parts)


def capped(text: str, max_chars: int) -> tuple[str, bool]:
    """At most ``max_chars`` of ``text``, and whether it was cut."""
    if len(text) <= max_chars:
        return text, False
    return text[:max_chars], True
