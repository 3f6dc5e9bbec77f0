"""The acceptance calibration: per confidence bin, per pair and per conversation (a log-odds shift)."""

from __future__ import annotations

import random

import pytest

from localchat.engine.calibration import Calibration, ConversationCalibration


def test_calibration_starts_from_the_confidence_and_learns_what_is_accepted() -> None:
    cal = Calibration()
    assert cal.q(0.9) == pytest.approx(0.9, abs=0.03)
    rng = random.Random(1)
    for _ in range(400):  # an overconfident drafter: 0.9 sure, right half the time
        cal.observe([0.92], 1 if rng.random() < 0.5 else 0)
    assert 0.4 < cal.q(0.92) < 0.6
    assert cal.q(0.3) == pytest.approx(0.3, abs=0.03)  # other bins untouched


def test_calibration_counts_tokens_up_to_the_first_rejection_only() -> None:
    cal = Calibration(prior_weight=0.0001)
    cal.observe([0.97, 0.55, 0.12], accepted=1)  # 0.97 accepted, 0.55 rejected, 0.12 never judged
    assert cal.q(0.97) == pytest.approx(1.0, abs=1e-3)
    assert cal.q(0.55) == pytest.approx(0.0, abs=1e-3)
    assert cal.q(0.12) == pytest.approx(0.12)


def test_a_conversation_shifts_the_pairs_calibration_from_every_verdict() -> None:
    """After an hour of code the pair's mid-confidence bins say 0.5; in a chat the same tokens are
    accepted 85% of the time. One offset learned from every verdict moves every bin, also the ones
    this conversation has not seen yet; the pair's bins keep what code showed."""
    pair = Calibration()
    rng = random.Random(5)
    for _ in range(400):
        c = rng.uniform(0.4, 0.8)
        pair.observe_one(c, 1.0 if rng.random() < 0.5 else 0.0)
    assert 0.4 < pair.q(0.62) < 0.6
    chat = ConversationCalibration(pair)
    for _ in range(30):
        c = rng.choice([0.42, 0.47, 0.72, 0.77])  # never the 0.60-0.65 bin
        chat.observe_one(c, 1.0 if rng.random() < 0.85 else 0.0)
    assert chat.shift.offset > 0.5
    assert chat.q(0.62) > pair.q(0.62) + 0.12 and chat.seen(0.62) == 0
    assert 0.4 < pair.q(0.62) < 0.6  # the conversation's evidence is its own
    code = ConversationCalibration(pair)  # a conversation like the pair's history stays put
    for _ in range(30):
        c = rng.uniform(0.4, 0.8)
        code.observe_one(c, 1.0 if rng.random() < 0.5 else 0.0)
    assert abs(code.shift.offset) < 0.6


def test_later_draft_positions_learn_an_offset_of_their_own() -> None:
    """A drafter whose first token is accepted as its confidence says, and whose later tokens at the same
    confidence only half as often: the later ones are priced lower than the first;
    without ``later`` every position is priced alike."""
    pair = Calibration()
    rng = random.Random(7)
    cal = ConversationCalibration(pair, later=True)
    alike = ConversationCalibration(pair)
    for _ in range(60):
        confidence = [0.85, 0.85, 0.85]
        accepted = 0
        for i, c in enumerate(confidence):  # the first at 0.85, the later ones at 0.45
            if rng.random() < (c if i == 0 else 0.45):
                accepted += 1
            else:
                break
        cal.observe(confidence, accepted)
        alike.observe(confidence, accepted)
    assert cal.later is not None and cal.later.offset < -0.3
    assert cal.q_at(0.85, 0) == pytest.approx(cal.q(0.85))
    assert cal.q_at(0.85, 2) < cal.q_at(0.85, 0) - 0.08
    assert alike.q_at(0.85, 2) == alike.q(0.85) and alike.later is None
