"""Every entry point gets the same refusal of numbers the sampler cannot use (issue 29).

``SamplingParams`` and ``GenerationRequest`` check their numbers as ``SpeculationConfig`` does, so the
command line, the API and the app cannot hand the engine a NaN temperature, a zero repeat penalty (a
division by zero) or a reply of 0 tokens (which still wrote one).
"""

from __future__ import annotations

import math

import pytest

from localchat.engine.types import GenerationRequest, SamplingParams


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", math.nan),
        ("temperature", math.inf),
        ("temperature", -0.5),
        ("top_k", -1),
        ("top_p", math.nan),
        ("top_p", 1.5),
        ("top_p", -0.1),
        ("min_p", math.nan),
        ("min_p", 2.0),
        ("repeat_penalty", 0.0),
        ("repeat_penalty", -1.0),
        ("repeat_penalty", math.nan),
        ("repeat_penalty", math.inf),
        ("repeat_last_n", -1),
    ],
)
def test_sampling_numbers_the_sampler_cannot_use_are_refused(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        SamplingParams(**{field: value})  # type: ignore[arg-type]


def test_the_sampling_edges_people_use_are_kept() -> None:
    SamplingParams(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0, seed=-1)
    SamplingParams(temperature=5.0, top_p=0.0, min_p=1.0, repeat_penalty=0.5, repeat_last_n=0)


@pytest.mark.parametrize("max_tokens", [0, -5])
def test_a_reply_of_no_tokens_is_refused(max_tokens: int) -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        GenerationRequest(prompt="x", max_tokens=max_tokens)
    assert GenerationRequest(prompt="x", max_tokens=1).max_tokens == 1
