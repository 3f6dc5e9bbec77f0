"""engine.stats: the figures every screen shows (acceptance length and rate, per position, combine)."""

from __future__ import annotations

import pytest

from localchat.engine.stats import GenerationStats, StatsRecorder, combine


def test_recorder_counts_per_position_and_derives_the_figures() -> None:
    rec = StatsRecorder(generated_tokens=9, generation_seconds=3.0, verify_passes=4, draft_seconds=0.75)
    rec.record_draft(4, 4)
    rec.record_draft(4, 1)
    rec.record_draft(2, 0)
    s = rec.snapshot()
    assert (s.drafted, s.accepted) == (10, 5)
    assert s.drafted_per_position == (3, 3, 2, 2) and s.accepted_per_position == (2, 1, 1, 1)
    assert s.acceptance_rate == pytest.approx(0.5)
    assert s.acceptance_length == pytest.approx(1 + 5 / 4)  # tokens per verification pass
    assert s.acceptance_rate_by_position == pytest.approx((2 / 3, 1 / 3, 0.5, 0.5))
    assert s.tokens_per_s == pytest.approx(3.0) and s.draft_share == pytest.approx(0.25)
    assert "acceptance length 2.25" in s.summary() and "acceptance rate 0.50" in s.summary()


def test_plain_decoding_has_no_acceptance_figures_and_no_division_by_zero() -> None:
    s = GenerationStats()
    assert (s.tokens_per_s, s.acceptance_length, s.acceptance_rate, s.draft_share) == (0.0, 0.0, 0.0, 0.0)
    assert "acceptance" not in GenerationStats(generated_tokens=3, generation_seconds=1.0).summary()


def test_combine_sums_counts_and_pads_positions() -> None:
    a = GenerationStats(generated_tokens=10, generation_seconds=2.0, verify_passes=5, drafted=6, accepted=3,
                        drafted_per_position=(3, 3), accepted_per_position=(2, 1))
    b = GenerationStats(generated_tokens=6, generation_seconds=2.0, verify_passes=6)
    c = combine([a, b])
    assert c.generated_tokens == 16 and c.tokens_per_s == pytest.approx(4.0)
    assert c.drafted_per_position == (3, 3) and c.acceptance_rate == pytest.approx(0.5)
    assert combine([]).generated_tokens == 0
