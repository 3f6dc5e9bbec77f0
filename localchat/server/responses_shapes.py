"""OpenAI's Responses API shapes: a request's input items into one GenerationRequest, a result into a
response object, and a job's events into the Responses stream.

Input items map to the engine's chat: messages (``input_text``/``output_text`` parts), a
``function_call`` to a call of the assistant turn it follows (a turn of its own after a tool
result), a ``function_call_output`` to a tool message, a ``reasoning`` item to the next assistant
turn's reasoning. ``instructions`` lead as the system message and are not carried over by
``previous_response_id`` (as OpenAI documents); the stored conversation is. OpenAI's hosted tools
(web search, file search, computer use...) run on OpenAI's servers; naming one is a 400 with a
sentence. The stream names each event (``response.created``, ``response.output_item.added``,
``response.output_text.delta``, ``response.function_call_arguments.delta``,
``response.completed``...) and numbers them (``sequence_number``); the items it streams are the
items of the final response, ids included.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from localchat.engine.types import (
    ChatMessage,
    EngineInfo,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    OutputConstraint,
    Tool,
    ToolCall,
    ToolChoice,
)
from localchat.host.events import Failed, Finished, JobEvent, Tokens
from localchat.server import fields, shapes
from localchat.server.errors import ApiError, bad_request, failure_error
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

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
TEXT_PARTS = ("input_text", "output_text", "text")


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


@dataclass(frozen=True)
class ResponsesRequest:
    parsed: ParsedRequest
    conversation: tuple[ChatMessage, ...]  # the earlier response's, and this input (no instructions)
    echo: dict[str, Any]  # the request's settings, as the response object repeats them
    store: bool


def _part_text(part: Any, where: str) -> str:
    part = fields.mapping(part, where, '{"type": "input_text", "text": "..."}')
    kind = part.get("type")
    if kind in TEXT_PARTS:
        return fields.text(part.get("text"), f"{where}.text")
    if kind == "refusal":
        return fields.text(part.get("refusal"), f"{where}.refusal")
    if kind in ("input_image", "input_file", "input_audio"):
        raise bad_request(
            f"{where} is an {kind[6:]}; the loaded model reads text only.", where, "unsupported_content"
        )
    raise bad_request(
        f"{where} is of type {kind!r}; the parts read are input_text and output_text.",
        where,
        "unsupported_content",
    )


def _content(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    return "".join(_part_text(p, f"{where}[{i}]") for i, p in enumerate(fields.listing(value, where)))


def _reasoning_text(item: Mapping[str, Any], where: str) -> str:
    parts = [*(item.get("content") or []), *(item.get("summary") or [])]
    texts = []
    for i, part in enumerate(parts):
        part = fields.mapping(part, f"{where}.content[{i}]")
        if part.get("type") in ("reasoning_text", "summary_text"):
            texts.append(fields.text(part.get("text"), f"{where}.content[{i}].text"))
    return "\n".join(texts)


def _items(value: Any) -> list[ChatMessage]:
    """``input`` (a string, or a list of items) as chat messages."""
    if isinstance(value, str):
        return [ChatMessage("user", value)]
    out: list[ChatMessage] = []
    names: dict[str, str] = {}
    reasoning = ""  # a reasoning item's text, for the next assistant turn
    for i, raw in enumerate(fields.listing(value, "input")):
        where = f"input[{i}]"
        item = fields.mapping(raw, where, '{"role": "user", "content": "..."}')
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ROLES:
                raise bad_request(
                    f"{where}.role must be one of user, assistant, system, developer; it was {role!r}.",
                    f"{where}.role",
                    "invalid_value",
                )
            text = _content(item.get("content", ""), f"{where}.content")
            out.append(ChatMessage(ROLES[role], text, reasoning=reasoning if role == "assistant" else ""))
            reasoning = "" if role == "assistant" else reasoning
        elif kind == "function_call":
            call_id = fields.text(item.get("call_id"), f"{where}.call_id")
            name = fields.text(item.get("name"), f"{where}.name")
            call = ToolCall(
                call_id, name, fields.arguments_text(item.get("arguments", "{}"), f"{where}.arguments")
            )
            names[call_id] = name
            if out and out[-1].role == "assistant":
                last = out[-1]
                out[-1] = ChatMessage(
                    "assistant", last.content, (*last.tool_calls, call), reasoning=last.reasoning
                )
            else:
                out.append(ChatMessage("assistant", "", (call,), reasoning=reasoning))
                reasoning = ""
        elif kind == "function_call_output":
            call_id = fields.text(item.get("call_id"), f"{where}.call_id")
            output = item.get("output", "")
            text = output if isinstance(output, str) else _content(output, f"{where}.output")
            out.append(ChatMessage("tool", text, tool_call_id=call_id, name=names.get(call_id, "")))
        elif kind == "reasoning":
            reasoning = _reasoning_text(item, where)
        elif kind == "item_reference":
            raise bad_request(
                f"{where} refers to an item by id; send the item itself (or continue from the "
                "response with previous_response_id).",
                where,
                "unsupported_item",
            )
        else:
            raise bad_request(
                f"{where} is of type {kind!r}, which belongs to one of OpenAI's hosted tools; this "
                "server reads messages, function_call, function_call_output and reasoning items.",
                where,
                "unsupported_item",
            )
    return out


def _tools(body: Mapping[str, Any], info: EngineInfo | None) -> tuple[tuple[Tool, ...], ToolChoice]:
    tools = []
    for i, raw in enumerate(fields.listing(body.get("tools") or [], "tools")):
        where = f"tools[{i}]"
        spec = fields.mapping(raw, where, '{"type": "function", "name": "...", "parameters": {...}}')
        kind = spec.get("type")
        if kind != "function":
            raise bad_request(
                f"tools[{i}] is a {kind!r} tool, one of OpenAI's hosted tools that run on "
                'OpenAI\'s servers; this server runs function tools (type "function").',
                where,
                "unsupported_tool",
            )
        tools.append(fields.tool(spec.get("name"), spec.get("description"), spec.get("parameters"), where))
    choice = fields.tool_choice(body.get("tool_choice"))
    return fields.checked_tools(tools, choice, info), choice


def _format(body: Mapping[str, Any]) -> OutputConstraint | None:
    text_field = body.get("text")
    if text_field is None:
        return None
    fmt = fields.mapping(text_field, "text", '{"format": {"type": "text"}}').get("format")
    if fmt is None:
        return None
    fmt = fields.mapping(fmt, "text.format", '{"type": "json_schema", "name": "...", "schema": {...}}')
    return fields.reply_format(fmt, "text.format", nested=False)


def parse_responses(
    body: Mapping[str, Any],
    info: EngineInfo | None,
    limits: Limits,
    history: Callable[[str], tuple[ChatMessage, ...]],
) -> ResponsesRequest:
    """``POST /v1/responses``; ``history(id)`` is the stored conversation of ``previous_response_id``
    (it raises the 404 when that response is not kept)."""
    for key, why in (
        ("background", "responses run while the client waits (or streams)"),
        ("conversation", "conversations are not kept here; continue with previous_response_id"),
        ("prompt", "prompt templates live on OpenAI's servers"),
    ):
        if body.get(key) not in (None, False):
            raise bad_request(f"'{key}' is not supported here: {why}.", key, "unsupported_field")
    if "input" not in body:
        raise bad_request(
            "'input' is required: a string, or a list of input items.", "input", "missing_field"
        )
    previous = body.get("previous_response_id")
    earlier: tuple[ChatMessage, ...] = ()
    if previous is not None:
        earlier = history(fields.text(previous, "previous_response_id"))
    conversation = (*earlier, *_items(body["input"]))
    instructions = fields.text(body.get("instructions"), "instructions", "")
    messages = fields.one_system([ChatMessage("system", instructions)] if instructions else [])
    messages = fields.one_system((*messages, *conversation))
    if not any(m.role != "system" for m in messages):
        raise bad_request("'input' holds no message to answer.", "input", "invalid_value")
    tools, choice = _tools(body, info)
    metadata = body.get("metadata")
    if metadata is not None:
        fields.mapping(metadata, "metadata")
    user = body.get("safety_identifier") or body.get("user") or body.get("prompt_cache_key")
    spec, mode, warning = speculation(body, info, limits)
    parallel = fields.flag(body, "parallel_tool_calls", True)
    request = GenerationRequest(
        messages=messages,
        max_tokens=read_max_tokens(body, ("max_output_tokens",), limits),
        sampling=read_sampling(body),
        speculation=spec,
        session=session_key(messages, None, user),
        tools=tools,
        tool_choice=choice,
        parallel_tool_calls=parallel,
        constraint=_format(body),
        separate_reasoning=True,
    )
    stream = fields.flag(body, "stream", False)
    parsed = ParsedRequest(request, read_model(body), stream, False, mode, warning)
    echo = {
        "instructions": instructions or None,
        "max_output_tokens": body.get("max_output_tokens"),
        "metadata": metadata or {},
        "parallel_tool_calls": parallel,
        "previous_response_id": previous,
        "temperature": request.sampling.temperature,
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": request.sampling.top_p,
        "truncation": body.get("truncation") or "disabled",
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
    }
    return ResponsesRequest(parsed, conversation, echo, fields.flag(body, "store", True))


def gone(rid: str) -> ApiError:
    return ApiError(
        404,
        f"The response {rid!r} is not kept here: this server keeps recent responses in "
        "memory only (not those made with store=false, nor any from before it started). "
        "Send the whole conversation as input instead.",
        param="previous_response_id",
        code="previous_response_not_found",
    )


# -- answers ---------------------------------------------------------------------------


def usage(result: GenerationResult) -> dict[str, Any]:
    stats = result.stats
    prompt = stats.prompt_tokens + stats.cached_prompt_tokens
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": stats.cached_prompt_tokens},
        "output_tokens": stats.generated_tokens,
        "output_tokens_details": {"reasoning_tokens": stats.reasoning_tokens},
        "total_tokens": prompt + stats.generated_tokens,
    }


def reasoning_item(rid: str, text: str) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": rid,
        "summary": [],
        "status": "completed",
        "content": [{"type": "reasoning_text", "text": text}],
    }


def message_item(mid: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = (
        [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
        if status == "completed"
        else []
    )
    return {"type": "message", "id": mid, "status": status, "role": "assistant", "content": content}


def call_item(fid: str, call: ToolCall, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": fid,
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments,
        "status": status,
    }


def output_items(result: GenerationResult) -> list[dict[str, Any]]:
    items = []
    if result.reasoning:
        items.append(reasoning_item(new_id("rs"), result.reasoning))
    if result.text or not result.tool_calls:
        items.append(message_item(new_id("msg"), result.text))
    items += [call_item("fc_" + call.id.removeprefix("call_"), call) for call in result.tool_calls]
    return items


@dataclass
class ResponseHead:
    """What every snapshot of one response shares: its id, time, model and the request's settings."""

    rid: str
    model: str
    req: ResponsesRequest
    created: int = field(default_factory=lambda: int(time.time()))

    def body(
        self,
        status: str,
        output: list[dict[str, Any]],
        result: GenerationResult | None = None,
        error: ApiError | None = None,
    ) -> dict[str, Any]:
        incomplete = None
        if result is not None and result.finish_reason in (FinishReason.LENGTH, FinishReason.CONTEXT):
            status, incomplete = "incomplete", {"reason": "max_output_tokens"}
        out: dict[str, Any] = {
            "id": self.rid,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "error": None
            if error is None
            else {"code": error.code or "server_error", "message": error.message},
            "incomplete_details": incomplete,
            "model": self.model,
            "output": output,
            **self.req.echo,
            "store": self.req.store,
            "usage": None if result is None else usage(result),
        }
        if result is not None:
            out["timings"] = shapes.timings(result.stats)
            out.update(shapes.extras(result, self.req.parsed.mode, self.req.parsed.warning))
        return out


class ResponseStream:
    """A job's events as the Responses stream: one output item open at a time (reasoning, the message,
    each function call), each added, filled by deltas and done; then the whole response."""

    def __init__(
        self, head: ResponseHead, on_done: Callable[[dict[str, Any], GenerationResult], None]
    ) -> None:
        self.head = head
        self.on_done = on_done
        self.seq = 0
        self.items: list[dict[str, Any]] = []
        self.open: str | None = None  # "reasoning", "message" or "call:N"
        self.texts: list[str] = []  # the open item's text so far
        self.started = False

    def _event(self, kind: str, **data: Any) -> bytes:
        obj = {"type": kind, "sequence_number": self.seq, **data}
        self.seq += 1
        return sse_event(kind, obj)

    def _close(self) -> list[bytes]:
        if self.open is None:
            return []
        index, item, text = len(self.items) - 1, self.items[-1], "".join(self.texts)
        out = []
        if self.open == "reasoning":
            item.update(reasoning_item(item["id"], text))
            out.append(
                self._event(
                    "response.reasoning_text.done",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    text=text,
                )
            )
        elif self.open == "message":
            item.update(message_item(item["id"], text))
            part = item["content"][0]
            out.append(
                self._event(
                    "response.output_text.done",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    text=text,
                    logprobs=[],
                )
            )
            out.append(
                self._event(
                    "response.content_part.done",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    part=part,
                )
            )
        else:
            item.update(arguments=text, status="completed")
            out.append(
                self._event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    name=item["name"],
                    arguments=text,
                )
            )
        out.append(self._event("response.output_item.done", output_index=index, item=dict(item)))
        self.open, self.texts = None, []
        return out

    def _add(self, kind: str, item: dict[str, Any]) -> list[bytes]:
        out = self._close()
        self.items.append(item)
        self.open = kind
        index = len(self.items) - 1
        out.append(self._event("response.output_item.added", output_index=index, item=dict(item)))
        if kind == "message":
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            out.append(
                self._event(
                    "response.content_part.added",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    part=part,
                )
            )
        return out

    def _text(self, kind: str, delta: str, **extra: Any) -> bytes:
        self.texts.append(delta)
        item = self.items[-1]
        return self._event(kind, item_id=item["id"], output_index=len(self.items) - 1, delta=delta, **extra)

    def render(self, event: JobEvent) -> list[bytes]:
        out: list[bytes] = []
        if not self.started:
            self.started = True
            snapshot = self.head.body("in_progress", [])
            out += [
                self._event("response.created", response=snapshot),
                self._event("response.in_progress", response=snapshot),
            ]
        if isinstance(event, Tokens):
            e = event.event
            if e.reasoning:
                if self.open != "reasoning":
                    out += self._add(
                        "reasoning",
                        {
                            "type": "reasoning",
                            "id": new_id("rs"),
                            "summary": [],
                            "content": [],
                            "status": "in_progress",
                        },
                    )
                out.append(self._text("response.reasoning_text.delta", e.reasoning, content_index=0))
            if e.text:
                if self.open != "message":
                    out += self._add("message", message_item(new_id("msg"), "", "in_progress"))
                out.append(self._text("response.output_text.delta", e.text, content_index=0, logprobs=[]))
            for d in e.tool_deltas:
                if d.name and self.open != f"call:{d.index}":
                    call = ToolCall(d.id, d.name, "")
                    out += self._add(
                        f"call:{d.index}", call_item("fc_" + d.id.removeprefix("call_"), call, "in_progress")
                    )
                if d.arguments and self.open == f"call:{d.index}":
                    out.append(self._text("response.function_call_arguments.delta", d.arguments))
        elif isinstance(event, Finished):
            result = event.result
            if not self.items:
                out += self._add("message", message_item(new_id("msg"), "", "in_progress"))
            out += self._close()
            calls = iter(result.tool_calls)
            for item in self.items:  # the calls as the reader took them whole (the same as streamed)
                if item["type"] == "function_call":
                    whole = next(calls, None)
                    if whole is not None:
                        item["arguments"] = whole.arguments
            body = self.head.body("completed", self.items, result)
            self.on_done(body, result)
            name = "response.completed" if body["status"] == "completed" else "response.incomplete"
            out.append(self._event(name, response=body))
        elif isinstance(event, Failed):
            out += self._close()
            error = failure_error(event.failure)
            out.append(
                self._event("response.failed", response=self.head.body("failed", self.items, None, error))
            )
        return out
