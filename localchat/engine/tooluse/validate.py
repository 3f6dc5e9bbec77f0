"""A request's tools and tool_choice checked before anything is rendered: each problem is one sentence.

Pure Python, so the HTTP API can refuse a bad request with these sentences before it queues it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from localchat.engine.errors import ToolChoiceError, ToolRequestError, ToolSchemaError
from localchat.engine.types import Tool, ToolChoice, ToolChoiceMode


def tool_schema(tool: Tool) -> dict[str, Any]:
    """The tool's parameters as a JSON object; ToolSchemaError when they are not one."""
    try:
        schema = json.loads(tool.parameters) if tool.parameters.strip() else {"type": "object"}
    except json.JSONDecodeError as exc:
        raise ToolSchemaError(
            f"The parameters of tool '{tool.name}' are not valid JSON ({exc.msg} at line {exc.lineno}, "
            f"column {exc.colno})."
        ) from None
    if not isinstance(schema, dict):
        raise ToolSchemaError(f"The parameters of tool '{tool.name}' must be a JSON Schema object.")
    kind = schema.get("type", "object")
    if kind != "object":
        raise ToolSchemaError(
            f"The parameters of tool '{tool.name}' must describe an object (\"type\": \"object\"), "
            f"not {json.dumps(kind)}."
        )
    return schema


def check_tools(
    tools: Sequence[Tool], choice: ToolChoice, raw_prompt: bool = False, templated: bool = True
) -> None:
    """Raise a ToolRequestError (schema or choice) that names the first problem, if any.

    ``templated``: the loaded model has a chat template. Without one it was never trained to chat,
    let alone to call tools, and the reply would only imitate a call: refused rather than guessed."""
    if raw_prompt and (tools or choice.mode in (ToolChoiceMode.REQUIRED, ToolChoiceMode.FUNCTION)):
        raise ToolRequestError("Tools need a chat: send messages, not a raw prompt.")
    if not templated and (tools or choice.mode in (ToolChoiceMode.REQUIRED, ToolChoiceMode.FUNCTION)):
        raise ToolRequestError(
            "The loaded model has no chat template, so it cannot take tools; send the request without "
            "tools, or load a chat model."
        )
    seen: set[str] = set()
    for tool in tools:
        if not tool.name.strip():
            raise ToolSchemaError("Every tool needs a name.")
        if tool.name in seen:
            raise ToolSchemaError(f"Two tools are named '{tool.name}'; each tool needs a name of its own.")
        seen.add(tool.name)
        tool_schema(tool)
    if choice.mode in (ToolChoiceMode.REQUIRED, ToolChoiceMode.FUNCTION) and not tools:
        raise ToolChoiceError(f"tool_choice '{choice.mode.value}' needs at least one tool in the request.")
    if choice.mode is ToolChoiceMode.FUNCTION and choice.name not in seen:
        raise ToolChoiceError(f"tool_choice names '{choice.name}', which is not among the request's tools.")
