"""The accept/resample step keeps the target distribution; transforms match their definitions."""

from __future__ import annotations

import numpy as np
import pytest

from localchat.engine import sampling
from localchat.engine.types import SamplingParams


def _dist(probs: list[float]) -> sampling.Dist:
    p = np.asarray(probs, dtype=np.float64)
    return sampling.Dist(np.arange(len(p), dtype=np.int64), p / p.sum())


@pytest.mark.parametrize(
    ("p", "q"),
    [
        ([0.5, 0.3, 0.15, 0.05], [0.1, 0.2, 0.3, 0.4]),  # drafter badly wrong
        ([0.7, 0.2, 0.1, 0.0], [0.6, 0.3, 0.05, 0.05]),  # close, q covers a token p excludes
        ([0.25, 0.25, 0.25, 0.25], [0.97, 0.01, 0.01, 0.01]),  # overconfident drafter
    ],
)
def test_speculative_sampling_output_is_distributed_as_target(p: list[float], q: list[float]) -> None:
    rng = np.random.default_rng(1234)
    P, Q = _dist(p), _dist(q)
    n = 60_000
    counts = np.zeros(len(p))
    accepted = 0
    for _ in range(n):
        x = Q.sample(rng)
        ok, tok = sampling.speculative_accept(P, Q, x, rng)
        accepted += ok
        counts[tok] += 1
    freq = counts / n
    # Total variation distance to p: sampling noise at n=60k is about 0.005.
    assert 0.5 * np.abs(freq - P.probs).sum() < 0.015, (freq, P.probs)
    # Theory: the acceptance probability is sum(min(p, q)).
    expected_accept = np.minimum(P.probs, Q.probs).sum()
    assert abs(accepted / n - expected_accept) < 0.015


def test_point_mass_draft_accepts_with_target_probability() -> None:
    rng = np.random.default_rng(7)
    P = _dist([0.6, 0.3, 0.1])
    n = 40_000
    counts = np.zeros(3)
    acc = 0
    for _ in range(n):
        ok, tok = sampling.speculative_accept(P, sampling.point_mass(1), 1, rng)
        acc += ok
        counts[tok] += 1
    assert abs(acc / n - 0.3) < 0.015
    assert 0.5 * np.abs(counts / n - P.probs).sum() < 0.015


def test_distribution_applies_top_k_top_p_min_p_and_temperature() -> None:
    logits = np.log(np.array([0.4, 0.3, 0.2, 0.06, 0.04], dtype=np.float32))
    d = sampling.distribution(logits, (), SamplingParams(temperature=1.0, top_k=3, top_p=1.0, min_p=0.0))
    assert sorted(d.ids.tolist()) == [0, 1, 2]
    assert d.probs.sum() == pytest.approx(1.0)
    d = sampling.distribution(logits, (), SamplingParams(temperature=1.0, top_k=0, top_p=0.65, min_p=0.0))
    assert d.ids.tolist() == [0, 1]  # 0.4 + 0.3 >= 0.65
    d = sampling.distribution(logits, (), SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.45))
    assert d.ids.tolist() == [0, 1, 2]  # >= 0.45 * 0.4 = 0.18
    cold = sampling.distribution(logits, (), SamplingParams(temperature=0.1, top_k=0, top_p=1.0, min_p=0.0))
    assert cold.top() == (0, pytest.approx(cold.probs.max()))
    assert cold.probs.max() > 0.9


def test_repeat_penalty_lowers_recent_tokens() -> None:
    logits = np.array([2.0, 1.9, -1.0], dtype=np.float32)
    params = SamplingParams(repeat_penalty=1.5)
    assert sampling.greedy_token(logits, [0], params) == 1
    out = sampling.apply_repeat_penalty(logits, [0, 2], params)
    assert out[0] == pytest.approx(2.0 / 1.5) and out[2] == pytest.approx(-1.5)
    assert logits[0] == 2.0  # the input is not modified


def test_seeded_sampling_is_reproducible() -> None:
    d = _dist([0.2, 0.3, 0.5])
    r1, r2 = np.random.default_rng(5), np.random.default_rng(5)
    a = [d.sample(r1) for _ in range(50)]
    b = [d.sample(r2) for _ in range(50)]
    assert a == b
    assert len(set(a)) == 3


def test_a_grammar_restricts_the_distribution_before_top_k_and_renormalises() -> None:
    logits = np.log(np.array([0.4, 0.3, 0.2, 0.06, 0.04], dtype=np.float32))
    allowed = np.array([False, True, False, True, True])
    x = sampling.restrict(logits, allowed)
    assert np.isneginf(x[0]) and x[1] == logits[1] and np.isfinite(logits[0])  # a copy
    d = sampling.distribution(x, (), SamplingParams(temperature=1.0, top_k=2, top_p=1.0, min_p=0.0))
    # Top-2 among the allowed tokens (1 and 3), not the allowed part of the unrestricted top-2.
    assert d.ids.tolist() == [1, 3]
    assert d.probs == pytest.approx([0.3 / 0.36, 0.06 / 0.36])
    wide = sampling.distribution(x, (), SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0))
    assert sorted(wide.ids.tolist()) == [1, 3, 4]  # forbidden tokens are no candidates, even at p = 0


def test_a_draft_cut_at_a_forbidden_token_keeps_the_restricted_distribution() -> None:
    """The decode loop ends a draft before a token the grammar forbids and draws that position from
    the residual of the cut token's draft distribution (a rejection: the restricted p gives it 0).
    Drawing from p itself instead would favour what the drafter underrates."""
    rng = np.random.default_rng(99)
    p = _dist([0.0, 0.5, 0.3, 0.2])  # token 0 is forbidden: the restricted target gives it 0
    p = sampling.Dist(p.ids[1:], p.probs[1:])
    q = _dist([0.5, 0.1, 0.3, 0.1])  # the drafter likes the forbidden token
    n = 60_000
    cut_then_residual = np.zeros(4)
    cut_then_p = np.zeros(4)
    for _ in range(n):
        x = q.sample(rng)
        if x == 0:  # cut: never verified
            cut_then_residual[sampling.speculative_accept(p, q, x, rng)[1]] += 1
            cut_then_p[p.sample(rng)] += 1
        else:
            tok = sampling.speculative_accept(p, q, x, rng)[1]
            cut_then_residual[tok] += 1
            cut_then_p[tok] += 1
    target = np.array([0.0, 0.5, 0.3, 0.2])
    assert 0.5 * np.abs(cut_then_residual / n - target).sum() < 0.015
    assert 0.5 * np.abs(cut_then_p / n - target).sum() > 0.05
