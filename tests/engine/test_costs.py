"""The measured costs: the verification curve by batch size and the drafter's best case on it."""

from __future__ import annotations

import pytest

from localchat.engine.costs import CostModel
from tests.engine.cost_curves import Q4_CURVE, calibrated


def test_cost_model_fits_a_line_through_measured_batches() -> None:
    c = CostModel()
    for _ in range(5):
        c.observe_verify(1, 0.10)
        c.observe_verify(5, 0.14)
    assert c.t_verify(1) == 0.10
    assert abs((c.t_verify(9) or 0) - 0.18) < 1e-6


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


def test_the_surest_tokens_are_not_trusted_at_their_word_until_measured() -> None:
    cost = calibrated(Q4_CURVE)
    before = cost.best_case_gain("draft")
    cal = cost.calibration_for("draft")
    for _ in range(60):  # the drafter's surest tokens turn out right every time
        cal.observe([0.99], 1)
    after = cost.best_case_gain("draft")
    assert before is not None and after is not None and after > before
