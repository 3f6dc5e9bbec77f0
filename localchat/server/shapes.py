"""Response bodies in the shapes real clients parse: OpenAI's and llama-server's field names.

Speculation statistics travel in two vocabularies: llama-server's ``timings``
(``draft_n``, ``draft_n_accepted``, ``cache_n``...) and OpenAI's ``usage``
(``prompt_tokens_details.cached_tokens``,
``completion_tokens_details.accepted_prediction_tokens``), so an unmodified
client of either kind shows them. The numbers come from GenerationStats, the
one definition of every statistic.
"""

from __future__ import annotations

from typing import Any

from localchat.engine.stats import GenerationStats
from localchat.engine.types import EngineInfo, FinishReason, GenerationResult, ToolCall


def finish_reason(reason: FinishReason) -> str:
    if reason is FinishReason.TOOL_CALLS:
        return "tool_calls"
    return "length" if reason in (FinishReason.LENGTH, FinishReason.CONTEXT) else "stop"


def capabilities(info: EngineInfo) -> list[str]:
    """What the loaded model can do, as ``/v1/models`` and ``/props`` advertise it (IDE assistants
    switch agent mode off for a model that does not say "tool_use"): tools for every model with a
    chat template (ModelInfo.tool_format says how well it knows them), JSON schemas for every model
    (the engine constrains any vocabulary), thinking and fill-in-the-middle where the model has them."""
    caps = ["completion"]
    if info.target.has_chat_template:
        caps.append("tool_use")
    caps.append("json_schema")
    if info.target.reasoning:
        caps.append("reasoning")
    if info.target.fim is not None:
        caps.append("fim")
    return caps


def tool_call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def chat_message(result: GenerationResult) -> dict[str, Any]:
    """The assistant message of a chat completion: ``content`` (null when the reply is only tool
    calls, as OpenAI sends it), ``tool_calls`` and llama-server's ``reasoning_content``."""
    message: dict[str, Any] = {"role": "assistant", "content": result.text}
    if result.tool_calls:
        message["content"] = result.text or None
        message["tool_calls"] = [tool_call(c) for c in result.tool_calls]
    if result.reasoning:
        message["reasoning_content"] = result.reasoning
    return message


def usage(stats: GenerationStats) -> dict[str, Any]:
    prompt = stats.prompt_tokens + stats.cached_prompt_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": stats.generated_tokens,
        "total_tokens": prompt + stats.generated_tokens,
        "prompt_tokens_details": {"cached_tokens": stats.cached_prompt_tokens},
        "completion_tokens_details": {
            "reasoning_tokens": stats.reasoning_tokens,
            "accepted_prediction_tokens": stats.accepted,
            "rejected_prediction_tokens": stats.drafted - stats.accepted,
        },
    }


def timings(stats: GenerationStats) -> dict[str, Any]:
    prompt_ms = stats.prompt_seconds * 1000
    predicted_ms = stats.generation_seconds * 1000
    return {
        "cache_n": stats.cached_prompt_tokens,
        "prompt_n": stats.prompt_tokens,
        "prompt_ms": round(prompt_ms, 3),
        "prompt_per_token_ms": round(prompt_ms / stats.prompt_tokens, 3) if stats.prompt_tokens else 0.0,
        "prompt_per_second": round(stats.prompt_tokens_per_s, 3),
        "predicted_n": stats.generated_tokens,
        "predicted_ms": round(predicted_ms, 3),
        "predicted_per_token_ms": (
            round(predicted_ms / stats.generated_tokens, 3) if stats.generated_tokens else 0.0
        ),
        "predicted_per_second": round(stats.tokens_per_s, 3),
        "draft_n": stats.drafted,
        "draft_n_accepted": stats.accepted,
    }


def extras(result: GenerationResult | None, mode: str, warning: str) -> dict[str, Any]:
    """localchat's own fields: the speculation actually used, and a warning when a fallback happened."""
    out: dict[str, Any] = {}
    if result is not None:
        s = result.speculation
        out["speculative"] = {"mode": mode, "drafter": s.drafter, "active": s.active, "paused": s.paused}
        if s.reason:
            out["speculative"]["reason"] = s.reason
    notes = [n for n in (warning, result.notice if result is not None else "") if n]
    if notes:
        out["warning"] = " ".join(notes)
    return out


def chat_completion(
    rid: str, created: int, model: str, result: GenerationResult, mode: str, warning: str
) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": [{
            "index": 0,
            "message": chat_message(result),
            "logprobs": None,
            "finish_reason": finish_reason(result.finish_reason),
        }],
        "usage": usage(result.stats),
        "timings": timings(result.stats),
        **extras(result, mode, warning),
    }


def chat_chunk(
    rid: str, created: int, model: str, delta: dict[str, Any], finish: str | None = None
) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def text_completion(
    rid: str, created: int, model: str, result: GenerationResult, mode: str, warning: str
) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "text_completion",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": [{
            "index": 0,
            "text": result.text,
            "logprobs": None,
            "finish_reason": finish_reason(result.finish_reason),
        }],
        "usage": usage(result.stats),
        "timings": timings(result.stats),
        **extras(result, mode, warning),
    }


def text_chunk(rid: str, created: int, model: str, text: str, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "text_completion",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
    }


def native_final(
    model: str, result: GenerationResult, mode: str, warning: str, content: str
) -> dict[str, Any]:
    """llama-server's ``/completion`` answer (also the last streamed object, with ``content`` empty)."""
    stop_type = {FinishReason.STOP: "eos", FinishReason.LENGTH: "limit", FinishReason.CONTEXT: "limit"}
    stats = result.stats
    return {
        "content": content,
        "stop": True,
        "model": model,
        "tokens_predicted": stats.generated_tokens,
        "tokens_evaluated": stats.prompt_tokens + stats.cached_prompt_tokens,
        "tokens_cached": stats.cached_prompt_tokens,
        "stop_type": stop_type.get(result.finish_reason, "none"),
        "truncated": result.finish_reason is FinishReason.CONTEXT,
        "timings": timings(stats),
        **extras(result, mode, warning),
    }
