"""The benchmark through an OpenAI-compatible server: each reply streamed by the official ``openai``
client and timed as that client sees it (``localchat bench --through-api``).

``ApiBenchEngine`` is a ``runner.BenchEngine``, so the runner interleaves replies through the API
with the engine's own, prompt by prompt. What a reply's figures mean:

- tokens/s is the client's: the reply's tokens over the time from its first streamed text to its
  last, scaled from the ``n - 1`` tokens seen in that time to ``n`` (the first token's time is
  the engine's alone; the client cannot see it apart from the prompt's);
- acceptance comes from the server's ``timings`` (``draft_n``, ``draft_n_accepted``): every
  target pass emits its own token and the drafts it accepted, so its passes are the tokens less
  the accepted ones;
- the server's own tokens/s (its ``timings``, the engine's clock in the engine process) is kept
  per mode in ``server_seconds``, to set beside the client's, for the replies that name a
  conversation (the runner's timed ones; its warm-up names none).

The mode goes as ``"speculative": {"mode": ..., "n_max": ...}`` (engine/speculation_modes.py); the
API has no ``p_min``, so the server's default applies. Each request's ``user`` is the runner's
session, so each prompt and mode is a conversation of its own on the server, as in the engine.

Needs the ``openai`` package (in the dev extra); it is imported when an ``ApiBenchEngine`` is made.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from localchat.bench.route_facts import TurnLatency
from localchat.engine.errors import EngineError
from localchat.engine.speculation_modes import mode_for_speculation
from localchat.engine.stats import GenerationStats
from localchat.engine.types import (
    FinishReason,
    GenerationRequest,
    GenerationResult,
    SpeculationState,
    TokenEvent,
)

FOLLOW_UP = "Now add a docstring."
# A long first turn (about 240 tokens), so that reading it again would show in the follow-up's wait.
REVIEWER = "You are a careful Python reviewer. " * 30


class ApiUnavailable(EngineError):
    """The ``openai`` package is not installed."""


@dataclass
class _Streamed:
    text: str = ""
    first: float = 0.0  # perf_counter of the first text, then of the last
    last: float = 0.0
    finish: str | None = None
    usage: Any = None
    timings: dict[str, Any] | None = None
    cancelled: bool = False


class ApiBenchEngine:
    """A BenchEngine whose replies come from the server at ``base_url`` (``.../v1``)."""

    def __init__(self, base_url: str, model: str = "localchat", api_key: str = "none",
                 timeout_s: float = 600.0) -> None:
        try:
            import openai
        except ImportError:
            raise ApiUnavailable("--through-api needs the openai package: pip install openai") from None
        self._openai = openai
        # Any: the client's typed overloads want its own TypedDicts for what is plain JSON here.
        self.client: Any = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)
        self.model = model
        # Per (API mode name, draft length): (tokens, the server's own generation seconds) over every reply.
        self.server_seconds: dict[tuple[str, int], tuple[int, float]] = {}

    def reset(self) -> None:
        """Nothing to clear: each request names its own conversation (``user``)."""

    def generate(
        self,
        request: GenerationRequest,
        on_event: Callable[[TokenEvent], None] | None = None,
        should_cancel: Callable[[], bool] | None = None,
    ) -> GenerationResult:
        mode = mode_for_speculation(request.speculation)
        extra: dict[str, Any] = {"speculative": {"mode": mode, "n_max": request.speculation.draft_tokens}}
        if request.session:
            extra["user"] = request.session
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        got = self._stream(messages, request.max_tokens, request.sampling.temperature, extra,
                           should_cancel or (lambda: False))
        stats = _stats(got)
        if got.timings and request.session:  # the runner's timed replies (its warm-up names none)
            key = (mode, request.speculation.draft_tokens)
            tokens, seconds = self.server_seconds.get(key, (0, 0.0))
            self.server_seconds[key] = (tokens + stats.generated_tokens,
                                        seconds + float(got.timings.get("predicted_ms") or 0.0) / 1000)
        reason = (FinishReason.CANCELLED if got.cancelled
                  else FinishReason.LENGTH if got.finish == "length" else FinishReason.STOP)
        spec = SpeculationState(active=mode != "off", drafter=mode)
        return GenerationResult(got.text, reason, stats, spec)

    def turn_latency(self, prompt: str, max_tokens: int = 32) -> TurnLatency:
        """Time to first token of a first turn (a long system prompt and ``prompt``) and of its
        follow-up, plain decoding."""
        history = [{"role": "system", "content": REVIEWER}, {"role": "user", "content": prompt}]
        off = {"speculative": {"mode": "off"}}
        t0 = time.perf_counter()
        first = self._stream(history, max_tokens, 0.0, off, lambda: False)
        history += [{"role": "assistant", "content": first.text}, {"role": "user", "content": FOLLOW_UP}]
        t1 = time.perf_counter()
        follow = self._stream(history, max_tokens, 0.0, off, lambda: False)
        return TurnLatency(first.first - t0, follow.first - t1)

    def _stream(self, messages: list[dict[str, str]], max_tokens: int, temperature: float,
                extra: dict[str, Any], cancel: Callable[[], bool]) -> _Streamed:
        got = _Streamed()
        try:
            stream = self.client.chat.completions.create(
                model=self.model, messages=messages, max_tokens=max_tokens,
                temperature=temperature, stream=True, stream_options={"include_usage": True},
                extra_body=extra)
            with stream:
                for chunk in stream:
                    now = time.perf_counter()
                    if cancel():
                        got.cancelled = True
                        break
                    if chunk.choices:
                        choice = chunk.choices[0]
                        if choice.delta.content:
                            got.text += choice.delta.content
                            got.first = got.first or now
                            got.last = now
                        got.finish = choice.finish_reason or got.finish
                    if chunk.usage is not None:
                        got.usage = chunk.usage
                    timings = (chunk.model_extra or {}).get("timings")
                    if timings:
                        got.timings = timings
        except self._openai.APIError as exc:
            raise EngineError(f"The API answered with an error: {exc}") from exc
        return got


def _stats(got: _Streamed) -> GenerationStats:
    timings = got.timings or {}
    tokens = int(got.usage.completion_tokens) if got.usage is not None else int(timings.get("predicted_n", 0))
    seen = got.last - got.first
    seconds = seen * tokens / (tokens - 1) if tokens > 1 and seen > 0 else 0.0
    drafted = int(timings.get("draft_n", 0))
    accepted = int(timings.get("draft_n_accepted", 0))
    return GenerationStats(
        prompt_tokens=int(timings.get("prompt_n", 0)),
        cached_prompt_tokens=int(timings.get("cache_n", 0)),
        prompt_seconds=float(timings.get("prompt_ms", 0.0)) / 1000,
        generated_tokens=tokens,
        generation_seconds=seconds,
        verify_passes=max(0, tokens - accepted),
        drafted=drafted,
        accepted=accepted,
    )
