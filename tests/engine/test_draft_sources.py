"""The combined drafter's choice and lookup length, with a scripted model drafter."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from localchat.engine.draft_sources import CombinedDrafter, Draft, NgramDrafter
from localchat.engine.types import SamplingParams


class ScriptedModel:
    name = "model"

    def __init__(self, drafts: bool = True) -> None:
        self.calls = 0
        self.drafts = drafts  # False: its stop rule declines every token

    def prefill(self, tokens: Sequence[int], should_cancel: object) -> None:
        pass

    def propose(
        self, tokens: Sequence[int], n: int, params: SamplingParams, rng: np.random.Generator,
        stop: object = None,
    ) -> Draft:
        self.calls += 1
        return Draft([7] * n if self.drafts else [], None, self.name, catch_up_seconds=0.25)

    def close(self) -> None:
        pass


def test_lookup_drafts_double_while_accepted_whole_and_reset_after_a_miss() -> None:
    text = list(range(100, 140))
    context = [*text, *text[:5]]  # the reply has started copying the text
    drafter = CombinedDrafter(ScriptedModel(), NgramDrafter())  # type: ignore[arg-type]
    drafter.prefill(context, lambda: False)
    greedy, rng = SamplingParams(temperature=0.0), np.random.default_rng(0)
    lengths = []
    for accept_all in (True, True, True, False, True):
        drafter.limit = 16
        draft = drafter.propose(context, 1, greedy, rng)
        assert draft.source == "n-gram" and draft.tokens == text[5 : 5 + len(draft.tokens)]
        lengths.append(len(draft.tokens))
        drafter.observe(draft.source, len(draft.tokens), len(draft.tokens) if accept_all else 0)
    assert lengths == [1, 2, 4, 8, 1]
    drafter.limit = 3  # the decode loop's bound (context room, tokens left) always holds
    assert len(drafter.propose(context, 1, greedy, rng).tokens) <= 3


def test_a_new_reply_starts_from_the_priors() -> None:
    text = list(range(100, 140))
    context = [*text, *text[:5]]
    model = ScriptedModel()
    drafter = CombinedDrafter(model, NgramDrafter())  # type: ignore[arg-type]
    drafter.prefill(context, lambda: False)
    for _ in range(5):  # lookup drafts keep failing in this reply: the model takes over
        drafter.observe("n-gram", 4, 0)
    greedy, rng = SamplingParams(temperature=0.0), np.random.default_rng(0)
    assert drafter.propose(context, 2, greedy, rng).source == "model"
    drafter.prefill(context, lambda: False)  # next reply
    assert drafter.propose(context, 2, greedy, rng).source == "n-gram"


def test_lookup_stands_in_when_the_model_finds_nothing_worth_drafting() -> None:
    text = list(range(100, 140))
    context = [*text, *text[:5]]
    model = ScriptedModel(drafts=False)
    drafter = CombinedDrafter(model, NgramDrafter())  # type: ignore[arg-type]
    drafter.prefill(context, lambda: False)
    for _ in range(5):  # lookup lost the lead in this reply: the model is asked first
        drafter.observe("n-gram", 4, 0)
    greedy, rng = SamplingParams(temperature=0.0), np.random.default_rng(0)
    keep_all = _Plan(keep=16)
    draft = drafter.propose(context, 16, greedy, rng, stop=keep_all)
    assert model.calls == 1
    assert draft.source == "n-gram" and draft.tokens == text[5:9]  # lookup's own start length
    assert draft.catch_up_seconds == 0.25  # the model's catch-up stays accounted for
    # Without a match there is nothing to stand in: the model's empty draft (a plain step).
    other = [*text, 1, 2, 3]
    assert drafter.propose(other, 16, greedy, rng, stop=keep_all).tokens == []


class _Plan:
    """A stop rule that keeps ``keep`` tokens of a known draft and records what it was asked."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.asked: list[list[float]] = []

    def take(self, position: int, confidence: float) -> bool:
        raise AssertionError("a lookup draft is planned whole, not taken token by token")

    def look_further(self, position: int, decode_seconds: float) -> bool:
        raise AssertionError("a lookup draft is planned whole")

    def plan(self, confidences: Sequence[float]) -> int:
        self.asked.append(list(confidences))
        return self.keep

    def plan_lookup(self, chances: Sequence[float]) -> int:
        self.asked.append(list(chances))
        return min(self.keep, len(chances))


def test_lookup_with_a_stop_rule_keeps_the_planned_length_and_reports_its_confidence() -> None:
    from localchat.engine.draft_sources import match_confidence

    ngram = NgramDrafter(min_ngram=3)
    text = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1, 2, 3, 4]
    rule = _Plan(keep=3)
    draft = ngram.propose(text, 8, SamplingParams(temperature=0.0), np.random.default_rng(0), rule)
    assert draft.tokens == [5, 6, 7]
    assert rule.asked == [[match_confidence(4)] * 8]  # a 4-token match, 8 tokens offered
    assert draft.confidence == [match_confidence(4)] * 3
    assert match_confidence(3) < match_confidence(8) <= 0.95
    none = ngram.propose(text, 8, SamplingParams(temperature=0.0), np.random.default_rng(0), _Plan(0))
    assert none.tokens == [] and none.confidence == []


def test_a_lookup_draft_beside_the_model_is_cut_where_its_verification_costs_more_than_it_earns() -> None:
    """Lookup drafts cost nothing to make but their verification: on a curve where a batch of five
    costs nearly three plain steps, four tokens from a reply whose lookups keep missing are not worth
    verifying. Beside the draft model, the stop rule plans them on lookup's own record in this reply
    (``CombinedDrafter.lookup_chance``), not on the draft model's calibration; the rule before
    (``lookup_planned=False``) keeps it whole."""
    from localchat.engine.stop_rule import CostStopRule
    from tests.engine.cost_curves import calibrated

    steep = calibrated({1: 61.0, 2: 99.0, 3: 108.0, 4: 116.0, 5: 177.0, 8: 179.0, 16: 296.0})
    text = list(range(100, 140))
    context = [*text, *text[:5]]
    drafter = CombinedDrafter(ScriptedModel(drafts=False), NgramDrafter())  # type: ignore[arg-type]
    drafter.prefill(context, lambda: False)
    greedy, rng = SamplingParams(temperature=0.0), np.random.default_rng(0)

    def rule() -> CostStopRule:
        return CostStopRule(steep, steep.calibration_for("draft"), value=1 / 0.061)

    assert drafter.lookup_chance() == pytest.approx(CombinedDrafter.LOOKUP_PRIOR)
    draft = drafter.propose(context, 16, greedy, rng, stop=rule())
    # At the prior (0.7 a token) three tokens pay on this curve, a fourth (a batch of five) does not.
    assert draft.source == "n-gram" and draft.tokens == text[5:8]
    for _ in range(3):
        drafter.observe("n-gram", 3, 0)  # every lookup draft of this reply rejected at its first token
    assert drafter.lookup_chance() < 0.35
    assert drafter.propose(context, 16, greedy, rng, stop=rule()).tokens == []  # a plain step instead
    for _ in range(10):
        drafter.observe("n-gram", 4, 4)  # the reply starts copying: accepted whole
    assert drafter.lookup_chance() > 0.85
    assert len(drafter.propose(context, 16, greedy, rng, stop=rule()).tokens) >= 7
    drafter.prefill(context, lambda: False)  # a new reply starts from the prior again
    assert drafter.lookup_chance() == pytest.approx(CombinedDrafter.LOOKUP_PRIOR)
    before = CostStopRule(steep, steep.calibration_for("draft"), value=1 / 0.061, lookup_planned=False)
    assert drafter.propose(context, 16, greedy, rng, stop=before).tokens == text[5:9]


def test_a_lookup_draft_cut_to_nothing_is_judged_against_what_the_reply_wrote() -> None:
    """A reply whose first lookups missed is not shut out of lookup for good: the draft the plan cut
    to nothing is compared with the tokens the reply went on with, as verification would have judged
    it, so lookup's record rises where the reply starts copying (and falls where it does not)."""
    from localchat.engine.stop_rule import CostStopRule
    from tests.engine.cost_curves import calibrated

    steep = calibrated({1: 61.0, 2: 99.0, 3: 108.0, 4: 116.0, 5: 177.0, 8: 179.0, 16: 296.0})
    text = list(range(100, 140))
    drafter = CombinedDrafter(ScriptedModel(drafts=False), NgramDrafter())  # type: ignore[arg-type]
    greedy, rng = SamplingParams(temperature=0.0), np.random.default_rng(0)
    rule = CostStopRule(steep, steep.calibration_for("draft"), value=1 / 0.061)
    context = [*text, *text[:5]]
    drafter.prefill(context, lambda: False)
    for _ in range(3):
        drafter.observe("n-gram", 3, 0)
    low = drafter.lookup_chance()
    assert drafter.propose(context, 16, greedy, rng, stop=rule).tokens == []  # cut to nothing
    # The reply went on as lookup had proposed: four of its tokens right, then the context moved on.
    copied = [*context, *text[5:9]]
    drafter.propose(copied, 16, greedy, rng, stop=rule)
    assert drafter.lookup_chance() > low
    # And where it went on otherwise, the record falls.
    for _ in range(4):
        drafter.observe("n-gram", 3, 0)
    before = drafter.lookup_chance()
    assert drafter.propose(copied, 16, greedy, rng, stop=rule).tokens == []  # cut again
    drafter.propose([*copied, 7, 7], 16, greedy, rng, stop=rule)
    assert drafter.lookup_chance() < before
