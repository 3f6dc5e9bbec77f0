"""Whether a drafter is predicted to pay here, before it is downloaded (catalog/drafter_payoff.py).

``CPU_2_CORES`` is the real calibration of the Q4_K_M 1.5B starter with its 0.5B drafter on this
project's 2-core test machine (as in test_starter_choice.py). There the fixed drafter ran 0.63x plain
with the Q4_K_M starter and 1.37x with the same target in F16 (issue 30): the prediction must put
the first below plain and the second above it.
"""

from __future__ import annotations

import pytest

from localchat.catalog import drafter_payoff
from localchat.catalog.drafter_payoff import (
    PRIOR_ACCEPTANCE,
    drafter_cost,
    outlook_for_entry,
    predict_drafter,
)
from localchat.catalog.drafters import load_catalog
from localchat.catalog.starter_choice import MachineMeasure

STARTER_BYTES = 1_117_320_768
F16_BYTES = 3_560_416_320
DRAFTER_BYTES = 491_400_064
DRAFTER_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
CPU_2_CORES = MachineMeasure(STARTER_BYTES, {1: 0.0574, 2: 0.0907, 4: 0.1082, 8: 0.1875, 16: 0.2169}, 0.0332,
                             drafter_file=DRAFTER_FILE, measured_on="Qwen2.5-Coder 1.5B Instruct",
                             drafter_bytes=DRAFTER_BYTES)
FAST_GPU = MachineMeasure(STARTER_BYTES, {1: 0.006, 2: 0.0062, 4: 0.0065, 8: 0.007, 16: 0.008}, 0.003,
                          drafter_file=DRAFTER_FILE, backend="CUDA", drafter_bytes=DRAFTER_BYTES)


def predict(measured: MachineMeasure, target_bytes: int) -> drafter_payoff.DrafterOutlook:
    return predict_drafter(measured, target_bytes, DRAFTER_BYTES, drafter="0.5B", target="1.5B",
                           drafter_file=DRAFTER_FILE)


def test_on_a_small_cpu_the_drafter_does_not_pay_for_the_quantized_starter_but_does_for_f16() -> None:
    starter = predict(CPU_2_CORES, STARTER_BYTES)
    assert starter.speedup == pytest.approx(0.79, abs=0.01) and not starter.pays
    f16 = predict(CPU_2_CORES, F16_BYTES)
    assert f16.speedup > drafter_payoff.PAYS_FROM and f16.pays
    assert f16.speedup > starter.speedup


def test_on_a_gpu_the_drafter_pays_even_for_the_small_starter() -> None:
    out = predict(FAST_GPU, STARTER_BYTES)
    assert out.pays and out.speedup == pytest.approx(1.11, abs=0.01)


def test_the_sentence_says_the_figure_and_what_happens() -> None:
    lost = predict_drafter(CPU_2_CORES, STARTER_BYTES, DRAFTER_BYTES, drafter="Qwen 0.5B",
                           target="Qwen 1.5B Q4_K_M", drafter_file=DRAFTER_FILE)
    assert lost.sentence == ("On this computer the drafter Qwen 0.5B is predicted to run 0.8x plain speed "
                             "with Qwen 1.5B Q4_K_M: it costs more than it saves, so it is not downloaded.")
    assert lost.sentence_here.endswith("the engine measures the pair when it loads and drafts with it only "
                                       "if it pays.")
    kept = predict(CPU_2_CORES, F16_BYTES)
    assert kept.sentence_here.endswith("1.05x as fast as plain decoding.")
    assert "is predicted to make 1.5B 1.05x as fast as plain decoding, so it is downloaded" in kept.sentence


def test_the_measured_drafters_own_cost_is_used_for_its_own_file() -> None:
    assert drafter_cost(CPU_2_CORES, DRAFTER_BYTES, DRAFTER_FILE.upper()) == 0.0332


def test_another_drafters_cost_follows_the_line_through_the_two_measured_points() -> None:
    # At the measured drafter's size the line gives its measured cost, at the target's its one-token pass.
    assert drafter_cost(CPU_2_CORES, DRAFTER_BYTES, "other.gguf") == pytest.approx(0.0332)
    assert drafter_cost(CPU_2_CORES, STARTER_BYTES, "other.gguf") == pytest.approx(0.0574)
    # A 135M drafter keeps the fixed cost of a pass: more than its size share of the target's pass.
    tiny = drafter_cost(CPU_2_CORES, 100_000_000, "other.gguf")
    assert tiny is not None and 0.0574 * 100_000_000 / STARTER_BYTES < tiny < 0.0332


def test_without_the_drafters_size_its_cost_is_the_size_share_of_a_target_pass() -> None:
    old = MachineMeasure(STARTER_BYTES, CPU_2_CORES.verify_s, 0.0332, drafter_file=DRAFTER_FILE)
    assert drafter_cost(old, 200_000_000, "other.gguf") == pytest.approx(0.0574 * 200_000_000 / STARTER_BYTES)


def test_a_lower_acceptance_predicts_less() -> None:
    low = predict_drafter(CPU_2_CORES, F16_BYTES, DRAFTER_BYTES, drafter="d", target="t",
                          drafter_file=DRAFTER_FILE, acceptance=0.4)
    assert low.speedup < predict(CPU_2_CORES, F16_BYTES).speedup and not low.pays
    assert 0.5 < PRIOR_ACCEPTANCE < 0.83  # conservative: below what the Qwen pairs measure on code


def test_catalog_entries_nothing_measured_means_no_prediction() -> None:
    catalog = load_catalog()
    starter = catalog.starter
    assert starter is not None
    assert outlook_for_entry(starter, None, None) is None  # first run: download as before
    out = outlook_for_entry(starter, None, CPU_2_CORES)
    assert out is not None and not out.pays and "Qwen2.5-Coder 1.5B Instruct · Q4_K_M" in out.sentence
    seven = catalog.get("qwen2.5-coder-7b-instruct")
    big = outlook_for_entry(seven, None, CPU_2_CORES)
    assert big is not None and big.pays  # the same drafter pays for a target four times the size
    ngram_only = next(e for e in catalog.entries if e.model_drafter is None)
    assert outlook_for_entry(ngram_only, None, CPU_2_CORES) is None
    assert outlook_for_entry(starter, "Q9_Z", CPU_2_CORES) is None


def test_sizes_must_be_known() -> None:
    with pytest.raises(ValueError):
        predict_drafter(CPU_2_CORES, 0, DRAFTER_BYTES, drafter="d", target="t")
