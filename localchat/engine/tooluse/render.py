"""Chat messages as a chat template reads them, with tools, tool calls and tool results.

Two ways, chosen by the chat formatter:

- ``native_messages`` + ``tool_dicts``: for templates that render tools themselves (Qwen,
  Llama 3.x, Mistral, Granite). Messages are the OpenAI shapes HF templates are written for;
  a call's arguments are passed as an object (Qwen's and Llama's templates ``tojson`` them), and
  keys a message does not use are left out (Mistral's and Llama's templates test whether
  ``tool_calls`` is *defined*, not whether it is empty).
- ``generic_messages``: for templates that do not know tools (Gemma 3, SmolLM2, ...) and for a
  native template that refuses a chat (Llama 3.1's allows one call per message). The tools and the
  expected reply are described in the system message, in the hermes form; calls are written into
  the assistant's text and results become user messages, so only system/user/assistant reach the
  template, and consecutive messages of one role are joined (Gemma's template requires turns
  to alternate).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from localchat.engine.tooluse.validate import tool_schema
from localchat.engine.types import ChatMessage, Tool, ToolCall, ToolChoice, ToolChoiceMode


@dataclass(frozen=True)
class ToolPrompt:
    """The tools of a request as the prompt describes them."""

    tools: tuple[Tool, ...]
    choice: ToolChoice = field(default_factory=ToolChoice)
    parallel: bool = True


def tool_dicts(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """The OpenAI shape HF chat templates iterate over (``tool.function.name``, ...)."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": tool_schema(t)},
        }
        for t in tools
    ]


def arguments_object(call: ToolCall) -> Any:
    """A call's arguments as an object when they are JSON (templates ``tojson`` them), else the text."""
    try:
        return json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError:
        return call.arguments


def native_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        d: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            d["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": arguments_object(c)}}
                for c in m.tool_calls
            ]
        if m.role == "tool":
            d["tool_call_id"] = m.tool_call_id
            if m.name:
                d["name"] = m.name
        if m.reasoning:
            d["reasoning_content"] = m.reasoning  # Qwen3's template keeps the latest turn's thinking
        out.append(d)
    return out


def call_text(call: ToolCall) -> str:
    """A call as the generic prompt asks for it."""
    body = json.dumps({"name": call.name, "arguments": arguments_object(call)}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


def result_text(message: ChatMessage) -> str:
    return f"<tool_response>\n{message.content}\n</tool_response>"


def generic_instructions(prompt: ToolPrompt) -> str:
    """The system message's part that describes the tools and the reply that calls one."""
    lines = [json.dumps(d, ensure_ascii=False) for d in tool_dicts(prompt.tools)]
    text = (
        "# Tools\n\n"
        "You may call functions to help with the user's request. They are described here, "
        "one JSON object per line:\n<tools>\n" + "\n".join(lines) + "\n</tools>\n\n"
        "To call a function, reply with a block like this, and nothing after it:\n"
        '<tool_call>\n{"name": "<function name>", "arguments": {<the arguments as a JSON object>}}\n'
        "</tool_call>\n"
        "The results come back in <tool_response> blocks. When no function is needed, or once you "
        "have the results, answer in plain words."
    )
    mode = prompt.choice.mode
    if mode is ToolChoiceMode.NONE:
        text += "\nDo not call a function in this reply."
    elif mode is ToolChoiceMode.REQUIRED:
        text += "\nCall a function in this reply."
    elif mode is ToolChoiceMode.FUNCTION:
        text += f'\nCall the function "{prompt.choice.name}" in this reply.'
    if not prompt.parallel and mode is not ToolChoiceMode.NONE:
        text += "\nCall one function at a time."
    return text


def generic_messages(messages: Sequence[ChatMessage], prompt: ToolPrompt | None) -> list[dict[str, Any]]:
    """Only system/user/assistant turns: tools in the system message, calls and results as text."""
    turns: list[tuple[str, str]] = []
    for m in messages:
        if m.role == "tool":
            turns.append(("user", result_text(m)))
        elif m.tool_calls:
            parts = [m.content] if m.content else []
            parts.extend(call_text(c) for c in m.tool_calls)
            turns.append(("assistant", "\n".join(parts)))
        else:
            turns.append((m.role, m.content))
    if prompt is not None and prompt.tools:
        instructions = generic_instructions(prompt)
        if turns and turns[0][0] == "system":
            turns[0] = ("system", f"{turns[0][1]}\n\n{instructions}" if turns[0][1] else instructions)
        else:
            turns.insert(0, ("system", instructions))
    merged: list[dict[str, Any]] = []
    for role, content in turns:
        if merged and merged[-1]["role"] == role and role != "system":
            merged[-1]["content"] += "\n\n" + content
        else:
            merged.append({"role": role, "content": content})
    return merged


def uses_tools(messages: Sequence[ChatMessage]) -> bool:
    """Whether the chat holds tool calls or results (they need rendering even without tools offered)."""
    return any(m.tool_calls or m.role == "tool" for m in messages)
