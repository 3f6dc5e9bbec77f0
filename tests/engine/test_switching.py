"""Both drafters in one adaptive reply (engine/adaptive.py ``SwitchingPolicy``, ``plan_drafting``;
engine/draft_sources.py ``SwitchingDrafter``): lookup alone drafts where the draft model pays little
or is paused, and the draft model takes over where a look back over lookup's tokens says it pays."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from localchat.engine.adaptive import (
    CANNOT_PAY,
    DRAFT_MODEL_MIN_BEST,
    HOLD_MARGIN,
    HOLD_TOKENS,
    LOOK_CONFIDENCE,
    AdaptivePolicy,
    DrafterChoice,
    SwitchingPolicy,
    hold_can_pass,
    plan_drafting,
)
from localchat.engine.costs import CostModel
from localchat.engine.draft_sources import Draft, SwitchingDrafter
from localchat.engine.types import AdaptiveVariant, SamplingParams
from tests.engine.cost_curves import F16_CURVE, calibrated

# A steep curve (a quantized target on a CPU): two tokens cost 1.67 plain steps, so the draft model
# pays, at best, little (between CANNOT_PAY and DRAFT_MODEL_MIN_BEST).
STEEP = {1: 60.0, 2: 100.0, 4: 140.0, 8: 240.0, 16: 440.0}


def _steep() -> CostModel:
    return calibrated(STEEP, drafter_ms=12.0)


def test_the_steep_curve_sits_between_the_lines() -> None:
    best = _steep().best_case_gain("draft")
    assert best is not None and CANNOT_PAY <= best < DRAFT_MODEL_MIN_BEST, best


def test_plan_drafting_starts_with_lookup_under_the_line_and_lets_the_model_take_over() -> None:
    plan = plan_drafting(_steep(), DrafterChoice(), "draft", AdaptiveVariant())
    assert plan.lookup_first and plan.switching
    # As before on request: lookup alone for the whole reply.
    plan = plan_drafting(_steep(), DrafterChoice(), "draft", AdaptiveVariant(model_look=False))
    assert plan.lookup_first and not plan.switching
    # Where the draft model cannot pay at all, it never takes over (no prompt read for it either).
    hopeless = calibrated({1: 20.0, 2: 60.0, 4: 110.0, 8: 210.0, 16: 400.0}, drafter_ms=15.0)
    best = hopeless.best_case_gain("draft")
    assert best is not None and best < CANNOT_PAY and not hold_can_pass(hopeless, "draft")
    plan = plan_drafting(hopeless, DrafterChoice(), "draft", AdaptiveVariant())
    assert plan.lookup_first and not plan.switching
    # Nor where it could pay a little, but not the hold's margin even on text it guesses whole (a
    # Q4_K_M target on a CPU whose drafter costs 0.63 of its pass: a best case of 1.03x).
    little = calibrated({1: 59.0, 2: 94.0, 4: 106.0, 8: 188.0, 16: 330.0}, drafter_ms=37.0)
    best = little.best_case_gain("draft")
    assert best is not None and CANNOT_PAY <= best < 1.1 and not hold_can_pass(little, "draft")
    assert not plan_drafting(little, DrafterChoice(), "draft", AdaptiveVariant()).switching
    assert hold_can_pass(_steep(), "draft")
    # Over the line: the draft model from the start; lookup in its pauses only on request.
    flat = calibrated(F16_CURVE)
    assert not plan_drafting(flat, DrafterChoice(), "draft", AdaptiveVariant()).lookup_first
    assert not plan_drafting(flat, DrafterChoice(), "draft", AdaptiveVariant()).switching
    assert plan_drafting(flat, DrafterChoice(), "draft", AdaptiveVariant(lookup_in_pause=True)).switching
    # Costs not known yet: the draft model, alone.
    unknown = plan_drafting(CostModel(), DrafterChoice(), "draft", AdaptiveVariant())
    assert not unknown.lookup_first and not unknown.switching and unknown.best is None


class Chooser:
    def __init__(self) -> None:
        self.lookup: list[bool] = []

    def __call__(self, on: bool) -> None:
        self.lookup.append(on)


def _pair(cost: CostModel, lookup_first: bool = True) -> tuple[SwitchingPolicy, Chooser]:
    chooser = Chooser()
    model = AdaptivePolicy(cost, source="draft")
    lookup = AdaptivePolicy(cost, source="n-gram")
    return SwitchingPolicy(model, lookup, chooser, lookup_first, "qwen-0.5b", "lookup because"), chooser


def _lookup_steps(sp: SwitchingPolicy, chooser: Chooser, tokens: int, target: float | None = None) -> None:
    """Steps on which lookup finds nothing to draft (plain steps of lookup's policy); ``target``: the
    target's confidence the decode loop reports at each (it does while the policy listens)."""
    for _ in range(tokens):
        sp.draft_length()
        assert chooser.lookup[-1], "lookup drafts while the draft model is held back"
        sp.observe(0, 0, 0.0, 0.06, "")
        if target is not None and sp.listens:  # as the decode loop asks, after each step
            sp.observe_target(target, "", None)


def test_a_lookup_reply_hands_over_to_the_draft_model_where_its_look_back_pays() -> None:
    sp, chooser = _pair(_steep())
    assert sp.drafter == "n-gram" and sp.reason == "lookup because" and not sp.paused
    _lookup_steps(sp, chooser, HOLD_TOKENS)
    # The hold is over: the draft model looks back over the tokens lookup wrote (a plain step).
    assert sp.draft_length() == 0 and not chooser.lookup[-1]
    assert sp.look_back_rows() == HOLD_TOKENS
    sp.observe_look_back([(0.97, True)] * (HOLD_TOKENS - 1))  # code it would have guessed
    sp.observe(0, 0, 0.0, 0.06, "")
    # ... so it probes, and drafts on under its own policy, which kept the look's verdicts.
    assert sp.draft_length() > 0 and not chooser.lookup[-1]
    assert sp.model._state == "probe" and sp.model.acceptance() is not None
    assert sp.drafter == "qwen-0.5b" and sp.reason == ""


def test_a_lookup_reply_keeps_to_lookup_where_the_look_back_does_not_pay_enough() -> None:
    sp, chooser = _pair(_steep())
    _lookup_steps(sp, chooser, HOLD_TOKENS)
    assert sp.draft_length() == 0 and sp.look_back_rows() == HOLD_TOKENS
    # A look that would pay by the margin of a pause's look back, not by the hold's.
    gain_needed = HOLD_MARGIN
    sp.observe_look_back([(0.6, i % 3 != 2) for i in range(HOLD_TOKENS - 1)])  # chat: some guessed
    sp.observe(0, 0, 0.0, 0.06, "")
    assert sp.model.paused and "would have reached" in sp.model.reason
    looked = float(sp.model.reason.split("reached ")[1].split("x")[0])
    assert looked < gain_needed
    sp.draft_length()
    assert chooser.lookup[-1] and sp.drafter == "n-gram" and not sp.paused
    assert sp.reason == "lookup because"  # as the reply set out: no news for the user


def test_lookup_drafting_through_a_pause_of_the_draft_model_says_so() -> None:
    sp, chooser = _pair(_steep(), lookup_first=False)
    assert sp.draft_length() > 0 and not chooser.lookup[-1] and sp.reason == ""
    sp.model._pause(0.8, 0.3)
    sp.draft_length()
    assert chooser.lookup[-1] and sp.drafter == "n-gram" and not sp.paused
    assert sp.reason.startswith("The draft model is paused (0.80x at acceptance 0.30; retrying in")
    assert "conversation itself" in sp.reason


def test_the_look_waits_for_a_stretch_the_target_is_sure_of() -> None:
    """Over text the target is unsure of (chat, a story) the look is not worth its catch-up: the hold
    starts again without one; once the target writes what it is sure of (the code after the
    explanation), the look follows."""
    sp, chooser = _pair(_steep())
    _lookup_steps(sp, chooser, HOLD_TOKENS, target=LOOK_CONFIDENCE - 0.2)
    assert sp.draft_length() > 0 and chooser.lookup[-1] and sp.look_back_rows() == 0
    assert sp.model.paused and sp.reason == "lookup because"
    sp.observe(0, 0, 0.0, 0.06, "")
    _lookup_steps(sp, chooser, HOLD_TOKENS - 1, target=0.97)
    assert sp.draft_length() == 0 and not chooser.lookup[-1] and sp.look_back_rows() == HOLD_TOKENS
    # Once the draft model drafts, the target is heard no more (unless its policy listens).
    sp.observe_look_back([(0.97, True)] * (HOLD_TOKENS - 1))
    sp.observe(0, 0, 0.0, 0.06, "")
    assert sp.draft_length() > 0 and not chooser.lookup[-1] and not sp.listens


def test_lookup_drafts_count_towards_the_draft_models_wait() -> None:
    """A lookup step that writes several tokens counts them all towards the hold."""
    sp, chooser = _pair(_steep())
    for _ in range(HOLD_TOKENS // 6):
        assert sp.draft_length() > 0 and chooser.lookup[-1]
        sp.observe(5, 5, 0.0, 0.12, "n-gram", [0.95] * 5)  # a copy, accepted whole: 6 tokens
    assert sp.draft_length() == 0 and not chooser.lookup[-1] and sp.look_back_rows() == HOLD_TOKENS


def test_a_reply_that_starts_with_the_draft_model_ends_a_hold_left_over() -> None:
    cost = _steep()
    model = AdaptivePolicy(cost, source="draft")
    lookup = AdaptivePolicy(cost, source="n-gram")
    SwitchingPolicy(model, lookup, Chooser(), True, "m")  # a lookup reply that ended early
    assert model.paused
    chooser = Chooser()
    sp = SwitchingPolicy(model, lookup, chooser, False, "m")
    assert not model.paused and sp.draft_length() > 0 and not chooser.lookup[-1]
    assert model.look_back_rows() == 0 and model._look_margin_now == model.look_back_margin


def test_a_pause_after_a_measured_loss_outlasts_the_hold() -> None:
    cost = _steep()
    model = AdaptivePolicy(cost, source="draft")
    model._pause(0.8, 0.3)  # lost in an earlier reply: 128 tokens
    SwitchingPolicy(model, AdaptivePolicy(cost, source="n-gram"), Chooser(), True, "m")
    assert model._paused_left == model.retry_tokens and not model._held


# -- the drafter ---------------------------------------------------------------------------------
class Recorder:
    def __init__(self, name: str, looks: list[tuple[float, bool]] | None = None) -> None:
        self.name = name
        self.calls: list[str] = []
        self.limit = 0
        self.looks = looks or []

    def prefill(self, tokens: Sequence[int], should_cancel: Callable[[], bool]) -> None:
        self.calls.append("prefill")

    def propose(self, tokens: Sequence[int], n: int, params: SamplingParams, rng: np.random.Generator,
                stop: object = None) -> Draft:
        self.calls.append("propose")
        return Draft([1], source=self.name)

    def observe(self, source: str, drafted: int, accepted: int) -> None:
        self.calls.append("observe")

    def look_back(self, tokens: Sequence[int], rows: int, params: SamplingParams) -> list[tuple[float, bool]]:
        self.calls.append("look_back")
        return self.looks

    def close(self) -> None:
        self.calls.append("close")


def test_the_switching_drafter_drafts_with_the_one_chosen_and_both_read_the_prompt() -> None:
    combined, lookup = Recorder("m + n-gram", [(0.9, True)]), Recorder("n-gram")
    sw = SwitchingDrafter(combined, lookup, lookup_first=True)  # type: ignore[arg-type]
    rng, params = np.random.default_rng(0), SamplingParams(temperature=0.0)
    sw.prefill([1, 2, 3], lambda: False)
    assert combined.calls == ["prefill"] and lookup.calls == ["prefill"]
    assert sw.propose([1, 2], 4, params, rng).source == "n-gram"
    assert sw.look_back([1, 2], 8, params) == []  # lookup alone cannot say
    sw.observe("n-gram", 2, 2)
    assert "observe" not in combined.calls
    sw.use_lookup(False)
    assert sw.propose([1, 2], 4, params, rng).source == "m + n-gram"
    assert sw.look_back([1, 2], 8, params) == [(0.9, True)]
    sw.limit = 7
    assert combined.limit == 7 and sw.limit == 7
    sw.close()  # owned by the engine: closes neither
    assert "close" not in combined.calls and "close" not in lookup.calls
