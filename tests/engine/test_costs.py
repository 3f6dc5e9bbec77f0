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


# Verification ms by batch of a Q8_0 target with 2 threads (docs/BENCHMARKS.md): llama.cpp's quantized
# kernels work on blocks of rows, so 8 tokens cost less than 5, 6 or 7, and 12 less than 9 to 11.
Q8_0_BLOCKS = {1: 51.0, 2: 122.0, 3: 150.0, 4: 167.0, 5: 238.0, 6: 268.0, 7: 291.0, 8: 170.0, 9: 244.0,
               10: 271.0, 11: 296.0, 12: 213.0, 16: 262.0}


def measured(curve: dict[int, float], passes: int = 3) -> CostModel:
    cost = CostModel()
    for _ in range(passes):
        for size, ms in curve.items():
            cost.observe_verify(size, ms / 1000)
    return cost


def test_a_batch_is_padded_to_a_larger_size_this_machine_runs_faster() -> None:
    cost = measured(Q8_0_BLOCKS)
    assert [cost.padded(n) for n in range(1, 13)] == [1, 2, 3, 4, 8, 8, 8, 8, 12, 12, 12, 12]
    assert cost.t_verify(6) == pytest.approx(0.170)  # priced as the loop runs it
    assert cost.padded(6, limit=7) == 6  # no room for the padding (the context's end, the batch size)
    assert cost.padded(13) == 13  # predicted between 12 and 16 (225 ms): 16 (262 ms) is no faster
    smooth = measured({1: 60.0, 2: 94.0, 4: 111.0, 8: 159.0, 16: 219.0})
    assert all(smooth.padded(n) == n for n in range(1, 17))


def test_a_size_measured_once_is_no_reason_to_pad() -> None:
    cost = measured({k: v for k, v in Q8_0_BLOCKS.items() if k != 8})
    cost.observe_verify(8, 0.170)  # once: a single pass can be luck
    assert cost.padded(5) == 5
    assert cost.t_verify(5) == pytest.approx(0.238)


def test_a_padded_pass_is_recorded_at_the_size_run_and_the_size_itself_is_measured_again() -> None:
    from localchat.engine.costs import PAD_RECHECK

    cost = measured(Q8_0_BLOCKS)
    runs = []
    for _ in range(2 * PAD_RECHECK):
        run = cost.verify_batch(5, 512)
        runs.append(run)
        cost.observe_verify(5, Q8_0_BLOCKS[run] / 1000)
    assert runs.count(5) == 2 and runs[PAD_RECHECK - 1] == 5 and runs[-1] == 5
    assert cost.verify.counts[8] == 3 + 2 * PAD_RECHECK - 2
    assert cost.verify.counts[5] == 3 + 2
    # Where the size turns out as cheap as the padded one (it was measured through a busy moment),
    # its own passes end the padding.
    for _ in range(9):
        cost.observe_verify(5, 0.160)
    assert cost.padded(5) == 5
