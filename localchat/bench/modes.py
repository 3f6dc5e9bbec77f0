"""Benchmark modes: a speculation mode under the label the report shows it by.

What each mode name means is engine/speculation_modes.py's (``speculation_for_mode``), shared with
``localchat generate`` and the HTTP API; a benchmark mode adds only its label (``draft:8`` for the
draft model at length 8 in a sweep).
"""

from __future__ import annotations

from dataclasses import dataclass

from localchat.engine.speculation_modes import speculation_for_mode
from localchat.engine.types import SpeculationConfig
from localchat.settings.options import DRAFT_TOKENS_DEFAULT


@dataclass(frozen=True)
class BenchMode:
    name: str  # "off", "draft", "ngram", "auto", "adaptive", "draft:8", ...
    speculation: SpeculationConfig


def bench_mode(
    name: str, draft_tokens: int = DRAFT_TOKENS_DEFAULT, p_min: float | None = None, label: str | None = None
) -> BenchMode:
    """The mode ``name`` (one of ``speculation_modes.MODE_NAMES``) shown as ``label`` (default: the name);
    ValueError with a sentence for an unknown name."""
    return BenchMode(label or name, speculation_for_mode(name, draft_tokens, p_min))
