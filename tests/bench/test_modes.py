"""Benchmark modes (bench/modes.py): a mode name's speculation, under the label the report shows."""

from __future__ import annotations

from dataclasses import replace

import pytest

from localchat.bench.modes import bench_mode
from localchat.engine.adaptive import AdaptivePolicy
from localchat.engine.costs import CostModel
from localchat.engine.speculation_modes import MODE_NAMES, speculation_for_mode
from localchat.engine.types import AdaptiveVariant


def test_a_bench_mode_is_the_shared_meaning_of_its_name_under_a_label() -> None:
    for name in MODE_NAMES:
        mode = bench_mode(name, 8, 0.4)
        assert mode.name == name and mode.speculation == speculation_for_mode(name, 8, 0.4)
    assert bench_mode("draft", 8, label="draft:8").name == "draft:8"


def test_an_unknown_bench_mode_is_refused_with_the_shared_sentence() -> None:
    with pytest.raises(ValueError, match="'fast' is not a speculation mode; use one of off, draft"):
        bench_mode("fast")


@pytest.mark.parametrize(("mode", "fields"), [
    ("adaptive-nofloor", {"floor": False}),  # without its floor
    ("adaptive-previous", {"previous": True}),  # as an earlier release had it
    ("adaptive-listen", {"listen": True}),  # a pause that listens to the target
    ("adaptive-stickyskip", {"sticky_skip": True}),  # skips that a paying look does not end
    ("adaptive-probeonly", {"look_back": False}),  # every pause ends with a probe
    ("adaptive-earlyalways", {"early": "always"}),  # any clear early loss pauses at once
    ("adaptive-earlynever", {"early": "never"}),
    ("adaptive-earlycost", {"early": "cost"}),  # skipped looks to the warm-up's end
    ("adaptive-calibratedonly", {"learnt_curve": False}),  # lookup alone only on a calibrated curve
    ("adaptive-later", {"later": True}),  # later draft positions priced by an offset of their own
    ("adaptive-lookuponly", {"model_look": False}),  # a lookup reply keeps to lookup alone
    ("adaptive-pauselookup", {"lookup_in_pause": True}),  # lookup drafts during the model's pauses
    ("adaptive-alwayslook", {"sure_look": False}),  # a pause looks back whatever the target's confidence
    ("adaptive-rechoose", {"keep_choice": False}),  # a saved profile's choice of drafter not kept
    ("adaptive-freelookup", {"plan_lookup": False}),  # a lookup draft beside the model kept whole
    ("adaptive-lockfirst", {"provisional_choice": False}),  # a first estimate's choice held as any
])
def test_an_adaptive_variant_is_adaptive_with_one_setting_of_its_version_changed(
    mode: str, fields: dict[str, object]
) -> None:
    plain = bench_mode("adaptive", 4)
    assert plain.speculation.adaptive_variant == AdaptiveVariant()
    variant = bench_mode(mode, 4)
    assert variant.name == mode and variant.speculation.adaptive_variant != AdaptiveVariant()
    assert variant.speculation == replace(plain.speculation,
                                          adaptive_variant=replace(AdaptiveVariant(), **fields))  # type: ignore[arg-type]


def test_each_variant_builds_the_policy_it_names() -> None:
    def settings(p: AdaptivePolicy) -> tuple[object, ...]:
        return (p.floor, p.probe, p.charge_catch_up, p.listen, p.sticky_skip, p.early_pause, p.look_back,
                p.source)

    cost = CostModel()
    assert settings(AdaptivePolicy.for_variant(AdaptiveVariant(), cost)) == settings(AdaptivePolicy(cost))
    p = AdaptivePolicy.for_variant(AdaptiveVariant(floor=False, previous=True, listen=True, sticky_skip=True,
                                                   early="always"), cost, source="lookup")
    assert settings(p) == (False, False, False, True, True, "always", False, "lookup")
    assert not AdaptivePolicy.for_variant(AdaptiveVariant(look_back=False), cost).look_back
    assert AdaptivePolicy.for_variant(AdaptiveVariant(), cost).sure_look
    assert not AdaptivePolicy.for_variant(AdaptiveVariant(sure_look=False), cost).sure_look


def test_an_unknown_early_pause_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="the early pause rule must be one of skips, cost, "):
        AdaptiveVariant(early="sometimes")  # type: ignore[arg-type]
