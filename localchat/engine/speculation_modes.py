"""The speculation modes by name: the one meaning of each name, for the benchmark, the CLI and the HTTP API.

- ``off``: plain decoding.
- ``draft``: the draft model, a fixed length.
- ``ngram``: prompt lookup (n-grams of the conversation), a fixed length.
- ``auto``: the draft model plus n-gram lookup where the context repeats, a fixed length.
- ``adaptive``: ``auto`` under the adaptive policy (engine/adaptive.py): each draft as long as the
  measured acceptance and costs make pay, paused where speculation loses. The app's default.

``localchat bench --modes``, the benchmark dialog, ``localchat generate`` and the API's
``"speculative": {"mode": ...}`` all read a name through ``speculation_for_mode``; each adds only
its own syntax around it (the bench's ``draft:8``, the API's fall-back where no draft model is
loaded). Here, in the engine layer next to ``SpeculationConfig``, because bench/, cli/ and server/
may all import it; it imports no llama_cpp, which the server must not load.
"""

from __future__ import annotations

from localchat.engine.types import DrafterKind, SpeculationConfig
from localchat.settings.options import DRAFT_TOKENS_DEFAULT

MODE_NAMES = ("off", "draft", "ngram", "auto", "adaptive")
# The modes that draft a fixed length, by the drafter they draft with.
_FIXED = {"draft": DrafterKind.MODEL, "ngram": DrafterKind.NGRAM, "auto": DrafterKind.AUTO}


def speculation_for_mode(
    name: str, draft_tokens: int = DRAFT_TOKENS_DEFAULT, p_min: float | None = None
) -> SpeculationConfig:
    """The speculation a mode name means: ``draft_tokens`` is the fixed length (``adaptive``: the
    length it starts from), ``p_min`` the draft model's cut-off (None: ``SpeculationConfig``'s).

    ValueError, with a sentence, for a name that is not one of ``MODE_NAMES`` or a draft length out
    of its bounds.
    """
    p = SpeculationConfig().p_min if p_min is None else p_min
    if name == "off":
        return SpeculationConfig(enabled=False, draft_tokens=draft_tokens)
    if name == "adaptive":
        return SpeculationConfig(drafter=DrafterKind.AUTO, draft_tokens=draft_tokens, adaptive=True, p_min=p)
    if name not in _FIXED:
        raise ValueError(f"{name!r} is not a speculation mode; use one of {', '.join(MODE_NAMES)}.")
    return SpeculationConfig(drafter=_FIXED[name], draft_tokens=draft_tokens, adaptive=False, p_min=p)


def mode_for_speculation(spec: SpeculationConfig) -> str:
    """The mode name that means ``spec`` (the inverse of ``speculation_for_mode``, its length and
    ``p_min`` aside): what the benchmark asks the API for, as ``"speculative": {"mode": ...}``."""
    if not spec.enabled:
        return "off"
    if spec.adaptive:
        return "adaptive"
    return next(name for name, kind in _FIXED.items() if kind == spec.drafter)
