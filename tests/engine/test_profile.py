"""Speculation profiles without models: the file format, what is refused, and the calibration checks."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from localchat.engine import profile
from localchat.engine.costs import CostModel, repeated
from localchat.engine.profile import Measured, ProfileKey

KEY = ProfileKey("100:aa", "50:bb", "CPU", 2, 0, "local", "0.3.36 CPU : AVX2 = 1 |")
MACHINE = "machine-one"
BAD_BINS = {"accepted": [1], "judged": [1]}


def measured() -> Measured:
    hits = [0.0] * 20
    seen = [0.0] * 20
    hits[19], seen[19] = 180.0, 200.0
    verify = {1: (0.060, 12), 2: (0.094, 5), 4: (0.111, 3), 8: (0.159, 1), 16: (0.219, 1)}
    return Measured(verify, 0.016, 0.0155, hits, seen)


def saved(tmp_path: Path) -> Path:
    path = tmp_path / KEY.file_name()
    profile.save(path, KEY, MACHINE, measured())
    return path


def test_a_saved_profile_loads_back_and_starts_the_cost_model(tmp_path: Path) -> None:
    path = saved(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left behind
    back = profile.load(path, KEY, MACHINE)
    assert back is not None
    assert back.verify == measured().verify and back.draft_token_s == pytest.approx(0.016)
    cost = CostModel()
    profile.apply(back, cost, "drafter")
    assert cost.calibrated and cost.ready()
    assert cost.t_verify(1) == pytest.approx(0.060) and cost.t_verify(16) == pytest.approx(0.219)
    assert cost.draft_token_s["drafter"] == pytest.approx(0.016)
    assert cost.calibration_for("drafter").q(0.99) == pytest.approx(0.9, abs=0.01)
    # Saved evidence is capped: this process's own passes soon outweigh it.
    assert cost.verify.counts[1] == 3 and cost.calibration_for("drafter").seen(0.99) == pytest.approx(50)


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda obj: "{ not json", "ignoring the speculation profile"),
        (lambda obj: {**obj, "machine": "machine-two"}, "another machine"),
        (lambda obj: {**obj, "format": 99}, "format 99"),
        (lambda obj: {**obj, "key": {**obj["key"], "threads": 8}}, "other model files or settings"),
        (lambda obj: {**obj, "measured": {**obj["measured"], "verify_s": {"1": [-1, 3]}}}, "verification"),
        (lambda obj: {**obj, "measured": {**obj["measured"], "calibration": BAD_BINS}}, "calibration bins"),
        (lambda obj: [1, 2, 3], "not a JSON object"),
        (lambda obj: {**obj, "measured": {**obj["measured"], "lookup_alone": "yes"}}, "choice of drafter"),
    ],
    ids=["bad-json", "other-machine", "other-format", "other-settings", "bad-time", "bad-bins", "not-object",
         "bad-choice"],
)
def test_a_corrupt_or_foreign_profile_is_ignored_with_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: object, words: str
) -> None:
    path = saved(tmp_path)
    obj = json.loads(path.read_text())
    bad = damage(obj)  # type: ignore[operator]
    path.write_text(bad if isinstance(bad, str) else json.dumps(bad))
    caplog.set_level(logging.INFO, logger="localchat.engine.profile")
    cost = CostModel()
    result = profile.load(path, KEY, MACHINE)
    if result is not None:  # parsed, but does not fit the cost model
        with pytest.raises(ValueError, match=words):
            profile.apply(result, cost, "drafter")
        assert not cost.calibrated and not cost.verify.points  # untouched
        return
    lines = [r for r in caplog.records if r.name == "localchat.engine.profile"]
    assert len(lines) == 1 and words in lines[0].getMessage(), [r.getMessage() for r in lines]


def test_a_missing_profile_is_no_news(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="localchat.engine.profile")
    assert profile.load(tmp_path / "none.json", KEY, MACHINE) is None
    assert not caplog.records


def test_the_profile_key_is_the_file_contents_not_the_path(tmp_path: Path) -> None:
    a = tmp_path / "a.gguf"
    data = bytearray(b"GGUF" + bytes(range(256)) * 20000)  # 5 MB: head and tail hashed apart
    a.write_bytes(data)
    b = tmp_path / "b.gguf"
    b.write_bytes(data)
    assert profile.file_fingerprint(a) == profile.file_fingerprint(b)
    data[-1] ^= 0xFF  # one byte of the last tensor
    b.write_bytes(data)
    assert profile.file_fingerprint(a) != profile.file_fingerprint(b)
    small = tmp_path / "small.gguf"
    small.write_bytes(b"GGUF1234")
    assert profile.file_fingerprint(small).startswith("8:")


def test_the_machine_id_is_stable() -> None:
    assert profile.machine_id() == profile.machine_id() and len(profile.machine_id()) == 16


def test_an_undisturbed_curve_is_plausible_a_busy_one_is_not() -> None:
    assert profile.plausible({1: 0.060, 2: 0.094, 4: 0.111, 8: 0.159, 16: 0.219})
    assert not profile.plausible({1: 0.060, 2: 0.094, 4: 0.300, 8: 0.159, 16: 0.219})  # 8 far cheaper than 4
    assert not profile.plausible({1: 0.010, 2: 0.094, 4: 0.111, 8: 0.159, 16: 0.219})  # 2 dearer than 2 x 1


def test_a_curve_with_a_busy_machines_shape_counts_where_two_rounds_repeat_it() -> None:
    """A Q8_0 target on 2 threads (measured here, ms): a batch of two costs three single tokens, which
    ``plausible`` takes for a busy moment; it was declined at every load. Two rounds that agree within
    a tenth, size by size, are the machine's own curve; rounds that disagree, or one with a size
    missing (slowed), are not."""
    q8 = {1: 0.039, 2: 0.121, 4: 0.169, 8: 0.163, 16: 0.251}
    assert not profile.plausible(q8)
    again = {1: 0.041, 2: 0.117, 4: 0.159, 8: 0.160, 16: 0.244}
    assert repeated([q8, again]) and repeated([{1: 0.05, 2: 0.3, 4: 0.1}, q8, again])
    assert not repeated([q8]) and not repeated([])
    busy = {**again, 4: 0.169 * 1.3}
    assert not repeated([q8, busy])
    assert not repeated([q8, {b: t for b, t in again.items() if b != 8}])
    assert repeated([q8, busy], tolerance=0.35)


class _Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


class _TimedContext:
    """A context whose decodes take ``curve[batch]`` seconds of a scripted clock (no model)."""

    n_ctx = n_batch = 512

    def __init__(self, clock: _Clock, curve: dict[int, float]) -> None:
        self.clock, self.curve = clock, curve
        self.model = self

    def tokenize(self, text: str, add_special: bool = False) -> list[int]:
        return list(range(200))

    def decode(self, batch: list[int], logits_for: str = "last") -> int:
        self.clock.now += self.curve.get(len(batch), 0.5)  # the warm-up's 24 tokens
        return len(batch)

    def logits(self, row: int) -> np.ndarray:
        return np.arange(8, dtype=np.float32)

    def truncate(self, n_keep: int) -> None:
        pass

    def clear(self) -> None:
        pass


# A Q8_0 target on 1 thread (measured here, seconds): a batch of two costs 3.5 single tokens, the shape
# ``plausible`` doubts, and a round of the calibration's passes takes 1.5 s of its 2.5 s budget.
Q8_1T = {1: 0.064, 2: 0.233, 4: 0.331, 8: 0.337, 16: 0.518}


def test_a_curve_that_must_repeat_gets_the_time_for_its_second_round(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the budget alone the second round was cut short, so the curve never repeated and was
    declined at every load as a busy machine; the round it needs is now given its time."""
    clock = _Clock()
    monkeypatch.setattr(profile.time, "perf_counter", clock)
    cost = CostModel()
    report = profile.calibrate(_TimedContext(clock, Q8_1T), _TimedContext(clock, {1: 0.02}), cost, "drafter")
    assert report is not None and report.disturbed == ""
    assert cost.calibrated and cost.t_verify(2) == pytest.approx(0.233)
    one_round = sum(Q8_1T[b] for b in profile.CALIBRATION_SIZES)
    assert report.seconds - report.warmup_s == pytest.approx(2 * one_round + profile.DRAFTER_STEPS * 0.02)


def test_a_round_that_cannot_repeat_in_twice_the_budget_is_not_begun(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three times slower, a round takes 4.5 s: a second one cannot end within twice the budget, so
    the calibration stops after the first (declined, as its curve is doubted) instead of timing a
    round that is cut short."""
    clock = _Clock()
    monkeypatch.setattr(profile.time, "perf_counter", clock)
    slow = {b: 3 * t for b, t in Q8_1T.items()}
    cost = CostModel()
    report = profile.calibrate(_TimedContext(clock, slow), _TimedContext(clock, {1: 0.02}), cost, "drafter")
    assert report is not None and "contradict" in report.disturbed and not cost.calibrated
    assert report.seconds - report.warmup_s == pytest.approx(
        sum(slow[b] for b in profile.CALIBRATION_SIZES) + profile.DRAFTER_STEPS * 0.02)


def test_a_process_that_was_not_calibrated_keeps_what_it_measured_if_it_is_enough() -> None:
    cost = CostModel()
    assert not profile.measured_enough(cost, "drafter")
    for _ in range(3):
        for size in (1, 3, 5):
            cost.observe_verify(size, 0.05 + 0.01 * size)
    cost.observe_draft("drafter", 4, 0.06)
    assert profile.measured_enough(cost, "drafter")


def test_lookups_calibration_is_kept_with_the_pair(tmp_path: Path) -> None:
    """Where adaptive speculation drafted by lookup alone, what the target accepted of each match
    length is kept too, so the next process does not draft short matches the pair rejects."""
    cost = CostModel()
    profile.apply(measured(), cost, "drafter")
    lookup = cost.calibration_for(profile.LOOKUP)
    for _ in range(30):
        lookup.observe([0.575], 0)  # three-token matches: rejected
        lookup.observe([0.95, 0.95], 2)  # eight-token matches: accepted
    path = tmp_path / KEY.file_name()
    profile.save(path, KEY, MACHINE, profile.measured_from(cost, "drafter", 0.0155))
    assert "lookup_calibration" in json.loads(path.read_text())["measured"]
    back = profile.load(path, KEY, MACHINE)
    assert back is not None
    fresh = CostModel()
    profile.apply(back, fresh, "drafter")
    assert fresh.calibration_for(profile.LOOKUP).q(0.575) < 0.1
    assert fresh.calibration_for(profile.LOOKUP).q(0.95) > 0.95
    # A profile without lookup's evidence (an earlier version's, or a pair that never drafted by
    # lookup alone) leaves lookup at its priors.
    plain = CostModel()
    profile.apply(measured(), plain, "drafter")
    assert profile.LOOKUP not in plain.calibration


def test_the_choice_of_drafter_is_kept_and_a_later_process_goes_on_from_it(tmp_path: Path) -> None:
    """A process that gave way to lookup alone keeps that choice in its profile: the next one starts
    from it, so the draft model comes back only clearly over the line (``DRAFT_MODEL_RETURN``), as it
    would have in the first process. A saved profile's best case is higher than the first process's
    (its drafter's surest tokens priced at the acceptance learnt); chosen afresh from it, every reply
    of the next process took the draft model where the first had given way."""
    from localchat.engine.adaptive import DRAFT_MODEL_MIN_BEST, DrafterChoice

    cost = CostModel()
    profile.apply(measured(), cost, "drafter")
    assert cost.lookup_alone is None  # a profile from before the choice was kept: none
    choice = DrafterChoice()
    assert choice.choose_lookup(DRAFT_MODEL_MIN_BEST - 0.1, cost) and cost.lookup_alone is True
    path = tmp_path / KEY.file_name()
    profile.save(path, KEY, MACHINE, profile.measured_from(cost, "drafter", 0.0155))
    assert json.loads(path.read_text())["measured"]["lookup_alone"] is True
    back = profile.load(path, KEY, MACHINE)
    assert back is not None and back.lookup_alone is True
    later = CostModel()
    profile.apply(back, later, "drafter")
    over = DRAFT_MODEL_MIN_BEST + 0.1  # over the line, under the way back
    assert DrafterChoice().choose_lookup(over, later)  # goes on with lookup alone
    assert not DrafterChoice().choose_lookup(over)  # chosen afresh: the draft model
    # The choice restored is where this process starts, not a verdict it keeps to.
    assert not DrafterChoice().choose_lookup(DRAFT_MODEL_MIN_BEST * 2, later) and later.lookup_alone is False
