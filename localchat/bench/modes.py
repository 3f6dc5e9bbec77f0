"""Benchmark modes: a speculation mode under the label the report shows it by, and where it runs.

What each mode name means is engine/speculation_modes.py's (``speculation_for_mode``), shared with
``localchat generate`` and the HTTP API; a benchmark mode adds only its label (``draft:8`` for the
draft model at length 8 in a sweep) and its route.

A route is where a mode runs when one run measures the same prompts in more than one place: ``""``
is the bench's own engine; ``api`` the local API through the OpenAI client (``--through-api``),
``rpc+5ms`` the target split over workers behind 5 ms of added link latency (``--link-latency``).
A routed mode's label carries its route after ``@`` (``adaptive@api``), and its speed-up and "same
text" are against plain decoding on the same route (``off@api``), so each route's figures are read
as a run of their own, side by side with the others in one run.

A mode name may end in "+ff" or "-ff" (before any route): grammar-forced tokens fast-forwarded or not
(``SpeculationConfig.fast_forward``; prompts with a schema). Forced tokens are tokenised by the
grammar, so such a mode's text is compared with plain decoding at the same setting (``off+ff``)
where the run has one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from localchat.engine.speculation_modes import speculation_for_mode
from localchat.engine.types import SpeculationConfig
from localchat.settings.options import DRAFT_TOKENS_DEFAULT

ROUTE_MARK = "@"
OFF = "off"
# Variants of the adaptive policy, to measure side by side with it: each is ``adaptive`` with the
# ``AdaptiveVariant`` fields given here.
ADAPTIVE_VARIANTS: dict[str, dict[str, Any]] = {
    "adaptive-nofloor": {"floor": False},  # without its floor (the policy before issue 27)
    "adaptive-previous": {"previous": True},  # as an earlier release had it
    "adaptive-listen": {"listen": True},  # with a pause that listens to the target
    "adaptive-stickyskip": {"sticky_skip": True},  # skipped looks end only when their average pays
    # A clear loss in a reply's first steps pauses at once wherever it happens (issue 27's first rule),
    # or never, or only until the costs show the drafter can pay well and skipped looks then sit it out
    # to the warm-up's end (the rule before the default's: a look that loses after the longest skips
    # also pauses).
    "adaptive-earlyalways": {"early": "always"},
    "adaptive-earlynever": {"early": "never"},
    "adaptive-earlycost": {"early": "cost"},
    # The draft model gives way to lookup alone only on a calibrated or saved cost curve, as before.
    "adaptive-calibratedonly": {"learnt_curve": False},
    # Every pause ends with a probe, without looking back first, as before.
    "adaptive-probeonly": {"look_back": False},
    # The tokens after a draft's first priced with a calibration offset of their own.
    "adaptive-later": {"later": True},
    # A reply that starts drafting by lookup alone keeps to it for the whole reply, as before.
    "adaptive-lookuponly": {"model_look": False},
    # Lookup alone drafts while the draft model pauses, instead of plain steps.
    "adaptive-pauselookup": {"lookup_in_pause": True},
    # Every pause ends with its look back, whatever the target's confidence meanwhile, as before.
    "adaptive-alwayslook": {"sure_look": False},
    # Each process chooses between the draft model and lookup alone afresh, not from a saved profile's choice.
    "adaptive-rechoose": {"keep_choice": False},
    # A lookup draft beside the draft model is kept whole at lookup's own length, as before.
    "adaptive-freelookup": {"plan_lookup": False},
    # A choice of lookup alone made on a first estimate of the draft model's best case is held as any other.
    "adaptive-lockfirst": {"provisional_choice": False},
}
# A mode name may end in one of these: fast-forward of grammar-forced tokens on or off.
FAST_FORWARD_SUFFIXES = {"+ff": True, "-ff": False}


@dataclass(frozen=True)
class BenchMode:
    name: str  # the label: "off", "draft", "ngram", "auto", "adaptive", "draft:8", "adaptive@api", ...
    speculation: SpeculationConfig
    route: str = ""  # "" the bench's engine, else a key of run_bench's ``routes``


def bench_mode(
    name: str, draft_tokens: int = DRAFT_TOKENS_DEFAULT, p_min: float | None = None, label: str | None = None
) -> BenchMode:
    """The mode ``name`` (one of ``speculation_modes.MODE_NAMES``, maybe with a fast-forward suffix)
    shown as ``label`` (default: the name); ValueError with a sentence for an unknown name."""
    for suffix, on in FAST_FORWARD_SUFFIXES.items():
        if name.endswith(suffix):
            mode = bench_mode(name[: -len(suffix)], draft_tokens, p_min, label or name)
            return replace(mode, speculation=replace(mode.speculation, fast_forward=on))
    if name in ADAPTIVE_VARIANTS:
        spec = speculation_for_mode("adaptive", draft_tokens, p_min)
        variant = replace(spec.adaptive_variant, **ADAPTIVE_VARIANTS[name])
        return BenchMode(label or name, replace(spec, adaptive_variant=variant))
    return BenchMode(label or name, speculation_for_mode(name, draft_tokens, p_min))


def routed(mode: BenchMode, route: str) -> BenchMode:
    """``mode`` run on ``route``, labelled ``LABEL@ROUTE``."""
    return BenchMode(f"{mode.name}{ROUTE_MARK}{route}", mode.speculation, route)


def _suffix(name: str) -> str:
    return next((s for s in FAST_FORWARD_SUFFIXES if name.endswith(s)), "")


def off_labels(label: str) -> tuple[str, ...]:
    """The labels of the plain-decoding runs ``label`` may be compared with, best first: ``off`` on the
    same route with the same fast-forward suffix, then plain ``off`` on the same route."""
    name, mark, route = label.partition(ROUTE_MARK)
    same = f"{OFF}{_suffix(name)}{mark}{route}"
    plain = f"{OFF}{mark}{route}"
    return (same,) if same == plain else (same, plain)


def is_off(label: str) -> bool:
    return off_labels(label)[0] == label
