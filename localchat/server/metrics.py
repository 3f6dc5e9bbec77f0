"""Counters for ``GET /metrics`` in Prometheus text format, named as llama-server names them.

Dashboards built for llama-server read ``llamacpp:spec_decode_num_draft_tokens_total``,
``..._num_accepted_tokens_total`` and ``..._num_drafts_total`` (one "draft" is
one verification pass that checked at least one draft token); the rest
(prompt and predicted tokens, requests) follow the same naming. Requests are
also counted by the API surface they came through (``surface="anthropic"``...);
the speculation counters sum every surface.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from localchat.engine.stats import GenerationStats


@dataclass
class _Counters:
    prompt_tokens: int = 0
    prompt_seconds: float = 0.0
    cached_tokens: int = 0
    predicted_tokens: int = 0
    predicted_seconds: float = 0.0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    drafts: int = 0
    requests_served: int = 0
    requests_failed: int = 0


class Metrics:
    """Thread-safe totals since the server started."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._c = _Counters()
        self._by_surface: dict[str, int] = {}

    def record(self, stats: GenerationStats, surface: str = "openai") -> None:
        with self._lock:
            self._by_surface[surface] = self._by_surface.get(surface, 0) + 1
            c = self._c
            c.prompt_tokens += stats.prompt_tokens
            c.prompt_seconds += stats.prompt_seconds
            c.cached_tokens += stats.cached_prompt_tokens
            c.predicted_tokens += stats.generated_tokens
            c.predicted_seconds += stats.generation_seconds
            c.draft_tokens += stats.drafted
            c.accepted_tokens += stats.accepted
            # Passes that verified a draft: one per position-0 draft token.
            c.drafts += stats.drafted_per_position[0] if stats.drafted_per_position else 0
            c.requests_served += 1

    def record_failure(self) -> None:
        with self._lock:
            self._c.requests_failed += 1

    def render(self, processing: Callable[[], int], deferred: Callable[[], int]) -> str:
        with self._lock:
            c = _Counters(**vars(self._c))
            by_surface = dict(self._by_surface)
        rows: list[tuple[str, str, str, float]] = [
            ("llamacpp:prompt_tokens_total", "counter", "Prompt tokens evaluated.", c.prompt_tokens),
            ("llamacpp:prompt_seconds_total", "counter", "Prompt evaluation time.", c.prompt_seconds),
            ("llamacpp:tokens_predicted_total", "counter", "Tokens generated.", c.predicted_tokens),
            ("llamacpp:tokens_predicted_seconds_total", "counter", "Generation time.", c.predicted_seconds),
            ("llamacpp:spec_decode_num_draft_tokens_total", "counter", "Draft tokens proposed.",
             c.draft_tokens),
            ("llamacpp:spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted.",
             c.accepted_tokens),
            ("llamacpp:spec_decode_num_drafts_total", "counter", "Drafts verified by the target.", c.drafts),
            ("llamacpp:requests_processing", "gauge", "Requests being generated.", processing()),
            ("llamacpp:requests_deferred", "gauge", "Requests waiting in the queue.", deferred()),
            ("localchat:prompt_tokens_cached_total", "counter", "Prompt tokens reused from the cache.",
             c.cached_tokens),
            ("localchat:requests_served_total", "counter", "Generation requests answered.",
             c.requests_served),
            ("localchat:requests_failed_total", "counter", "Generation requests that failed.",
             c.requests_failed),
        ]
        lines = []
        for name, kind, help_text, value in rows:
            shown = str(value) if isinstance(value, int) else f"{value:.6f}"
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {shown}"]
        name = "localchat:requests_by_surface_total"
        lines += [f"# HELP {name} Generation requests answered, by the API they came through.",
                  f"# TYPE {name} counter"]
        lines += [f'{name}{{surface="{surface}"}} {n}' for surface, n in sorted(by_surface.items())]
        return "\n".join(lines) + "\n"
