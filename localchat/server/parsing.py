"""Request bodies of the three generation endpoints, checked and turned into GenerationRequest.

OpenAI's chat and completions bodies and llama.cpp's native ``/completion``
share sampling fields and the ``speculative`` extension; each field is
type-checked with a sentence naming it (``param``), and fields this server does
not know are ignored, as OpenAI-compatible servers do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from localchat.engine.speculation_modes import MODE_NAMES, speculation_for_mode
from localchat.engine.types import (
    ChatMessage,
    EngineInfo,
    GenerationRequest,
    SamplingParams,
    SpeculationConfig,
)
from localchat.server import chat_fields
from localchat.server.errors import bad_request
from localchat.settings.options import DRAFT_TOKENS_DEFAULT, DRAFT_TOKENS_MAX, DRAFT_TOKENS_MIN

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


@dataclass(frozen=True)
class Limits:
    max_tokens: int  # the most tokens one reply may ask for; also the default when a body names none
    default_mode: str = "adaptive"  # speculation when a body does not say (the app's default)


@dataclass(frozen=True)
class ParsedRequest:
    request: GenerationRequest
    model: str | None
    stream: bool
    include_usage: bool
    mode: str  # speculation mode actually used
    warning: str = ""  # why the asked-for mode was replaced, for the response's "warning" field
    # The field the request's output constraint came from ("response_format", "grammar"...), named
    # when the engine refuses the constraint (a schema that does not compile, or no text matches).
    constraint_field: str = ""


def _number(body: Mapping[str, Any], key: str, lo: float, hi: float, default: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad_request(f"'{key}' must be a number, not {type(value).__name__}.", key, "invalid_type")
    if not lo <= value <= hi:
        raise bad_request(f"'{key}' must be between {lo:g} and {hi:g}; it was {value}.", key, "invalid_value")
    return float(value)


def _integer(body: Mapping[str, Any], key: str, lo: int, hi: int | None) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(f"'{key}' must be an integer, not {type(value).__name__}.", key, "invalid_type")
    if value < lo or (hi is not None and value > hi):
        bound = f"at least {lo}" if hi is None else f"between {lo} and {hi}"
        raise bad_request(f"'{key}' must be {bound}; it was {value}.", key, "invalid_value")
    return value


def _stop(body: Mapping[str, Any]) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    if isinstance(stop, str):
        return (stop,) if stop else ()
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        if len(stop) > 16:
            raise bad_request("'stop' may hold at most 16 strings.", "stop", "invalid_value")
        return tuple(s for s in stop if s)
    raise bad_request("'stop' must be a string or a list of strings.", "stop", "invalid_type")


def _sampling(body: Mapping[str, Any]) -> SamplingParams:
    d = SamplingParams()
    top_k = _integer(body, "top_k", 0, None)
    return SamplingParams(
        temperature=_number(body, "temperature", 0.0, 5.0, d.temperature),
        top_k=d.top_k if top_k is None else top_k,
        top_p=_number(body, "top_p", 0.0, 1.0, d.top_p),
        min_p=_number(body, "min_p", 0.0, 1.0, d.min_p),
        repeat_penalty=_repeat_penalty(body, d.repeat_penalty),
        seed=_integer(body, "seed", -(2**63), 2**64),
    )


def _repeat_penalty(body: Mapping[str, Any], default: float) -> float:
    """Above 0: the logits of recent tokens are divided by it (0 was taken as "off" without a word)."""
    value = _number(body, "repeat_penalty", 0.0, 10.0, default)
    if value == 0.0:
        raise bad_request("'repeat_penalty' must be above 0 (1 turns it off); it was 0.", "repeat_penalty",
                          "invalid_value")
    return value


def _max_tokens(body: Mapping[str, Any], keys: tuple[str, ...], limits: Limits) -> int:
    for key in keys:
        value = body.get(key)
        if key == "n_predict" and isinstance(value, int) and not isinstance(value, bool) and value < 0:
            return limits.max_tokens  # llama.cpp: -1 means "until done"
        n = _integer(body, key, 1, None)
        if n is not None:
            if n > limits.max_tokens:
                raise bad_request(
                    f"'{key}' is {n}, more than this server allows ({limits.max_tokens}); ask for fewer "
                    "tokens or start the server with a larger --max-tokens.", key, "invalid_value")
            return n
    return limits.max_tokens


def speculation(
    body: Mapping[str, Any], info: EngineInfo | None, limits: Limits
) -> tuple[SpeculationConfig, str, str]:
    """(config, mode used, warning) from the ``speculative`` extension field.

    A mode name means what it means everywhere (engine/speculation_modes.py); here only the
    fall-back where no draft model is loaded, and the warning that says so."""
    spec = body.get("speculative")
    mode, n_max = limits.default_mode, None
    if spec is not None:
        if not isinstance(spec, dict):
            raise bad_request("'speculative' must be an object like {\"mode\": \"adaptive\"}.",
                              "speculative", "invalid_type")
        raw_mode = spec.get("mode", mode)
        if raw_mode not in MODE_NAMES:
            raise bad_request(f"'speculative.mode' must be one of {', '.join(MODE_NAMES)}.",
                              "speculative.mode", "invalid_value")
        mode = raw_mode
        n_max = _integer(spec, "n_max", DRAFT_TOKENS_MIN, DRAFT_TOKENS_MAX)
    n = n_max or DRAFT_TOKENS_DEFAULT
    warning = ""
    has_model = info is not None and info.draft is not None
    if mode in ("draft", "auto") and not has_model:
        # Without a draft model both draft by lookup alone, at the asked length: that is "ngram".
        warning = f"No draft model is loaded, so n-gram prompt lookup drafted instead of {mode!r}."
        mode = "ngram"
    if mode == "adaptive" and not has_model and spec is not None and spec.get("mode") == "adaptive":
        warning = "No draft model is loaded, so adaptive speculation drafts with n-gram prompt lookup only."
    return speculation_for_mode(mode, n), mode, warning


def _content(value: Any, where: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts, as Cline and Continue send them
        texts = []
        for i, part in enumerate(value):
            if not isinstance(part, dict) or part.get("type") not in ("text", "input_text"):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise bad_request(f"{where}.content[{i}] is of type {kind!r}; only text is supported.",
                                  f"{where}.content", "unsupported_content")
            text = part.get("text", "")
            if not isinstance(text, str):
                raise bad_request(f"{where}.content[{i}].text must be a string.", f"{where}.content",
                                  "invalid_type")
            texts.append(text)
        return "".join(texts)
    raise bad_request(f"{where}.content must be a string or a list of text parts.", f"{where}.content",
                      "invalid_type")


def _messages(body: Mapping[str, Any]) -> tuple[ChatMessage, ...]:
    raw = body.get("messages")
    if raw is None:
        raise bad_request("'messages' is required: a list of {\"role\", \"content\"} objects.", "messages",
                          "missing_field")
    if not isinstance(raw, list) or not raw:
        raise bad_request("'messages' must be a non-empty list.", "messages", "invalid_type")
    out = []
    names: dict[str, str] = {}  # call id -> the function's name, for the tool message that answers it
    for i, m in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise bad_request(f"{where} must be an object with 'role' and 'content'.", where, "invalid_type")
        role = m.get("role")
        if role not in ROLES:
            raise bad_request(f"{where}.role must be one of system, user, assistant, tool; it was {role!r}.",
                              f"{where}.role", "invalid_value")
        content = _content(m.get("content"), where)
        if role == "assistant":
            calls = chat_fields.assistant_calls(m, i)
            names.update((c.id, c.name) for c in calls)
            thought = m.get("reasoning_content")
            reasoning = thought if isinstance(thought, str) else ""
            out.append(ChatMessage("assistant", content, calls, reasoning=reasoning))
        elif role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise bad_request(f"{where}.tool_call_id is required: the id of the call this message "
                                  "answers.", f"{where}.tool_call_id", "missing_field")
            name = m.get("name") if isinstance(m.get("name"), str) else ""
            name = name or names.get(call_id, "")
            out.append(ChatMessage("tool", content, tool_call_id=call_id, name=name))
        else:
            out.append(ChatMessage(ROLES[role], content))
    return tuple(out)


def _model(body: Mapping[str, Any]) -> str | None:
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise bad_request("'model' must be a string.", "model", "invalid_type")
    return model or None


def _stream(body: Mapping[str, Any]) -> tuple[bool, bool]:
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise bad_request("'stream' must be true or false.", "stream", "invalid_type")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise bad_request("'stream_options' must be an object.", "stream_options", "invalid_type")
    return stream, bool(options.get("include_usage", False))


def session_key(messages: tuple[ChatMessage, ...], prompt: str | None, user: Any) -> str:
    """One key per conversation: agents resend the whole chat, so its first turns identify it."""
    if isinstance(user, str) and user:
        return "user:" + user[:64]
    head = prompt[:512] if prompt is not None else "\n".join(f"{m.role}:{m.content}" for m in messages[:2])
    return hashlib.sha1(head.encode("utf-8", "replace")).hexdigest()[:12]


def parse_chat(body: Mapping[str, Any], info: EngineInfo | None, limits: Limits) -> ParsedRequest:
    """OpenAI's chat completions, with tools and structured output (server/chat_fields.py); the
    thinking of a thinking model goes apart from the content (``reasoning_content``), as
    llama-server does, unless its ``reasoning_format`` is "none"."""
    messages = _messages(body)
    stream, include_usage = _stream(body)
    spec, mode, warning = speculation(body, info, limits)
    tools, choice, parallel = chat_fields.chat_tools(body, info)
    constraint, constraint_field = chat_fields.output_constraint(body)
    request = GenerationRequest(
        messages=messages,
        max_tokens=_max_tokens(body, ("max_completion_tokens", "max_tokens"), limits),
        sampling=_sampling(body),
        speculation=spec,
        stop=_stop(body),
        session=session_key(messages, None, body.get("user")),
        tools=tools,
        tool_choice=choice,
        parallel_tool_calls=parallel,
        constraint=constraint,
        separate_reasoning=chat_fields.separate_reasoning(body),
    )
    return ParsedRequest(request, _model(body), stream, include_usage, mode, warning, constraint_field)


def fill_in_the_middle(prefix: str, suffix: str, info: EngineInfo | None, middle: str = "") -> str:
    """The raw prompt that asks a code model for the text between ``prefix`` and ``suffix``."""
    fim = info.target.fim if info is not None else None
    if fim is None:
        raise bad_request("The loaded model was not trained to fill in the middle (it has no FIM tokens); "
                          "send the prompt without a suffix, or load a code model such as Qwen2.5-Coder.",
                          "suffix", "fim_not_supported")
    pre, suf, mid = fim
    return f"{pre}{prefix}{suf}{suffix}{mid}{middle}"


def parse_completion(
    body: Mapping[str, Any],
    info: EngineInfo | None,
    limits: Limits,
    native: bool = False,
    infill: bool = False,
) -> ParsedRequest:
    """``/v1/completions`` (OpenAI; ``suffix`` asks for fill-in-the-middle), or, with ``native``,
    llama.cpp's ``/completion``, or with ``infill`` its ``/infill`` (``input_prefix``, ``input_suffix``,
    and ``prompt`` as the start of the middle), which Continue's llama.cpp provider sends for autocomplete."""
    prompt = body.get("prompt", "" if infill else None)
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if prompt is None:
        raise bad_request("'prompt' is required.", "prompt", "missing_field")
    if not isinstance(prompt, str):
        raise bad_request("'prompt' must be a string (one prompt per request).", "prompt", "invalid_type")
    if infill:
        prefix, suffix = body.get("input_prefix", ""), body.get("input_suffix", "")
        for name, value in (("input_prefix", prefix), ("input_suffix", suffix)):
            if not isinstance(value, str):
                raise bad_request(f"'{name}' must be a string.", name, "invalid_type")
        prompt = fill_in_the_middle(prefix, suffix, info, middle=prompt)
    elif body.get("suffix") is not None:
        suffix = body["suffix"]
        if not isinstance(suffix, str):
            raise bad_request("'suffix' must be a string.", "suffix", "invalid_type")
        prompt = fill_in_the_middle(prompt, suffix, info)
    stream, include_usage = _stream(body)
    spec, mode, warning = speculation(body, info, limits)
    keys = ("n_predict", "max_tokens") if native else ("max_tokens",)
    request = GenerationRequest(
        prompt=prompt,
        max_tokens=_max_tokens(body, keys, limits),
        sampling=_sampling(body),
        speculation=spec,
        stop=_stop(body),
        session=session_key((), prompt, body.get("user")),
    )
    return ParsedRequest(request, _model(body), stream, include_usage, mode, warning)


# The field readers the other surfaces share (responses_api, anthropic_api, ollama_api): the same
# checks and sentences for the fields every API has (sampling, token limits, stop strings, text parts).
read_number = _number
read_integer = _integer
read_stop = _stop
read_sampling = _sampling
read_max_tokens = _max_tokens
read_text_content = _content
read_model = _model
