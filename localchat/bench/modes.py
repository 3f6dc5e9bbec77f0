"""Benchmark modes: the one meaning of each mode name, for the CLI, the app and the runner."""

from __future__ import annotations

from dataclasses import dataclass, replace

from localchat.engine.types import DrafterKind, SpeculationConfig


@dataclass(frozen=True)
class BenchMode:
    name: str  # "off", "draft", "ngram", "auto", "adaptive", "draft:8", ...
    speculation: SpeculationConfig


MODE_NAMES = ("off", "draft", "ngram", "auto", "adaptive")
# A mode name may end in one of these: fast-forward of grammar-forced tokens on or off (prompts with a
# schema; without the suffix, the engine's default).
FAST_FORWARD_SUFFIXES = {"+ff": True, "-ff": False}


def bench_mode(
    name: str, draft_tokens: int = 4, p_min: float | None = None, label: str | None = None
) -> BenchMode:
    """off: plain decoding; draft: the draft model, fixed length; ngram: prompt lookup, fixed
    length; auto: the draft model plus n-gram lookup where the context repeats, fixed length;
    adaptive: auto with the adaptive policy (draft length from measured acceptance and cost,
    auto-off when it loses). "+ff" / "-ff" after any of them: grammar-forced tokens fast-forwarded
    or not (``SpeculationConfig.fast_forward``)."""
    label = label or name
    for suffix, on in FAST_FORWARD_SUFFIXES.items():
        if name.endswith(suffix):
            mode = bench_mode(name[: -len(suffix)], draft_tokens, p_min, label)
            return BenchMode(label, replace(mode.speculation, fast_forward=on))
    p = SpeculationConfig().p_min if p_min is None else p_min
    if name == "off":
        return BenchMode(label, SpeculationConfig(enabled=False, draft_tokens=draft_tokens))
    if name == "adaptive":
        return BenchMode(
            label,
            SpeculationConfig(drafter=DrafterKind.AUTO, draft_tokens=draft_tokens, adaptive=True, p_min=p),
        )
    kinds = {"draft": DrafterKind.MODEL, "ngram": DrafterKind.NGRAM, "auto": DrafterKind.AUTO}
    if name not in kinds:
        raise ValueError(f"unknown benchmark mode {name!r} (use {', '.join(MODE_NAMES)})")
    return BenchMode(
        label, SpeculationConfig(drafter=kinds[name], draft_tokens=draft_tokens, adaptive=False, p_min=p)
    )
