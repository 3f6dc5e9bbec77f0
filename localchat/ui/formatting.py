"""Words and numbers as the status bar and the dialogs show them (pure functions, easy to test)."""

from __future__ import annotations

from localchat.catalog.sizes import format_bytes
from localchat.engine.stats import GenerationStats
from localchat.engine.types import SpeculationState

__all__ = ["format_bytes"]  # the one byte formatter (catalog.sizes), re-exported for the widgets


def format_rate(tokens_per_s: float) -> str:
    return f"{tokens_per_s:.1f} tok/s"


def format_acceptance_length(stats: GenerationStats) -> str:
    return f"{stats.acceptance_length:.2f}" if stats.verify_passes and stats.drafted else "–"


def format_acceptance_rate(stats: GenerationStats) -> str:
    return f"{stats.acceptance_rate * 100:.0f}%" if stats.drafted else "–"


def speculation_text(state: SpeculationState | None, enabled: bool) -> str:
    """The speculation field: the drafter's name, "n-gram", or "off" with the reason."""
    if not enabled:
        return "Speculation: off (turned off)"
    if state is None:
        return "Speculation: on"
    if state.paused:
        reason = state.reason.removeprefix("speculation paused").lstrip(":; ")
        return f"Speculation paused: {reason}" if reason else "Speculation paused"
    if not state.active:
        return f"Speculation: off ({state.reason})" if state.reason else "Speculation: off"
    return f"Draft: {state.drafter}"


def reply_summary(stats: GenerationStats) -> str:
    """What the status bar says about the reply that just finished."""
    text = f"Last reply: {format_rate(stats.tokens_per_s)}"
    if stats.drafted:
        text += f", accept. length {stats.acceptance_length:.2f}"
    return text


def context_text(used: int, limit: int) -> str:
    return f"Context {used:,} / {limit:,}" if limit else f"Context {used:,}"
