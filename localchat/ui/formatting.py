"""Words and numbers as the status bar and the dialogs show them (pure functions, easy to test).

One vocabulary for speculation's two statistics (defined in engine/stats.py): the
status bar, the benchmark dialog, the reply footers and their tooltips all take
the names, the way of writing the figures and the one-sentence explanations from here.
"""

from __future__ import annotations

from localchat.catalog.drafter_payoff import format_factor
from localchat.catalog.sizes import format_bytes
from localchat.engine.stats import GenerationStats
from localchat.engine.types import FinishReason, SpeculationState

__all__ = ["format_bytes"]  # the one byte formatter (catalog.sizes), re-exported for the widgets

ACCEPTANCE_LENGTH = "Acceptance length"
ACCEPTANCE_LENGTH_TIP = (
    "Acceptance length: the tokens each pass of the main model writes on average, "
    "so 1.00 means the drafter saved nothing and 3.00 means three tokens for the price of one pass."
)
ACCEPTANCE_RATE = "Acceptance rate"
ACCEPTANCE_RATE_TIP = "Acceptance rate: the share of the drafter's proposed tokens that the main model kept."
SPEED_UP_TIP = "Speed-up: tokens per second with speculation divided by tokens per second without it."


def format_rate(tokens_per_s: float) -> str:
    return f"{tokens_per_s:.1f} tok/s"


def format_length(length: float) -> str:
    """An acceptance length as every widget writes it: "2.35"."""
    return f"{length:.2f}"


def format_share(rate: float) -> str:
    """An acceptance rate (0-1) as every widget writes it: "43%"."""
    return f"{rate * 100:.0f}%"


def format_speedup(speedup: float) -> str:
    """A speed against plain decoding: "0.8x"; two decimals near 1, where one would say 1.0x for a loss.
    The catalog's prediction before a download says it the same way (catalog/drafter_payoff.py)."""
    return format_factor(speedup)


def format_acceptance_length(stats: GenerationStats) -> str:
    return format_length(stats.acceptance_length) if stats.verify_passes and stats.drafted else "–"


def format_acceptance_rate(stats: GenerationStats) -> str:
    return format_share(stats.acceptance_rate) if stats.drafted else "–"


def paused_sentence(speedup: float) -> str:
    """Why adaptive speculation paused itself, in words (``speedup`` 0: not measured)."""
    figure = f" ({format_speedup(speedup)})" if speedup > 0 else ""
    return (
        "Speculation is paused: on this computer the drafter costs more than it saves "
        f"for this model{figure}."
    )


RESUMING = "Speculation: on from the next reply"


def speculation_text(
    state: SpeculationState | None, enabled: bool, drafter_name: str = "", resuming: bool = False
) -> str:
    """The speculation field in full: the drafter's name, "n-gram", paused and why, or off and why.

    ``drafter_name`` replaces the engine's name for the draft model (the catalog's, see
    catalog.names); ``resuming`` says the user just turned speculation back on.
    """
    if not enabled:
        return "Speculation: off (turned off)"
    if resuming:
        return RESUMING
    if state is None:
        return "Speculation: on"
    if state.paused:
        return paused_sentence(state.speedup)
    if not state.active:
        return f"Speculation: off ({state.reason})" if state.reason else "Speculation: off"
    return f"Draft: {drafter_name or state.drafter}"


def speculation_short(
    state: SpeculationState | None, enabled: bool, drafter_name: str = "", resuming: bool = False
) -> str:
    """The speculation field when space is short: the paused sentence becomes "Speculation paused (0.8x)"."""
    if enabled and not resuming and state is not None and state.paused:
        return f"Speculation paused ({format_speedup(state.speedup)})" if state.speedup > 0 else (
            "Speculation paused"
        )
    return speculation_text(state, enabled, drafter_name, resuming)


def reply_footer(stats: GenerationStats) -> str:
    """What a reply's footer says about its speed: "9.1 tok/s, acceptance length 2.35"."""
    text = format_rate(stats.tokens_per_s)
    if stats.drafted:
        text += f", {ACCEPTANCE_LENGTH.lower()} {format_length(stats.acceptance_length)}"
    return text


def reply_summary(stats: GenerationStats) -> str:
    """What the status bar says about the reply that just finished."""
    return f"Last reply: {reply_footer(stats)}"


def reading_text(done: int, total: int, elapsed: float) -> str:
    """While a long prompt is read, before the reply starts: how far, and about how long is left."""
    text = f"Reading the conversation: {done:,} of {total:,} tokens"
    if 0 < done < total and elapsed > 0.5:
        left = elapsed / done * (total - done)
        text += f", about {left:.0f} s left" if left < 90 else f", about {left / 60:.0f} min left"
    return text + " (Stop cancels)" if done < total else text


def reading_short(done: int, total: int) -> str:
    """The status bar's form of ``reading_text``."""
    return f"Reading {100 * done // max(1, total)}%"


def context_text(used: int, limit: int) -> str:
    return f"Context {used:,} / {limit:,}" if limit else f"Context {used:,}"


def ended_footer(stats: GenerationStats | None, reason: FinishReason | None) -> str:
    """A finished reply's footer: its speed, after why it ended early ("Stopped.", "Cut off...")."""
    text = reply_footer(stats) if stats is not None else ""
    if reason is FinishReason.CANCELLED:
        return "Stopped. " + text
    if reason is FinishReason.LENGTH:
        return "Cut off at the length limit. " + text
    return text
