"""Run-length marking of accepted draft text: round trips and joins."""

from __future__ import annotations

import random

from localchat.engine.textruns import concat_runs, flags_from_runs, runs_from_flags, valid_runs


def test_runs_start_with_a_target_run() -> None:
    assert runs_from_flags([]) == ()
    assert runs_from_flags([False, False]) == (2,)
    assert runs_from_flags([True, True, False]) == (0, 2, 1)
    assert runs_from_flags([False, True, True, False, True]) == (1, 2, 1, 1)


def test_round_trip_and_concatenation_match_the_flags() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        a = [rng.random() < 0.5 for _ in range(rng.randint(0, 9))]
        b = [rng.random() < 0.5 for _ in range(rng.randint(0, 9))]
        assert flags_from_runs(runs_from_flags(a)) == a
        assert concat_runs(runs_from_flags(a), runs_from_flags(b)) == runs_from_flags(a + b)


def test_stored_runs_are_checked() -> None:
    assert valid_runs([1, 2, 3]) == (1, 2, 3)
    assert valid_runs([1, -2]) == ()
    assert valid_runs("12") == ()
    assert valid_runs(None) == ()
