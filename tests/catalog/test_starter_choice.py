"""The starter for this computer, predicted from what the engine measured (catalog/starter_choice.py).

The measurements below are real calibrations: ``CPU_2_CORES`` is the Q4_K_M 1.5B starter with its
0.5B drafter on this project's 2-core test machine (docs/BENCHMARKS.md); ``FAST_GPU`` is the shape
of a GPU's (passes of up to 16 tokens cost about what one does, the drafter a few milliseconds).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localchat.catalog import starter_choice
from localchat.catalog.drafters import load_catalog, parse_catalog, shipped_catalog_text
from localchat.catalog.sizes import Fit
from localchat.catalog.starter_choice import MachineMeasure

GB = 10**9
STARTER_BYTES = 1_117_320_768
CPU_2_CORES = MachineMeasure(STARTER_BYTES, {1: 0.0574, 2: 0.0907, 4: 0.1082, 8: 0.1875, 16: 0.2169}, 0.0332,
                             measured_on="Qwen2.5-Coder 1.5B Instruct")
FAST_GPU = MachineMeasure(STARTER_BYTES, {1: 0.006, 2: 0.0062, 4: 0.0065, 8: 0.007, 16: 0.008}, 0.003,
                          backend="CUDA", measured_on="Qwen2.5-Coder 1.5B Instruct",
                          accelerator_bytes=80 * GB)


def test_the_candidates_are_the_starter_and_its_drafters_other_targets_smallest_first() -> None:
    ids = [e.id for e in starter_choice.candidates(load_catalog())]
    assert ids[0] == "qwen2.5-coder-1.5b-instruct"
    bigger = ["qwen2.5-coder-7b-instruct", "qwen2.5-coder-14b-instruct", "qwen2.5-coder-32b-instruct"]
    assert ids[1:] == bigger


def test_a_slow_cpu_keeps_the_small_starter_and_says_what_a_bigger_one_would_do() -> None:
    choice = starter_choice.choose(load_catalog(), CPU_2_CORES, 24 * GB)
    assert choice is not None
    assert choice.chosen.entry.id == "qwen2.5-coder-1.5b-instruct"
    assert choice.chosen.plain_tps == pytest.approx(1 / 0.0574)
    # Cheap next to its drafter on this CPU: the draft model cannot pay, lookup alone may.
    assert choice.chosen.speedup < 1.0
    assert choice.chosen.chat_tps == pytest.approx(choice.chosen.plain_tps)
    assert "speculation pays only where the reply repeats" in choice.sentence
    seven = choice.candidates[1]
    assert seven.plain_tps < starter_choice.COMFORTABLE_TPS
    assert f"Qwen2.5-Coder 7B Instruct would write about {seven.chat_tps:.0f} tokens/s" in choice.sentence


def test_a_fast_gpu_gets_the_largest_target_that_is_fast_enough_and_fits() -> None:
    choice = starter_choice.choose(load_catalog(), FAST_GPU, 128 * GB)
    assert choice is not None
    assert choice.chosen.entry.id == "qwen2.5-coder-32b-instruct"
    assert choice.chosen.chat_tps >= starter_choice.COMFORTABLE_TPS
    assert choice.chosen.speedup > 2.0 and "speculation 3." in choice.sentence


def test_the_prediction_tries_fixed_lengths_up_to_its_own_longest_not_the_engines() -> None:
    """On a GPU's flat curve the 32B's best fixed length is the longest the prediction tries, which is
    not the engine's bound on one draft (DRAFT_TOKENS_MAX): two constants, two meanings."""
    from localchat.settings.options import DRAFT_TOKENS_MAX

    entries = starter_choice.candidates(load_catalog())
    preds = {e.id: starter_choice.predict(e, FAST_GPU, 128 * GB) for e in entries}
    assert preds["qwen2.5-coder-32b-instruct"].draft_length == starter_choice.LONGEST_PREDICTED_DRAFT
    assert starter_choice.LONGEST_PREDICTED_DRAFT < DRAFT_TOKENS_MAX
    assert all(p.draft_length <= starter_choice.LONGEST_PREDICTED_DRAFT for p in preds.values())


def test_on_a_gpu_the_gpus_memory_decides_what_fits_not_the_ram() -> None:
    small_gpu = MachineMeasure(STARTER_BYTES, FAST_GPU.verify_s, FAST_GPU.draft_token_s, backend="CUDA",
                               accelerator_bytes=12 * GB)
    choice = starter_choice.choose(load_catalog(), small_gpu, 128 * GB)
    assert choice is not None
    assert choice.chosen.entry.id == "qwen2.5-coder-7b-instruct"
    assert {p.entry.id: p.fit for p in choice.candidates}["qwen2.5-coder-32b-instruct"] is Fit.NO


def test_where_nothing_is_fast_enough_the_smallest_is_chosen() -> None:
    slow = MachineMeasure(STARTER_BYTES, {1: 0.4, 2: 0.7, 4: 1.2}, 0.2)
    choice = starter_choice.choose(load_catalog(), slow, 24 * GB)
    assert choice is not None and choice.chosen.entry.id == "qwen2.5-coder-1.5b-instruct"
    assert choice.chosen.chat_tps < starter_choice.COMFORTABLE_TPS


def test_a_bigger_target_gains_more_from_the_same_drafter() -> None:
    choice = starter_choice.choose(load_catalog(), CPU_2_CORES, 256 * GB)
    assert choice is not None
    gains = [p.speedup for p in choice.candidates]
    assert gains == sorted(gains) and gains[-1] > gains[0]
    plain = [p.plain_tps for p in choice.candidates]
    assert plain == sorted(plain, reverse=True)


def test_pass_times_between_and_beyond_the_measured_sizes() -> None:
    m = MachineMeasure(1000, {1: 0.010, 2: 0.020, 4: 0.024}, None)
    assert m.t_verify(3) == pytest.approx(0.022)
    assert m.t_verify(6) == pytest.approx(0.028)  # along the last two sizes
    assert m.t_verify(2, scale=3.0) == pytest.approx(0.060)
    only_one = MachineMeasure(1000, {1: 0.010}, None)
    assert only_one.t_verify(4) == pytest.approx(0.040)


def test_without_a_drafter_cost_there_is_no_speed_up() -> None:
    m = MachineMeasure(STARTER_BYTES, CPU_2_CORES.verify_s, None)
    choice = starter_choice.choose(load_catalog(), m, 24 * GB)
    assert choice is not None and all(p.speedup == 0.0 for p in choice.candidates)


@pytest.mark.parametrize("verify", [{}, {2: 0.1}, {1: 0.0}, {1: -1.0}])
def test_a_measurement_without_a_one_token_pass_is_refused(verify: dict[int, float]) -> None:
    with pytest.raises(ValueError):
        MachineMeasure(STARTER_BYTES, verify, 0.01)


def test_a_catalog_without_a_starter_gives_no_choice() -> None:
    text = shipped_catalog_text().replace("starter = true\n", "")
    assert starter_choice.choose(parse_catalog(text, "test"), CPU_2_CORES, 24 * GB) is None


def test_the_measurement_is_kept_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "data" / "machine-measure.json"
    starter_choice.save(path, FAST_GPU)
    assert starter_choice.load(path) == FAST_GPU
    assert not list(path.parent.glob("*.tmp"))


@pytest.mark.parametrize(
    "content",
    ["{not json", "[]", '{"format": "other"}', '{"format": "localchat-machine-measure/1"}', "\udcff"],
)
def test_a_damaged_or_foreign_file_is_ignored(tmp_path: Path, content: str) -> None:
    path = tmp_path / "machine-measure.json"
    path.write_bytes(content.encode("utf-8", "surrogateescape"))
    assert starter_choice.load(path) is None


def test_a_measurement_from_another_machine_is_not_used(tmp_path: Path) -> None:
    path = tmp_path / "machine-measure.json"
    starter_choice.save(path, CPU_2_CORES)
    data = json.loads(path.read_text())
    data["machine"] = "riscv64 64 cpus"
    path.write_text(json.dumps(data))
    assert starter_choice.load(path) is None
    assert starter_choice.load(tmp_path / "missing.json") is None


def test_a_folder_that_cannot_be_written_loses_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    starter_choice.save(blocker / "machine-measure.json", CPU_2_CORES)  # a log line, no exception
    assert blocker.read_text() == "x"
