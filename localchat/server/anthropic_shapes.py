"""Anthropic's Messages API shapes: a request body into one GenerationRequest, a result into a message,
and a job's events into Anthropic's stream (``message_start``, ``content_block_start``/``delta``/``stop``,
``message_delta``, ``message_stop``, ``ping``).

Content blocks map to the engine's chat: ``text`` to content, ``thinking`` to an assistant's
reasoning, ``tool_use`` to its tool calls (``input`` as the arguments' JSON text), and a user's
``tool_result`` blocks to tool messages, before the text of the same turn. Replies read reasoning
apart (``separate_reasoning``), so a thinking model's thoughts come back as ``thinking`` blocks.
Anthropic's own server tools (web search, code execution...) run on Anthropic's servers; a request
naming one is refused with a sentence. ``speculative`` (extra field) chooses speculation as on every
surface, and each message carries ``timings`` and ``speculative`` beside Anthropic's fields. Structured
output (``output_config.format``, a JSON Schema) becomes the request's output constraint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from localchat.engine.types import (
    ChatMessage,
    EngineInfo,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    Tool,
    ToolCall,
    ToolChoice,
    ToolChoiceMode,
)
from localchat.host.events import Failed, Finished, JobEvent, Tokens
from localchat.host.sources import Surface
from localchat.server import fields, shapes
from localchat.server.errors import ApiError, bad_request, error_body, failure_error
from localchat.server.parsing import (
    Limits,
    ParsedRequest,
    read_max_tokens,
    read_model,
    read_sampling,
    session_key,
    speculation,
)
from localchat.server.streaming import sse_event


def _blocks(value: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    blocks = fields.listing(value, where)
    for i, block in enumerate(blocks):
        fields.mapping(block, f"{where}[{i}]", '{"type": "text", "text": "..."}')
    return blocks


def _unsupported(kind: Any, where: str) -> ApiError:
    if kind in ("image", "document", "search_result"):
        return bad_request(
            f"{where} is an {kind} block; the loaded model reads text only.", where, "unsupported_content"
        )
    return bad_request(
        f"{where} is of type {kind!r}, which this server does not read (it reads text, "
        "thinking, tool_use and tool_result blocks).",
        where,
        "unsupported_content",
    )


def _result_text(value: Any, where: str) -> str:
    if value is None:
        return ""
    texts = []
    for i, block in enumerate(_blocks(value, where)):
        if block.get("type") != "text":
            raise _unsupported(block.get("type"), f"{where}[{i}]")
        texts.append(fields.text(block.get("text"), f"{where}[{i}].text"))
    return "\n".join(texts)


def _system(body: Mapping[str, Any]) -> list[ChatMessage]:
    value = body.get("system")
    if value is None:
        return []
    text = _result_text(value, "system")
    return [ChatMessage("system", text)] if text else []


def _turn(message: Any, i: int, names: dict[str, str]) -> list[ChatMessage]:
    """One message of ``messages`` as the engine's chat messages (a user turn's tool results first)."""
    where = f"messages[{i}]"
    message = fields.mapping(message, where, '{"role": "user", "content": "..."}')
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise bad_request(
            f"{where}.role must be 'user' or 'assistant' (the system prompt is the "
            f"top-level 'system' field); it was {role!r}.",
            f"{where}.role",
            "invalid_value",
        )
    if "content" not in message:
        raise bad_request(
            f"{where} needs 'content': a string or a list of content blocks.",
            f"{where}.content",
            "missing_field",
        )
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    results: list[ChatMessage] = []
    for j, block in enumerate(_blocks(message["content"], f"{where}.content")):
        at, kind = f"{where}.content[{j}]", block.get("type")
        if kind == "text":
            texts.append(fields.text(block.get("text"), f"{at}.text"))
        elif kind == "thinking" and role == "assistant":
            reasoning.append(fields.text(block.get("thinking"), f"{at}.thinking", ""))
        elif kind == "redacted_thinking" and role == "assistant":
            continue  # encrypted by Anthropic: nothing a local model can read
        elif kind == "tool_use" and role == "assistant":
            call_id, name = (
                fields.text(block.get("id"), f"{at}.id"),
                fields.text(block.get("name"), f"{at}.name"),
            )
            names[call_id] = name
            calls.append(
                ToolCall(call_id, name, fields.arguments_text(block.get("input", {}), f"{at}.input"))
            )
        elif kind == "tool_result" and role == "user":
            call_id = fields.text(block.get("tool_use_id"), f"{at}.tool_use_id")
            content = _result_text(block.get("content"), f"{at}.content")
            if block.get("is_error") is True:
                content = "Error: " + content
            results.append(ChatMessage("tool", content, tool_call_id=call_id, name=names.get(call_id, "")))
        else:
            raise _unsupported(kind, at)
    text = "".join(texts)
    if role == "assistant":
        return [ChatMessage("assistant", text, tool_calls=tuple(calls), reasoning="\n".join(reasoning))]
    return [*results, ChatMessage("user", text)] if text or not results else results


def _conversation(body: Mapping[str, Any]) -> list[ChatMessage]:
    raw = body.get("messages")
    if raw is None:
        raise bad_request(
            '\'messages\' is required: a list of {"role", "content"} objects.', "messages", "missing_field"
        )
    if not isinstance(raw, list) or not raw:
        raise bad_request("'messages' must be a non-empty list.", "messages", "invalid_type")
    names: dict[str, str] = {}
    return [m for i, message in enumerate(raw) for m in _turn(message, i, names)]


def _tools(body: Mapping[str, Any], info: EngineInfo | None) -> tuple[tuple[Tool, ...], ToolChoice, bool]:
    tools = []
    for i, raw in enumerate(fields.listing(body.get("tools") or [], "tools")):
        where = f"tools[{i}]"
        spec = fields.mapping(raw, where, '{"name": "...", "input_schema": {...}}')
        kind = spec.get("type", "custom")
        if kind != "custom" or "input_schema" not in spec:
            name = spec.get("name", kind)
            raise bad_request(
                f"The tool {name!r} ({kind}) is one of Anthropic's own tools, which run on "
                "Anthropic's servers; this server runs the tools your client defines (a name, "
                "a description and an input_schema).",
                where,
                "unsupported_tool",
            )
        tools.append(fields.tool(spec.get("name"), spec.get("description"), spec.get("input_schema"), where))
    choice, parallel = ToolChoice(), True
    raw_choice = body.get("tool_choice")
    if raw_choice is not None:
        spec = fields.mapping(raw_choice, "tool_choice", '{"type": "auto"}')
        kind = spec.get("type")
        modes = {
            "auto": ToolChoiceMode.AUTO,
            "any": ToolChoiceMode.REQUIRED,
            "tool": ToolChoiceMode.FUNCTION,
            "none": ToolChoiceMode.NONE,
        }
        if kind not in modes:
            raise bad_request(
                "'tool_choice.type' must be one of auto, any, tool, none.",
                "tool_choice.type",
                "invalid_value",
            )
        name = fields.text(spec.get("name"), "tool_choice.name") if kind == "tool" else ""
        choice = ToolChoice(modes[kind], name)
        parallel = not fields.flag(spec, "disable_parallel_tool_use", False)
    return fields.checked_tools(tools, choice, info), choice, parallel


def parse_messages(body: Mapping[str, Any], info: EngineInfo | None, limits: Limits) -> ParsedRequest:
    """``POST /v1/messages`` (also ``/v1/messages/count_tokens``, whose body has no ``max_tokens``)."""
    messages = (*_system(body), *_conversation(body))
    tools, choice, parallel = _tools(body, info)
    thinking = body.get("thinking")
    if thinking is not None:
        fields.mapping(thinking, "thinking", '{"type": "enabled", "budget_tokens": 1024}')
    constraint = None
    output = body.get("output_config")
    if output is not None:
        fmt = fields.mapping(output, "output_config").get("format")
        if fmt is not None:
            fmt = fields.mapping(fmt, "output_config.format", '{"type": "json_schema", "schema": {...}}')
            if fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
                raise bad_request(
                    "'output_config.format' must be {\"type\": \"json_schema\", \"schema\": {...}}.",
                    "output_config.format",
                    "invalid_value",
                )
            constraint = fields.json_constraint(fmt["schema"], "output_config.format.schema")
    metadata = body.get("metadata")
    user = fields.mapping(metadata, "metadata").get("user_id") if metadata is not None else None
    spec, mode, warning = speculation(body, info, limits)
    request = GenerationRequest(
        messages=messages,
        max_tokens=read_max_tokens(body, ("max_tokens",), limits),
        sampling=read_sampling(body),
        speculation=spec,
        stop=fields.strings(body, "stop_sequences"),
        session=session_key(messages, None, user),
        tools=tools,
        tool_choice=choice,
        parallel_tool_calls=parallel,
        constraint=constraint,
        separate_reasoning=True,
    )
    return ParsedRequest(request, read_model(body), fields.flag(body, "stream", False), False, mode, warning)


# -- answers ---------------------------------------------------------------------------


def stop_reason(result: GenerationResult) -> str:
    if result.finish_reason is FinishReason.TOOL_CALLS:
        return "tool_use"
    if result.finish_reason in (FinishReason.LENGTH, FinishReason.CONTEXT):
        return "max_tokens"
    return "stop_sequence" if result.stop_sequence else "end_turn"


def usage(result: GenerationResult) -> dict[str, Any]:
    stats = result.stats
    return {
        "input_tokens": stats.prompt_tokens,  # Anthropic counts the tokens read from a cache apart
        "cache_read_input_tokens": stats.cached_prompt_tokens,
        "cache_creation_input_tokens": 0,
        "output_tokens": stats.generated_tokens,
    }


def content(result: GenerationResult) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if result.reasoning:
        blocks.append({"type": "thinking", "thinking": result.reasoning, "signature": ""})
    if result.text or not result.tool_calls:
        blocks.append({"type": "text", "text": result.text})
    for call in result.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": fields.arguments_object(call)}
        )
    return blocks


def message(mid: str, model: str, result: GenerationResult, parsed: ParsedRequest) -> dict[str, Any]:
    return {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content(result),
        "stop_reason": stop_reason(result),
        "stop_sequence": result.stop_sequence or None,
        "usage": usage(result),
        "timings": shapes.timings(result.stats),
        **shapes.extras(result, parsed.mode, parsed.warning),
    }


class MessageStream:
    """A job's events as Anthropic's server-sent events: content blocks opened and closed as the reply
    moves from thinking to text to each tool call."""

    def __init__(self, mid: str, model: str, parsed: ParsedRequest) -> None:
        self.mid, self.model, self.parsed = mid, model, parsed
        self.index = -1  # the content block now open (-1: none yet)
        self.open: str | None = None  # its kind: "thinking", "text" or "tool:N"
        self.started = False

    def _start(self) -> list[bytes]:
        self.started = True
        snapshot: dict[str, Any] = {
            "id": self.mid,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 0,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0,
                "output_tokens": 0,
            },
        }
        return [
            sse_event("message_start", {"type": "message_start", "message": snapshot}),
            sse_event("ping", {"type": "ping"}),
        ]

    def _close(self) -> list[bytes]:
        if self.open is None:
            return []
        out = []
        if self.open == "thinking":  # Anthropic's thinking blocks end with their signature (none here)
            out.append(self._delta({"type": "signature_delta", "signature": ""}))
        self.open = None
        out.append(sse_event("content_block_stop", {"type": "content_block_stop", "index": self.index}))
        return out

    def _open(self, kind: str, block: dict[str, Any]) -> list[bytes]:
        out = self._close()
        self.index += 1
        self.open = kind
        out.append(
            sse_event(
                "content_block_start",
                {"type": "content_block_start", "index": self.index, "content_block": block},
            )
        )
        return out

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return sse_event(
            "content_block_delta", {"type": "content_block_delta", "index": self.index, "delta": delta}
        )

    def render(self, event: JobEvent) -> list[bytes]:
        out = [] if self.started else self._start()
        if isinstance(event, Tokens):
            e = event.event
            if e.reasoning:
                if self.open != "thinking":
                    out += self._open("thinking", {"type": "thinking", "thinking": "", "signature": ""})
                out.append(self._delta({"type": "thinking_delta", "thinking": e.reasoning}))
            if e.text:
                if self.open != "text":
                    out += self._open("text", {"type": "text", "text": ""})
                out.append(self._delta({"type": "text_delta", "text": e.text}))
            for d in e.tool_deltas:
                if d.name and self.open != f"tool:{d.index}":
                    out += self._open(
                        f"tool:{d.index}", {"type": "tool_use", "id": d.id, "name": d.name, "input": {}}
                    )
                if d.arguments and self.open == f"tool:{d.index}":
                    out.append(self._delta({"type": "input_json_delta", "partial_json": d.arguments}))
            if not (e.text or e.reasoning or e.tool_deltas) and e.prompt_progress is not None:
                out.append(sse_event("ping", {"type": "ping"}))  # still reading the prompt
        elif isinstance(event, Finished):
            result = event.result
            if self.index < 0:
                out += self._open("text", {"type": "text", "text": ""})
            out += self._close()
            tail = {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason(result), "stop_sequence": result.stop_sequence or None},
                "usage": usage(result),
                "timings": shapes.timings(result.stats),
                **shapes.extras(result, self.parsed.mode, self.parsed.warning),
            }
            out += [sse_event("message_delta", tail), sse_event("message_stop", {"type": "message_stop"})]
        elif isinstance(event, Failed):
            out += self._close()
            out.append(sse_event("error", error_body(failure_error(event.failure), Surface.ANTHROPIC)))
        return out
