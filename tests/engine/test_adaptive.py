"""The adaptive draft-length controller on scripted acceptance and timing sequences."""

from __future__ import annotations

import random

import pytest

from localchat.engine.adaptive import AdaptivePolicy, CostModel, FixedPolicy


def drive(policy: AdaptivePolicy, accept_prob: float, steps: int, t_base: float = 0.1,
          t_per_token: float = 0.005, t_draft: float = 0.01, seed: int = 0) -> list[int]:
    """Run the policy against a simulated pair; returns the draft lengths it chose."""
    rng = random.Random(seed)
    lengths = []
    for _ in range(steps):
        n = policy.draft_length()
        lengths.append(n)
        accepted = 0
        while accepted < n and rng.random() < accept_prob:
            accepted += 1
        policy.observe(n, accepted, t_draft * n, t_base + t_per_token * (n + 1), "draft")
    return lengths


def step(policy: AdaptivePolicy, rng: random.Random, accept_prob: float, t_draft: float = 0.05) -> None:
    n = policy.draft_length()
    accepted = 0
    while accepted < n and rng.random() < accept_prob:
        accepted += 1
    policy.observe(n, accepted, t_draft * n, 0.1 + 0.005 * (n + 1), "draft")


def run_until_paused(policy: AdaptivePolicy, accept_prob: float, limit: int = 200) -> int:
    rng = random.Random(11)
    for i in range(limit):
        if policy.paused:
            return i
        step(policy, rng, accept_prob)
    raise AssertionError("the policy never paused")


def test_fixed_policy_never_changes() -> None:
    p = FixedPolicy(5)
    for _ in range(10):
        p.observe(5, 0, 1.0, 1.0, "draft")
    assert p.draft_length() == 5 and not p.paused and p.reason == ""


def test_first_step_measures_plain_speed() -> None:
    p = AdaptivePolicy(CostModel(), start=4)
    assert p.draft_length() == 0
    p.observe(0, 0, 0.0, 0.1, "draft")
    assert p.draft_length() == 4


def test_grows_when_drafts_are_cheap_and_accepted() -> None:
    p = AdaptivePolicy(CostModel(), start=4)
    lengths = drive(p, accept_prob=0.95, steps=80)
    assert max(lengths[-20:]) >= 8
    assert not p.paused


def test_shrinks_when_acceptance_is_low() -> None:
    p = AdaptivePolicy(CostModel(), start=8)
    lengths = drive(p, accept_prob=0.35, steps=60, t_draft=0.001)
    tail = [n for n in lengths[-20:] if n > 0]
    assert tail and max(tail) <= 3


def test_longer_drafts_when_verification_is_flat_than_when_it_grows() -> None:
    """A bandwidth-bound target (flat verify cost) earns longer drafts than a compute-bound one."""
    flat = AdaptivePolicy(CostModel(), start=4)
    steep = AdaptivePolicy(CostModel(), start=4)
    lf = drive(flat, 0.8, 80, t_per_token=0.0005)
    ls = drive(steep, 0.8, 80, t_per_token=0.04)
    assert sum(lf[-30:]) > sum(ls[-30:])


def test_pauses_when_speculation_loses_and_probes_again_later() -> None:
    p = AdaptivePolicy(CostModel(), start=4, retry_tokens=32)
    # Drafts are rejected and expensive: speculation is slower than plain decoding.
    steps = run_until_paused(p, accept_prob=0.05)
    assert steps <= 20  # it does not take long to notice
    assert p.draft_length() == 0
    assert "speculation paused" in p.reason and "retrying in 32 tokens" in p.reason
    # Plain steps count down the pause; then it probes again.
    for _ in range(32):
        assert p.draft_length() == 0
        p.observe(0, 0, 0.0, 0.105, "draft")
    assert not p.paused and p.draft_length() > 0
    # Still losing: paused again, for twice as long.
    run_until_paused(p, accept_prob=0.05)
    assert "retrying in 64 tokens" in p.reason


def test_recovers_when_the_text_becomes_predictable() -> None:
    p = AdaptivePolicy(CostModel(), start=4, retry_tokens=16)
    run_until_paused(p, accept_prob=0.05)
    for _ in range(16):
        p.observe(0, 0, 0.0, 0.105, "draft")
    drive(p, accept_prob=0.95, steps=60, t_draft=0.01, seed=3)
    assert not p.paused
    assert p.draft_length() >= 4


def test_does_not_pause_while_speculation_pays() -> None:
    p = AdaptivePolicy(CostModel(), start=4)
    drive(p, accept_prob=0.7, steps=300, t_draft=0.01)
    assert not p.paused


def test_cost_model_fits_a_line_through_measured_batches() -> None:
    c = CostModel()
    for _ in range(5):
        c.observe_verify(1, 0.10)
        c.observe_verify(5, 0.14)
    assert c.t_verify(1) == 0.10
    assert abs((c.t_verify(9) or 0) - 0.18) < 1e-6


def test_a_new_conversation_starts_from_what_the_pair_learned() -> None:
    cost = CostModel()
    first = AdaptivePolicy(cost, start=2, source="draft")
    drive(first, accept_prob=0.97, steps=120, t_per_token=0.001, t_draft=0.005)
    learned = first.draft_length()
    assert learned >= 6
    second = AdaptivePolicy(cost, start=2, source="draft")
    assert second.draft_length() >= learned - 2  # not the blind start of 2
    other_pair = AdaptivePolicy(cost, start=2, source="another drafter")
    assert other_pair.draft_length() == 2


def test_a_new_conversation_starts_paused_where_the_pair_loses() -> None:
    cost = CostModel()
    first = AdaptivePolicy(cost, start=4, source="draft", retry_tokens=32)
    run_until_paused(first, accept_prob=0.05)
    second = AdaptivePolicy(cost, start=4, source="draft", retry_tokens=32)
    assert second.paused and second.draft_length() == 0
    assert "speculation paused" in second.reason


def drive_early_stop(policy, cont: float, accept: float, steps: int, t_verify=(0.1, 0.001),
                     t_draft: float = 0.004, seed: int = 5) -> tuple[list[int], float]:
    """A drafter that stops by itself (like p_min) with chance 1 - ``cont`` at each position.

    Returns the caps chosen and the simulated tokens per second.
    """
    rng = random.Random(seed)
    caps, tokens, seconds = [], 0, 0.0
    for _ in range(steps):
        cap = policy.draft_length()
        caps.append(cap)
        drafted = 0
        if cap > 0:
            drafted = 1
            while drafted < cap and rng.random() < cont:
                drafted += 1
        accepted = 0
        while accepted < drafted and rng.random() < accept:
            accepted += 1
        d_s, v_s = t_draft * drafted, t_verify[0] + t_verify[1] * (drafted + 1)
        policy.observe(drafted, accepted, d_s, v_s, "draft")
        tokens += accepted + 1
        seconds += d_s + v_s
    return caps, tokens / seconds


def test_a_drafter_that_stops_early_gets_a_higher_cap() -> None:
    """On uncertain text the drafter's own cut-off shortens drafts, so a high cap costs little."""
    p = AdaptivePolicy(CostModel(), start=4)
    caps, rate = drive_early_stop(p, cont=0.7, accept=0.9, steps=300)
    assert min(c for c in caps[-50:] if c) >= 6, caps[-50:]
    # It learned that drafts end early (continuation about 0.7 per position)...
    assert all(0.5 < c < 0.9 for c in p._cont[:3]), p._cont
    # ...so a cap of 16 means drafts of about 1 / (1 - 0.7) = 3.3 tokens, not 16.
    assert p.expected_draft_length(16) < 6
    fixed = {n: drive_early_stop(FixedPolicy(n), cont=0.7, accept=0.9, steps=300)[1] for n in (2, 4, 8)}
    assert rate >= 0.97 * max(fixed.values()), (rate, fixed)


def test_a_confident_drafter_on_a_compute_bound_target_keeps_short_drafts() -> None:
    """When the drafter rarely stops by itself and each verified token costs, the cap stays low."""
    p = AdaptivePolicy(CostModel(), start=4)
    caps, rate = drive_early_stop(p, cont=0.98, accept=0.6, steps=300, t_verify=(0.05, 0.02), t_draft=0.01)
    assert max(caps[-50:]) <= 4, caps[-50:]
    fixed = {n: drive_early_stop(FixedPolicy(n), cont=0.98, accept=0.6, steps=300, t_verify=(0.05, 0.02),
                                 t_draft=0.01)[1] for n in (2, 4, 8)}
    assert rate >= 0.97 * max(fixed.values()), (rate, fixed)


def test_a_few_slow_plain_steps_do_not_make_speculation_look_better() -> None:
    """Verification cost never falls with the batch: slow single-token passes (a cold start)
    are bounded by the well-measured two-token passes."""
    cost = CostModel()
    for _ in range(3):
        cost.observe_verify(1, 0.475)
    for _ in range(50):
        cost.observe_verify(2, 0.062)
    assert cost.t_verify(1) == pytest.approx(0.062)
    assert cost.t_verify(2) == pytest.approx(0.062)


def test_one_slow_pass_at_another_size_does_not_tilt_plain_speed() -> None:
    cost = CostModel()
    cost.observe_verify(1, 0.039)
    for _ in range(10):
        cost.observe_verify(2, 0.057)
    cost.observe_verify(3, 0.200)  # one slow pass (a busy moment)
    assert cost.t_verify(1) == pytest.approx(0.039)
