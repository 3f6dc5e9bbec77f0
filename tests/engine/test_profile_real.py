"""Speculation profiles and the calibration at load on real GGUF pairs.

Each test has a profiles folder of its own (tests/conftest.py). Timings on this shared
machine are often disturbed by other programs, and then the engine rightly declines its
calibration: where a test needs a calibrated engine it calibrates without that check
(``ensure_calibrated``), and the decisions that depend on the figures themselves start
from a profile holding figures measured on this machine on a quiet moment
(docs/BENCHMARKS.md, "Cost curve"; the unit tests in test_adaptive.py check the same
decisions).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from localchat.engine import profile
from localchat.engine.costs import CostModel, LineFit
from localchat.engine.engine import Engine
from localchat.engine.types import (
    ChatMessage,
    DrafterKind,
    EngineConfig,
    GenerationRequest,
    SamplingParams,
    SpeculationConfig,
    TokenEvent,
)
from localchat.settings.folders import profiles_dir

ADAPTIVE = SpeculationConfig(drafter=DrafterKind.AUTO, adaptive=True)
OFF = SpeculationConfig(enabled=False)
CODE = "Write a Python function is_palindrome(s) that ignores case and punctuation."


def ask(spec: SpeculationConfig, max_tokens: int = 48, session: str = "s") -> GenerationRequest:
    return GenerationRequest(messages=(ChatMessage("user", CODE),), max_tokens=max_tokens,
                             sampling=SamplingParams(temperature=0.0), speculation=spec, session=session)


# Measured at load on this machine, quiet (ms): verification by batch, the drafter per token.
Q4_CURVE = {1: 27.7, 2: 55.0, 4: 91.5, 8: 144.4, 16: 172.0}
F16_CURVE = {1: 60.0, 2: 94.0, 4: 111.0, 8: 159.0, 16: 219.0}
DRAFTER_MS = 15.6


def measured(curve: dict[int, float]) -> profile.Measured:
    verify = {b: (ms / 1000, 3) for b, ms in curve.items()}
    return profile.Measured(verify, DRAFTER_MS / 1000, DRAFTER_MS / 1000, [0.0] * 20, [0.0] * 20)


def ensure_calibrated(eng: Engine) -> None:
    """The engine's cost model calibrated: where the calibration at load was declined as disturbed
    by other programs, from this machine's figures instead (what is tested is keeping them)."""
    md = eng.model_drafter
    assert md is not None and eng.profile is not None
    if not eng.cost.calibrated:
        profile.apply(measured(Q4_CURVE), eng.cost, md.name)
    assert eng.cost.calibrated


def with_saved_curve(cfg: EngineConfig, curve: dict[int, float]) -> None:
    """Leave a profile of ``cfg``'s pair on this machine holding ``curve``."""
    with Engine(EngineConfig(**{**cfg.__dict__, "calibrate": False})) as eng:
        assert eng.profile is not None and not eng.profile.loaded
        path, key = eng.profile.path, eng.profile.key
    profile.save(path, key, profile.machine_id(), measured(curve))


def profile_files() -> list[Path]:
    return sorted(p for p in profiles_dir().glob("*.json"))


def test_calibration_times_every_batch_size_and_leaves_both_caches_empty(
    qwen_target_path: Path, qwen_draft_path: Path
) -> None:
    cfg = EngineConfig(str(qwen_target_path), draft_path=str(qwen_draft_path), n_ctx=1024,
                       use_profile=False, calibrate=False)
    with Engine(cfg) as eng:
        md = eng.model_drafter
        assert md is not None and eng.profile is None  # neither profile nor calibration asked for
        assert not eng.cost.calibrated and not eng.cost.verify.points
        cost = CostModel()
        # No check for other programs' CPU use, and time enough on a busy machine.
        report = profile.calibrate(eng.target, md.ctx, cost, md.name, budget_s=120.0)
        assert report is not None
        assert set(report.verify_s) == {1, 2, 4, 8, 16}
        assert all(t > 0 for t in report.verify_s.values())
        assert report.draft_token_s is not None and report.draft_token_s > 0
        # Used unless the figures contradict each other (a busy moment); then the cost model is untouched.
        if report.disturbed:
            assert "contradict" in report.disturbed and not cost.calibrated and not cost.verify.points
        else:
            assert cost.calibrated and set(cost.verify.points) == {1, 2, 4, 8, 16}
            assert cost.verify.counts[1] >= 2  # plain speed, which prices time, measured twice
        assert eng.target.n_past == 0 and md.ctx.n_past == 0
        # The engine still answers, from empty caches.
        assert eng.generate(ask(OFF, max_tokens=8)).stats.generated_tokens == 8


@pytest.mark.slow
def test_profile_is_saved_at_close_and_loaded_by_the_next_engine(
    qwen_target_path: Path, qwen_draft_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = EngineConfig(str(qwen_target_path), draft_path=str(qwen_draft_path), n_ctx=1024)
    with Engine(cfg) as eng:
        assert eng.profile is not None and not eng.profile.loaded
        assert eng.profile.calibration is not None  # calibrated at load (perhaps disturbed)
        ensure_calibrated(eng)
        eng.generate(ask(ADAPTIVE))
        curve = {b: t for b, (t, _) in eng.cost.verify.points.items()}
        assert profile_files() == []  # written at close
    (saved,) = profile_files()
    data = json.loads(saved.read_text())
    assert data["format"] == profile.FORMAT and data["machine"] == profile.machine_id()
    assert {int(b) for b in data["measured"]["verify_s"]} >= {1, 2, 4, 8, 16}
    caplog.set_level(logging.INFO, logger="localchat.engine.profile")
    with Engine(cfg) as again:
        assert again.profile is not None and again.profile.loaded and again.profile.calibration is None
        assert again.cost.calibrated
        for b, t in curve.items():
            assert again.cost.verify.points[b][0] == pytest.approx(t, rel=1e-3)
        assert any("speculation profile loaded" in r.getMessage() for r in caplog.records)
    # --fresh: neither read nor written.
    saved.write_text("{}")
    with Engine(EngineConfig(str(qwen_target_path), draft_path=str(qwen_draft_path), n_ctx=1024,
                             use_profile=False)) as fresh:
        assert fresh.profile is not None and not fresh.profile.loaded
    assert saved.read_text() == "{}"


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["garbage", "other-machine"])
def test_a_corrupt_or_foreign_profile_is_ignored_and_replaced(
    qwen_target_path: Path, qwen_draft_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    cfg = EngineConfig(str(qwen_target_path), draft_path=str(qwen_draft_path), n_ctx=1024)
    with Engine(cfg) as eng:
        ensure_calibrated(eng)
    (saved,) = profile_files()
    if damage == "garbage":
        saved.write_bytes(b"\x00\xffnot a profile")
    else:
        data = json.loads(saved.read_text())
        saved.write_text(json.dumps({**data, "machine": "0123456789abcdef"}))
    caplog.set_level(logging.INFO, logger="localchat.engine.profile")
    with Engine(cfg) as eng:
        assert eng.profile is not None and not eng.profile.loaded
        messages = [r.getMessage() for r in caplog.records]
        ignored = [m for m in messages if "ignoring the speculation profile" in m]
        assert len(ignored) == 1, ignored
        if damage == "other-machine":
            assert "another machine" in ignored[0]
        assert eng.generate(ask(ADAPTIVE, max_tokens=8)).stats.generated_tokens == 8
        ensure_calibrated(eng)
    assert json.loads(saved.read_text())["machine"] == profile.machine_id()  # replaced with this one's


@pytest.mark.slow
def test_a_changed_model_file_does_not_reuse_the_profile(smollm2_path: Path, tmp_path: Path) -> None:
    drafter = tmp_path / "drafter.gguf"
    shutil.copyfile(smollm2_path, drafter)
    cfg = EngineConfig(str(smollm2_path), draft_path=str(drafter), n_ctx=1024)
    with Engine(cfg) as eng:
        ensure_calibrated(eng)
    assert len(profile_files()) == 1
    with Engine(cfg) as same:
        assert same.profile is not None and same.profile.loaded
    with drafter.open("r+b") as fh:  # one byte of the last tensor: same name, same size, other model
        fh.seek(-1, 2)
        last = fh.read(1)
        fh.seek(-1, 2)
        fh.write(bytes([last[0] ^ 0x01]))
    with Engine(cfg) as changed:
        assert changed.profile is not None and not changed.profile.loaded
        assert changed.profile.calibration is not None  # measured afresh instead


@pytest.mark.slow
def test_the_q4_target_drafts_by_lookup_alone_from_its_first_reply(
    qwen_target_path: Path, qwen_draft_path: Path
) -> None:
    """Compute-bound on this CPU: the measured costs say that the draft model cannot pay, so from the
    first reply of a new engine adaptive speculation drafts by lookup alone (no drafter pass), says
    why, and drafts only where the reply copies its context far enough to pay for the longer pass."""
    cfg = EngineConfig(str(qwen_target_path), draft_path=str(qwen_draft_path), n_ctx=1024)
    with_saved_curve(cfg, Q4_CURVE)
    with Engine(cfg) as eng:
        assert eng.profile is not None and eng.profile.loaded
        md = eng.model_drafter
        assert md is not None
        best = eng.cost.best_case_gain(md.name)
        assert best is not None and best < 0.97, profile.describe(eng.cost, md.name)
        assert eng.info.speculation.drafter == "n-gram"
        lengths: list[int] = []
        events: list[TokenEvent] = []
        eng.trace_hook = lambda batch, _c, _a: lengths.append(len(batch) - 1)
        eng.generate(ask(ADAPTIVE), events.append)
        assert events and not any(e.speculation.paused for e in events)
        assert {e.speculation.drafter for e in events} == {"n-gram"}
        assert "the draft model costs more than it saves" in events[0].speculation.reason
        assert md.ctx.n_past == 0  # the draft model was never asked
        # The first reply's own passes moved the curve towards this machine's (a slower CPU can make
        # the draft model pay after all, and then it is rightly chosen): the copy is judged on the
        # saved curve again.
        eng.cost.verify = LineFit()
        profile.apply(measured(Q4_CURVE), eng.cost, md.name)
        lengths.clear()
        numbers = ", ".join(str(n) for n in range(100, 160))
        copy = GenerationRequest(
            messages=(ChatMessage("user", f"Repeat this list exactly, nothing else: {numbers}"),),
            max_tokens=120, sampling=SamplingParams(temperature=0.0), speculation=ADAPTIVE, session="c")
        eng.generate(copy)
        assert max(lengths) >= 8, lengths  # a long sure copy is worth its pass
        assert md.ctx.n_past == 0


@pytest.mark.slow
def test_the_first_reply_drafts_with_the_f16_target_and_equals_plain_decoding(
    qwen_target_f16_path: Path, qwen_draft_path: Path
) -> None:
    """Bandwidth-bound: the measured costs say speculation pays, so the first reply drafts from its
    first steps (no plain step to measure first) and its text is the target's own."""
    cfg = EngineConfig(str(qwen_target_f16_path), draft_path=str(qwen_draft_path), n_ctx=1024)
    with_saved_curve(cfg, F16_CURVE)
    with Engine(cfg) as eng:
        assert eng.profile is not None and eng.profile.loaded
        md = eng.model_drafter
        assert md is not None
        best = eng.cost.best_case_gain(md.name)
        assert best is not None and best > 1.2, profile.describe(eng.cost, md.name)
        lengths: list[int] = []
        eng.trace_hook = lambda batch, _c, _a: lengths.append(len(batch) - 1)
        spec = eng.generate(ask(ADAPTIVE, max_tokens=64))
        eng.trace_hook = None
        eng.reset()
        plain = eng.generate(ask(OFF, max_tokens=64))
        assert spec.token_ids == plain.token_ids
        # The first steps draft on the profile's figures alone. What follows depends on this
        # machine's load at the moment (a busy machine rightly pauses): not asserted here.
        assert sum(lengths[:4]) > 0, lengths


def test_the_engine_reports_the_costs_it_measured(smollm2_path: Path) -> None:
    """EngineInfo.measured carries the pair's curve and drafter cost (the app predicts other targets'
    speeds from it: catalog/starter_choice.py); None while nothing is measured."""
    cfg = EngineConfig(str(smollm2_path), draft_path=str(smollm2_path), n_ctx=512)
    with_saved_curve(cfg, Q4_CURVE)
    with Engine(cfg) as eng:
        measured = eng.info.measured
        assert measured is not None
        assert dict(measured.verify_s) == pytest.approx({b: ms / 1000 for b, ms in Q4_CURVE.items()})
        assert measured.draft_token_s == pytest.approx(DRAFTER_MS / 1000)
        assert measured.accelerator_bytes is None  # on the CPU
    cold = EngineConfig(str(smollm2_path), draft_path=str(smollm2_path), n_ctx=512, use_profile=False,
                        calibrate=False)
    with Engine(cold) as eng:
        assert eng.info.measured is None
    with Engine(EngineConfig(str(smollm2_path), n_ctx=512)) as eng:
        assert eng.info.measured is None  # no drafter, nothing to weigh it against


def test_a_draft_model_that_pays_only_on_the_easiest_text_gives_way_to_lookup(smollm2_path: Path) -> None:
    """Best case just above plain (1.07x here, like the Q4_K_M starter on a 2-vCPU Xeon): the draft
    model's passes would cost chat and stories more than its rare long drafts save, so a new reply
    drafts by lookup alone and says why in words."""
    marginal = {1: 30.0, 2: 41.0, 4: 60.0, 8: 100.0, 16: 180.0}
    cfg = EngineConfig(str(smollm2_path), draft_path=str(smollm2_path), n_ctx=512)
    with_saved_curve(cfg, marginal)
    with Engine(cfg) as eng:
        md = eng.model_drafter
        assert md is not None
        best = eng.cost.best_case_gain(md.name)
        assert best is not None and 1.0 < best < 1.15, best
        assert eng.info.speculation.drafter == "n-gram"
        assert "saves too little for this model outside the easiest text" in eng.info.speculation.reason
        assert eng.profile is not None
        path, key = eng.profile.path, eng.profile.key
    profile.save(path, key, profile.machine_id(), measured(F16_CURVE))  # a draft model that pays is used
    with Engine(cfg) as eng:
        assert eng.info.speculation.drafter != "n-gram"


def test_a_cost_curve_learnt_in_the_replies_lets_the_draft_model_give_way(smollm2_path: Path) -> None:
    """Without a calibration at load (declined as disturbed, or skipped: ``localchat bench --fresh``) the
    curve is learnt in the replies. Once it is known (three batch sizes measured twice each), a draft
    model that pays only on the easiest text gives way to lookup as on a calibrated curve; before, every
    new conversation measured it again at a loss (a Q8_0 target, 0.90x plain on 2 threads). The rule
    before stays measurable (``AdaptiveVariant.learnt_curve=False``, bench ``adaptive-calibratedonly``)."""
    from dataclasses import replace

    from localchat.engine.types import AdaptiveVariant

    marginal = {1: 30.0, 2: 41.0, 4: 60.0, 8: 100.0, 16: 180.0}
    cfg = EngineConfig(str(smollm2_path), draft_path=str(smollm2_path), n_ctx=512, use_profile=False,
                       calibrate=False)
    with Engine(cfg) as eng:
        md = eng.model_drafter
        assert md is not None
        assert eng.speculation_state(ADAPTIVE).drafter != "n-gram"  # nothing measured yet
        eng.cost.observe_draft(md.name, 4, 4 * DRAFTER_MS / 1000)
        eng.cost.observe_verify(1, marginal[1] / 1000)
        eng.cost.observe_verify(2, marginal[2] / 1000)
        eng.cost.observe_verify(4, marginal[4] / 1000)
        assert not eng.cost.curve_known()  # one pass a size: a line through it proves nothing yet
        assert eng.speculation_state(ADAPTIVE).drafter != "n-gram"
        for batch, ms in [*marginal.items(), *marginal.items()]:
            eng.cost.observe_verify(batch, ms / 1000)
        assert eng.cost.curve_known() and not eng.cost.calibrated
        best = eng.cost.best_case_gain(md.name)
        assert best is not None and 1.0 < best < 1.15, best
        state = eng.speculation_state(ADAPTIVE)
        assert state.drafter == "n-gram" and "saves too little" in state.reason
        before = replace(ADAPTIVE, adaptive_variant=AdaptiveVariant(learnt_curve=False))
        assert eng.speculation_state(before).drafter != "n-gram"


def test_measure_costs_times_every_draft_batch_apart_from_the_engines_own_costs(smollm2_path: Path) -> None:
    from localchat.bench.modelled import MEASURED_SIZES

    cfg = EngineConfig(str(smollm2_path), draft_path=str(smollm2_path), n_ctx=512, use_profile=False,
                       calibrate=False)
    with Engine(cfg) as eng:
        eng.generate(ask(OFF, max_tokens=4))
        report = eng.measure_costs(MEASURED_SIZES, budget_s=60.0)
        assert report is not None
        if not report.disturbed:  # a busy moment may slow a size's every pass: the report says so
            assert set(report.verify_s) == set(MEASURED_SIZES)
            assert report.draft_token_s is not None and report.draft_token_s > 0
        else:
            assert "slowed" in report.disturbed or "contradict" in report.disturbed
        assert all(t > 0 for t in report.verify_s.values())
        assert not eng.cost.calibrated and not eng.cost.verify.points.get(17)  # the engine's own: untouched
        assert eng.target.n_past == 0 and eng.model_drafter is not None and eng.model_drafter.ctx.n_past == 0
        # Each draft pays its drafter passes, and the reply's statistics count them.
        stats = eng.generate(ask(SpeculationConfig(drafter=DrafterKind.MODEL, draft_tokens=4, adaptive=False),
                                 max_tokens=24)).stats
        drafts = stats.drafted_per_position[0]
        assert drafts > 0
        # At least one pass per draft (its first token comes from the pass on the target's token), at
        # most one per drafted token and one more where the drafter's confidence ended the draft.
        assert drafts <= stats.draft_passes <= stats.drafted + drafts
    cfg_plain = EngineConfig(str(smollm2_path), n_ctx=512, use_profile=False, calibrate=False)
    with Engine(cfg_plain) as eng:
        assert eng.measure_costs(MEASURED_SIZES, budget_s=1.0) is None  # no draft model to measure
