"""The stop rule priced on measured costs: token by token, and a known draft planned whole."""

from __future__ import annotations

from localchat.engine.calibration import Calibration
from localchat.engine.costs import CostModel
from localchat.engine.stop_rule import CostStopRule
from tests.engine.cost_curves import F16_CURVE, Q4_CURVE, calibrated


def test_stop_rule_weighs_expected_tokens_against_their_cost() -> None:
    cost = CostModel()
    for _ in range(3):
        cost.observe_verify(1, 0.10)
        cost.observe_verify(2, 0.13)
        cost.observe_verify(3, 0.14)
        cost.observe_verify(4, 0.15)
    # Time is worth 10 tokens/s; a first draft token adds 0.03 s of verification.
    rule = CostStopRule(cost, Calibration(), value=10.0)
    assert not rule.take(0, 0.2)  # 0.2 expected tokens < 10 * 0.03: a plain step is better
    rule = CostStopRule(cost, Calibration(), value=10.0)
    assert rule.take(0, 0.9)
    # Looking at the next token costs a drafter pass (0.02 s) and 0.01 s more verification:
    # worth it when 0.9 * 0.9 expected tokens > 10 * 0.03.
    assert rule.look_further(0, decode_seconds=0.02)
    assert not rule.look_further(0, decode_seconds=0.2)
    assert rule.take(1, 0.5)  # 0.45 > 10 * 0.01
    assert not rule.take(2, 0.15)  # 0.45 * 0.15 < 10 * 0.01


def draft_length(curve: dict[int, float], confidence: float) -> int:
    """How far one draft of tokens of this confidence goes, time priced at plain speed."""
    cost = calibrated(curve, drafter_ms=5.0)
    rule = CostStopRule(cost, cost.calibration_for("draft"), value=1 / (curve[1] / 1000))
    n = 0
    while n < 16 and rule.take(n, confidence) and rule.look_further(n, 0.005):
        n += 1
    return n


def test_the_draft_length_follows_the_measured_curve() -> None:
    """Verification nearly free up to 8 tokens and dear beyond: the increments follow the curve and
    drafts stop near 8. Dear up to 4 and nearly free beyond (the Q4 curve's shape, exaggerated): the
    same tokens draft to the ceiling. One line through every size would price both alike."""
    flat_then_steep = {1: 60.0, 2: 70.0, 4: 72.0, 8: 76.0, 16: 400.0}
    steep_then_flat = {1: 60.0, 2: 70.0, 4: 150.0, 8: 190.0, 16: 200.0}
    cost = calibrated(flat_then_steep)
    assert cost.extra_verify(3) < 0.006 < 0.03 < cost.extra_verify(12)
    assert 5 <= draft_length(flat_then_steep, 0.9) <= 8
    assert draft_length(steep_then_flat, 0.9) == 16


def test_a_known_draft_is_kept_only_where_its_whole_length_pays() -> None:
    """Lookup drafts are known whole before verification. On the Q4 curve one extra token doubles
    the pass, so a short or doubtful copy is not worth verifying, while a long sure one is: the plan
    weighs the two-token jump against every token after it (``take`` alone never would)."""
    cost = calibrated(Q4_CURVE)
    cal = Calibration()
    rule = CostStopRule(cost, cal, value=1 / 0.0277)
    assert not rule.take(0, 0.95)  # token by token, even a sure token cannot pay for the jump
    assert rule.plan([0.95] * 16) >= 12  # a long sure copy pays: about 2x at this curve
    assert rule.plan([0.95]) == 0  # one sure token cannot pay for a pass twice as long
    assert rule.plan([0.6] * 16) == 0  # a doubtful one is not worth verifying at all
    # On the F16 curve (a cheap batch) a shorter copy already pays.
    f16 = CostStopRule(calibrated(F16_CURVE), Calibration(), value=1 / 0.060)
    assert 0 < f16.plan([0.95] * 3) <= 3


def test_a_draft_of_known_chances_is_planned_as_one_of_known_confidences() -> None:
    """``plan`` prices a draft from the drafter's confidences through its calibration; ``plan_lookup``
    from chances already known (a lookup beside the draft model, on its own record): the same plan.
    The rule before (``lookup_planned=False``) kept such a draft whole."""
    cost = calibrated(Q4_CURVE)
    cal = Calibration()
    rule = CostStopRule(cost, cal, value=1 / 0.0277)
    for conf in (0.6, 0.9, 0.95):
        chances = [cal.q_at(conf, k) for k in range(16)]
        assert rule.plan([conf] * 16) == rule.plan_lookup(chances)
    assert rule.plan_lookup([0.95] * 16) >= 12
    assert rule.plan_lookup([0.5] * 16) == 0
    assert rule.plan_lookup([]) == 0
    before = CostStopRule(cost, cal, value=1 / 0.0277, lookup_planned=False)
    assert before.plan_lookup([0.5] * 6) == 6


def test_the_plan_follows_what_verification_accepted() -> None:
    """A match size whose drafts keep failing is no longer drafted: its bin learns the acceptance."""
    cost = calibrated(Q4_CURVE)
    cal = Calibration()
    rule = CostStopRule(cost, cal, value=1 / 0.0277)
    assert rule.plan([0.9] * 16) > 0
    for _ in range(20):
        cal.observe([0.9] * 16, 1)  # the first token accepted, the second rejected, every time
    assert rule.plan([0.9] * 16) == 0


def test_later_positions_are_priced_by_their_own_offset_when_a_conversation_learns_one() -> None:
    """``adaptive-later``: a conversation whose later draft tokens were accepted far less often than their
    first prices them lower, so the same confident tokens draft a shorter run; its first token is priced
    as before."""
    from localchat.engine.calibration import ConversationCalibration

    curve = {1: 60.0, 2: 70.0, 4: 72.0, 8: 76.0, 16: 400.0}
    cost = calibrated(curve, drafter_ms=5.0)

    def run(cal: Calibration) -> int:
        rule = CostStopRule(cost, cal, value=1 / (curve[1] / 1000))
        n = 0
        while n < 16 and rule.take(n, 0.9) and rule.look_further(n, 0.005):
            n += 1
        return n

    alike = ConversationCalibration(cost.calibration_for("draft"))
    later = ConversationCalibration(cost.calibration_for("draft"), later=True)
    for cal in (alike, later):
        for _ in range(40):  # the first token accepted, the second rejected
            cal.observe([0.9, 0.9], 1)
    assert abs(later.q_at(0.9, 0) - alike.q_at(0.9, 0)) < 1e-3
    assert later.q_at(0.9, 1) < alike.q_at(0.9, 1) - 0.1
    assert run(later) < run(alike)
