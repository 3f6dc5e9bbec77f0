"""The speculation modes by name (engine/speculation_modes.py): one meaning for the bench, the CLI
and the API."""

from __future__ import annotations

import pytest

from localchat.engine.speculation_modes import MODE_NAMES, speculation_for_mode
from localchat.engine.types import DrafterKind, SpeculationConfig
from localchat.settings.options import DRAFT_TOKENS_DEFAULT, DRAFT_TOKENS_MAX


def test_every_mode_name_means_one_speculation() -> None:
    assert MODE_NAMES == ("off", "draft", "ngram", "auto", "adaptive")
    got = {name: speculation_for_mode(name, 6, 0.3) for name in MODE_NAMES}
    assert got["off"] == SpeculationConfig(enabled=False, draft_tokens=6)
    fixed = {"draft": DrafterKind.MODEL, "ngram": DrafterKind.NGRAM, "auto": DrafterKind.AUTO}
    for name, kind in fixed.items():
        assert got[name] == SpeculationConfig(drafter=kind, draft_tokens=6, adaptive=False, p_min=0.3), name
    assert got["adaptive"] == SpeculationConfig(drafter=DrafterKind.AUTO, draft_tokens=6, adaptive=True,
                                                p_min=0.3)


def test_the_defaults_are_the_options_and_the_configs() -> None:
    """Without a length or a cut-off: the draft length's declared default and SpeculationConfig's p_min;
    adaptive is what the app runs by default."""
    adaptive = speculation_for_mode("adaptive")
    assert adaptive.draft_tokens == DRAFT_TOKENS_DEFAULT
    assert adaptive == SpeculationConfig()


def test_an_unknown_name_is_a_sentence_that_lists_the_modes() -> None:
    with pytest.raises(ValueError) as caught:
        speculation_for_mode("warp")
    message = str(caught.value)
    assert message == "'warp' is not a speculation mode; use one of off, draft, ngram, auto, adaptive."
    with pytest.raises(ValueError, match="'Draft' is not a speculation mode"):
        speculation_for_mode("Draft")  # names are exact, as the API's and the CLI's always were


def test_a_draft_length_out_of_bounds_is_refused() -> None:
    assert speculation_for_mode("draft", DRAFT_TOKENS_MAX).draft_tokens == DRAFT_TOKENS_MAX
    with pytest.raises(ValueError, match="draft_tokens must be between 1 and 16"):
        speculation_for_mode("draft", DRAFT_TOKENS_MAX + 1)


def test_a_speculation_gives_back_its_mode_name() -> None:
    """What the benchmark asks the API for (bench/api_engine.py) is the name it measured here."""
    from localchat.engine.speculation_modes import mode_for_speculation

    for name in MODE_NAMES:
        assert mode_for_speculation(speculation_for_mode(name, 3)) == name
