"""The ``speculative`` field of a request body (server/parsing.py): the shared mode names, and the
fall-back where no draft model is loaded. Plain functions, no server."""

from __future__ import annotations

import pytest

from localchat.engine.speculation_modes import MODE_NAMES, speculation_for_mode
from localchat.engine.types import DrafterKind, EngineInfo, ModelInfo, SpeculationState
from localchat.server.errors import ApiError
from localchat.server.parsing import Limits, speculation

TARGET = ModelInfo("/models/t.gguf", "T-1B", "qwen2", 1_000_000_000, 600_000_000, 4096, 32000, True)
DRAFTER = ModelInfo("/models/d.gguf", "D-0.5B", "qwen2", 500_000_000, 300_000_000, 4096, 32000, True)
LIMITS = Limits(max_tokens=512)


def info(draft: ModelInfo | None) -> EngineInfo:
    state = SpeculationState(active=draft is not None, drafter=draft.name if draft else "n-gram")
    return EngineInfo("CPU", TARGET, draft, 4096, 2, 0, state)


def test_every_shared_mode_name_is_accepted_and_means_what_it_means_everywhere() -> None:
    for name in MODE_NAMES:
        body = {"speculative": {"mode": name, "n_max": 6}}
        config, mode, warning = speculation(body, info(DRAFTER), LIMITS)
        assert (config, mode, warning) == (speculation_for_mode(name, 6), name, "")


def test_auto_drafts_a_fixed_length_with_the_draft_model_and_lookup() -> None:
    config, mode, warning = speculation({"speculative": {"mode": "auto"}}, info(DRAFTER), LIMITS)
    assert mode == "auto" and warning == ""
    assert config.enabled and config.drafter is DrafterKind.AUTO and not config.adaptive
    assert config.draft_tokens == 4


def test_auto_without_a_draft_model_is_lookup_and_says_so() -> None:
    config, mode, warning = speculation({"speculative": {"mode": "auto", "n_max": 5}}, info(None), LIMITS)
    assert mode == "ngram" and config == speculation_for_mode("ngram", 5)
    assert warning == "No draft model is loaded, so n-gram prompt lookup drafted instead of 'auto'."


def test_an_unknown_mode_names_every_mode_in_its_sentence() -> None:
    with pytest.raises(ApiError) as caught:
        speculation({"speculative": {"mode": "warp"}}, info(DRAFTER), LIMITS)
    assert caught.value.status == 400 and caught.value.param == "speculative.mode"
    assert caught.value.message == "'speculative.mode' must be one of off, draft, ngram, auto, adaptive."


def test_n_max_is_bounded_by_the_draft_lengths_bounds() -> None:
    with pytest.raises(ApiError, match="'n_max' must be between 1 and 16; it was 17"):
        speculation({"speculative": {"mode": "draft", "n_max": 17}}, info(DRAFTER), LIMITS)


def test_without_the_field_the_servers_default_mode_applies() -> None:
    config, mode, _ = speculation({}, info(DRAFTER), LIMITS)
    assert mode == "adaptive" and config == speculation_for_mode("adaptive")
