"""Ollama's API shapes: ``/api/chat`` and ``/api/generate`` bodies into one GenerationRequest, results
and job events into Ollama's answers (NDJSON lines when streaming), and the model as ``/api/tags``,
``/api/show`` and ``/api/ps`` describe it.

Ollama's names: the model is ``NAME:TAG`` (the served model answers to any tag of its name, and is
listed as ``NAME:latest``); sampling lives in ``options`` (``num_predict`` -1 or -2: as long as
the server allows; ``num_ctx`` is accepted, and the context stays the one loaded); durations are
nanoseconds. Ollama's chat has no call ids: a tool message names its tool (``tool_name``), and is
matched to the earliest unanswered call of that name. ``speculative`` (top-level, as on every
surface) chooses speculation, and the last object of each answer carries ``timings`` and
``speculative`` beside Ollama's fields.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from localchat.catalog.gguf import GgufMetadata
from localchat.engine.types import (
    ChatMessage,
    ConstraintKind,
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
from localchat.host.sources import Surface
from localchat.server import fields, shapes
from localchat.server.errors import bad_request, error_body, failure_error
from localchat.server.parsing import (
    Limits,
    ParsedRequest,
    fill_in_the_middle,
    read_integer,
    read_sampling,
    read_stop,
    session_key,
    speculation,
)
from localchat.server.streaming import ndjson

OLLAMA_VERSION = "0.12.0"  # the Ollama API this surface answers like (tools, format schemas, thinking)
ROLES = ("system", "user", "assistant", "tool")


def now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def ollama_name(model_id: str) -> str:
    return model_id if ":" in model_id else f"{model_id}:latest"


def base_name(name: str) -> str:
    """ "qwen2.5-coder:latest" -> "qwen2.5-coder": the part the served model is matched on."""
    return name.rsplit(":", 1)[0] if ":" in name else name


@dataclass(frozen=True)
class OllamaRequest:
    parsed: ParsedRequest | None  # None: nothing to answer (Ollama's way to load a model: done_reason "load")
    model: str | None


def _model(body: Mapping[str, Any]) -> str | None:
    model = body.get("model")
    if model is None:
        return None
    return fields.text(model, "model") or None


def _images(message: Mapping[str, Any], where: str) -> None:
    if message.get("images"):
        raise bad_request(
            f"{where} holds images; the loaded model reads text only.",
            f"{where}.images",
            "unsupported_content",
        )


def _options(body: Mapping[str, Any], limits: Limits) -> tuple[Any, tuple[str, ...], int]:
    options = fields.mapping(body.get("options") or {}, "options", '{"temperature": 0.7}')
    sampling = read_sampling(options)
    last_n = read_integer(options, "repeat_last_n", -1, 1 << 20)
    if last_n is not None:
        sampling = replace(sampling, repeat_last_n=last_n)
    read_integer(options, "num_ctx", 1, None)  # checked, accepted: the loaded context is the one used
    predict = read_integer(options, "num_predict", -2, None)
    most = limits.max_tokens if predict is None or predict < 0 else min(predict, limits.max_tokens)
    if predict == 0:
        raise bad_request(
            "'options.num_predict' must be at least 1 (or -1: until the reply ends).",
            "options.num_predict",
            "invalid_value",
        )
    return sampling, read_stop(options), most


def _format(body: Mapping[str, Any]) -> OutputConstraint | None:
    fmt = body.get("format")
    if fmt is None or fmt == "":
        return None
    if fmt == "json":
        return OutputConstraint(ConstraintKind.JSON_OBJECT)
    if isinstance(fmt, dict):
        return fields.json_constraint(fmt, "format")
    raise bad_request("'format' must be \"json\" or a JSON Schema object.", "format", "invalid_value")


def _tools(body: Mapping[str, Any], info: EngineInfo | None) -> tuple[Tool, ...]:
    return fields.checked_tools(fields.function_tools(body.get("tools")), ToolChoice(), info)


def _messages(raw: Any) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    unanswered: list[ToolCall] = []  # calls of the conversation no tool message has answered yet
    for i, m in enumerate(fields.listing(raw, "messages")):
        where = f"messages[{i}]"
        m = fields.mapping(m, where, '{"role": "user", "content": "..."}')
        role = m.get("role")
        if role not in ROLES:
            raise bad_request(
                f"{where}.role must be one of system, user, assistant, tool; it was {role!r}.",
                f"{where}.role",
                "invalid_value",
            )
        _images(m, where)
        content = fields.text(m.get("content"), f"{where}.content", "")
        if role == "assistant":
            calls = []
            for j, c in enumerate(fields.listing(m.get("tool_calls") or [], f"{where}.tool_calls")):
                at = f"{where}.tool_calls[{j}]"
                fn = fields.mapping(fields.mapping(c, at).get("function"), f"{at}.function")
                call_id = c.get("id") if isinstance(c.get("id"), str) and c.get("id") else f"call_{i}_{j}"
                calls.append(
                    ToolCall(
                        call_id,
                        fields.text(fn.get("name"), f"{at}.function.name"),
                        fields.arguments_text(fn.get("arguments", {}), f"{at}.function.arguments"),
                    )
                )
            unanswered += calls
            thinking = fields.text(m.get("thinking"), f"{where}.thinking", "")
            out.append(ChatMessage("assistant", content, tuple(calls), reasoning=thinking))
        elif role == "tool":
            name = m.get("tool_name") or m.get("name") or ""
            name = fields.text(name, f"{where}.tool_name")
            given = m.get("tool_call_id")
            call = next((c for c in unanswered if c.id == given), None) if isinstance(given, str) else None
            call = call or next((c for c in unanswered if c.name == name), None)
            call = call or (unanswered[0] if unanswered and not name else None)
            if call is not None:
                unanswered.remove(call)
            out.append(
                ChatMessage(
                    "tool",
                    content,
                    tool_call_id=call.id if call else "",
                    name=name or (call.name if call else ""),
                )
            )
        else:
            out.append(ChatMessage(role, content))
    return out


def parse_chat(body: Mapping[str, Any], info: EngineInfo | None, limits: Limits) -> OllamaRequest:
    messages = fields.one_system(_messages(body.get("messages") or []))
    model = _model(body)
    if not messages:
        return OllamaRequest(None, model)
    return OllamaRequest(_parsed(body, info, limits, model, messages=messages), model)


def parse_generate(body: Mapping[str, Any], info: EngineInfo | None, limits: Limits) -> OllamaRequest:
    _images(body, "the request")
    model = _model(body)
    prompt = fields.text(body.get("prompt"), "prompt", "")
    suffix = fields.text(body.get("suffix"), "suffix", "")
    system = fields.text(body.get("system"), "system", "")
    if not prompt and not suffix:
        return OllamaRequest(None, model)
    if suffix:
        return OllamaRequest(
            _parsed(body, info, limits, model, prompt=fill_in_the_middle(prompt, suffix, info)), model
        )
    if fields.flag(body, "raw", False):
        return OllamaRequest(_parsed(body, info, limits, model, prompt=prompt), model)
    messages = ([ChatMessage("system", system)] if system else []) + [ChatMessage("user", prompt)]
    return OllamaRequest(_parsed(body, info, limits, model, messages=tuple(messages)), model)


def _parsed(
    body: Mapping[str, Any],
    info: EngineInfo | None,
    limits: Limits,
    model: str | None,
    messages: tuple[ChatMessage, ...] = (),
    prompt: str | None = None,
) -> ParsedRequest:
    sampling, stop, most = _options(body, limits)
    tools = _tools(body, info)
    if tools and prompt is not None:
        raise bad_request("Tools need a chat: send them to /api/chat.", "tools", "invalid_tools")
    think = body.get("think")
    if think is not None and not isinstance(think, bool | str):
        raise bad_request(
            '\'think\' must be true, false, or "high", "medium", "low".', "think", "invalid_type"
        )
    spec, mode, warning = speculation(body, info, limits)
    request = GenerationRequest(
        messages=messages,
        prompt=prompt,
        max_tokens=most,
        sampling=sampling,
        speculation=spec,
        stop=stop,
        session=session_key(messages, prompt, None),
        tools=tools,
        constraint=_format(body),
        separate_reasoning=prompt is None,
    )
    return ParsedRequest(request, model, fields.flag(body, "stream", True), False, mode, warning)


# -- answers ---------------------------------------------------------------------------


def done_reason(result: GenerationResult) -> str:
    return "length" if result.finish_reason in (FinishReason.LENGTH, FinishReason.CONTEXT) else "stop"


def tool_calls(result: GenerationResult) -> list[dict[str, Any]]:
    return [
        {"id": c.id, "function": {"index": i, "name": c.name, "arguments": fields.arguments_object(c)}}
        for i, c in enumerate(result.tool_calls)
    ]


def final_fields(result: GenerationResult, parsed: ParsedRequest, started: float) -> dict[str, Any]:
    """The last object's figures: Ollama's durations (nanoseconds) and counts, and localchat's own."""
    s = result.stats
    return {
        "done": True,
        "done_reason": done_reason(result),
        "total_duration": int((time.monotonic() - started) * 1e9),
        "load_duration": 0,
        "prompt_eval_count": s.prompt_tokens + s.cached_prompt_tokens,
        "prompt_eval_duration": int(s.prompt_seconds * 1e9),
        "eval_count": s.generated_tokens,
        "eval_duration": int(s.generation_seconds * 1e9),
        "timings": shapes.timings(s),
        **shapes.extras(result, parsed.mode, parsed.warning),
    }


def chat_message(result: GenerationResult) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": result.text}
    if result.reasoning:
        message["thinking"] = result.reasoning
    if result.tool_calls:
        message["tool_calls"] = tool_calls(result)
    return message


class OllamaStream:
    """A job's events as Ollama's NDJSON lines (``/api/chat`` or ``/api/generate``); the calls of a chat
    come whole in one line before the last, as Ollama sends them."""

    def __init__(self, model: str, parsed: ParsedRequest, chat: bool) -> None:
        self.model, self.parsed, self.chat = model, parsed, chat
        self.started = time.monotonic()

    def _line(self, text: str, thinking: str, **more: Any) -> dict[str, Any]:
        line: dict[str, Any] = {"model": self.model, "created_at": now()}
        if self.chat:
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if thinking:
                message["thinking"] = thinking
            line["message"] = message
        else:
            line["response"] = text
            if thinking:
                line["thinking"] = thinking
        line["done"] = False
        line.update(more)
        return line

    def whole(self, result: GenerationResult) -> dict[str, Any]:
        line = self._line(result.text, result.reasoning)
        if self.chat:
            line["message"] = chat_message(result)
        line.update(final_fields(result, self.parsed, self.started))
        return line

    def render(self, event: JobEvent) -> list[bytes]:
        if isinstance(event, Tokens):
            e = event.event
            return [ndjson(self._line(e.text, e.reasoning))] if e.text or e.reasoning else []
        if isinstance(event, Finished):
            result, out = event.result, []
            if self.chat and result.tool_calls:
                line = self._line("", "")
                line["message"]["tool_calls"] = tool_calls(result)
                out.append(ndjson(line))
            last = self._line("", "")
            last.update(final_fields(result, self.parsed, self.started))
            return [*out, ndjson(last)]
        if isinstance(event, Failed):
            return [ndjson(error_body(failure_error(event.failure), Surface.OLLAMA))]
        return []


def loaded(model: str, chat: bool, reason: str = "load") -> dict[str, Any]:
    """The answer to a request with nothing to generate (Ollama's way to load, or keep, a model)."""
    body: dict[str, Any] = {"model": model, "created_at": now()}
    if chat:
        body["message"] = {"role": "assistant", "content": ""}
    else:
        body["response"] = ""
    body.update(done=True, done_reason=reason)
    return body


# -- the model, as Ollama describes it ---------------------------------------------------------


def digest(meta: GgufMetadata) -> str:
    """A stable id of the served file (its name, size and vocabulary), in Ollama's digest form."""
    key = f"{meta.path}:{meta.file_size}:{meta.fingerprint}".encode()
    return hashlib.sha256(key).hexdigest()


def details(meta: GgufMetadata) -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": "gguf",
        "family": meta.architecture,
        "families": [meta.architecture],
        "parameter_size": meta.size_label,
        "quantization_level": meta.quantization or "unknown",
    }


def modified_at(meta: GgufMetadata) -> str:
    try:
        from pathlib import Path

        stamp = Path(meta.path).stat().st_mtime
    except OSError:
        stamp = time.time()
    return datetime.fromtimestamp(stamp, UTC).isoformat().replace("+00:00", "Z")


def tag(name: str, meta: GgufMetadata) -> dict[str, Any]:
    return {
        "name": name,
        "model": name,
        "modified_at": modified_at(meta),
        "size": meta.file_size,
        "digest": digest(meta),
        "details": details(meta),
    }


def capabilities(info: EngineInfo) -> list[str]:
    caps = ["completion"]
    if info.target.has_chat_template or info.target.tool_use:
        caps.append("tools")  # every chat model takes tools here (ModelInfo.tool_format says how)
    if info.target.reasoning:
        caps.append("thinking")
    if info.target.fim is not None:
        caps.append("insert")
    return caps


def show(meta: GgufMetadata, info: EngineInfo, template: str) -> dict[str, Any]:
    arch = meta.architecture
    model_info: dict[str, Any] = {
        "general.architecture": arch,
        "general.name": meta.name,
        "general.parameter_count": meta.parameter_count or info.target.n_params,
        "general.file_type": meta.file_type,
        f"{arch}.context_length": info.n_ctx,  # the context served (the model's own is n_ctx_train)
        f"{arch}.block_count": meta.block_count,
        "tokenizer.ggml.model": meta.vocab_type,
    }
    parameters = f"num_ctx                        {info.n_ctx}"
    return {
        "modelfile": f"# localchat serves this model file\nFROM {meta.path}\n",
        "parameters": parameters,
        "template": template,
        "details": details(meta),
        "model_info": model_info,
        "capabilities": capabilities(info),
        "modified_at": modified_at(meta),
        "license": "",
    }
