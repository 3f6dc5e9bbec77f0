"""Benchmark modes (bench/modes.py): a mode name's speculation, under the label the report shows."""

from __future__ import annotations

from dataclasses import replace

import pytest

from localchat.bench.modes import bench_mode
from localchat.engine.speculation_modes import MODE_NAMES, speculation_for_mode


def test_a_bench_mode_is_the_shared_meaning_of_its_name_under_a_label() -> None:
    for name in MODE_NAMES:
        mode = bench_mode(name, 8, 0.4)
        assert mode.name == name and mode.speculation == speculation_for_mode(name, 8, 0.4)
    assert bench_mode("draft", 8, label="draft:8").name == "draft:8"


def test_an_unknown_bench_mode_is_refused_with_the_shared_sentence() -> None:
    with pytest.raises(ValueError, match="'fast' is not a speculation mode; use one of off, draft"):
        bench_mode("fast")


def test_adaptive_nofloor_is_adaptive_without_its_floor() -> None:
    plain = bench_mode("adaptive", 4)
    nofloor = bench_mode("adaptive-nofloor", 4)
    assert nofloor.name == "adaptive-nofloor" and plain.speculation.adaptive_floor
    assert nofloor.speculation == replace(plain.speculation, adaptive_floor=False)


def test_adaptive_previous_is_adaptive_as_the_last_release_had_it() -> None:
    plain = bench_mode("adaptive", 4)
    previous = bench_mode("adaptive-previous", 4)
    assert previous.name == "adaptive-previous" and not plain.speculation.adaptive_previous
    assert previous.speculation == replace(plain.speculation, adaptive_previous=True)


def test_adaptive_listen_is_adaptive_with_a_pause_that_listens_to_the_target() -> None:
    plain = bench_mode("adaptive", 4)
    listen = bench_mode("adaptive-listen", 4)
    assert listen.name == "adaptive-listen" and not plain.speculation.adaptive_listen
    assert listen.speculation == replace(plain.speculation, adaptive_listen=True)


def test_adaptive_stickyskip_is_adaptive_with_skips_that_a_paying_look_does_not_end() -> None:
    plain = bench_mode("adaptive", 4)
    sticky = bench_mode("adaptive-stickyskip", 4)
    assert sticky.name == "adaptive-stickyskip" and not plain.speculation.adaptive_sticky_skip
    assert sticky.speculation == replace(plain.speculation, adaptive_sticky_skip=True)


def test_adaptive_early_variants_pause_on_an_early_loss_always_or_never() -> None:
    plain = bench_mode("adaptive", 4)
    assert plain.speculation.adaptive_early == "cost"
    for mode, early in (("adaptive-earlyalways", "always"), ("adaptive-earlynever", "never")):
        variant = bench_mode(mode, 4)
        assert variant.name == mode
        assert variant.speculation == replace(plain.speculation, adaptive_early=early)


def test_an_unknown_early_pause_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="adaptive_early"):
        replace(bench_mode("adaptive", 4).speculation, adaptive_early="sometimes")  # type: ignore[arg-type]
