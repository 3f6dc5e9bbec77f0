"""The combined drafter's choice and lookup length, with a scripted model drafter."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

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
    rule = _Plan(keep=4)
    draft = drafter.propose(context, 16, greedy, rng, stop=rule)
    assert model.calls == 1
    assert draft.source == "n-gram" and draft.tokens == text[5:9]  # lookup's own start length
    assert draft.catch_up_seconds == 0.25  # the model's catch-up stays accounted for
    # Planned against the costs like any lookup draft under a stop rule, at this reply's chance.
    assert rule.chances and rule.asked == [[drafter.lookup_chance(5)] * 4]
    assert draft.confidence == [drafter.lookup_chance(5)] * 4
    # Where its verification would cost more than it is expected to earn: the model's empty draft.
    assert drafter.propose(context, 16, greedy, rng, stop=_Plan(keep=0)).tokens == []
    # Without a match there is nothing to stand in: the model's empty draft (a plain step).
    other = [*text, 1, 2, 3]
    assert drafter.propose(other, 16, greedy, rng, stop=_Plan(keep=4)).tokens == []


def test_lookup_drafts_are_planned_under_a_stop_rule_except_the_retry_that_brings_lookup_back() -> None:
    """A lookup draft costs its verification: on a CPU whose two-token pass costs 1.7 one-token ones a
    spurious lookup in prose loses time, so under a stop rule it is planned like the model's drafts.
    The retry after lookup lost the lead is drafted as found: its verdict is how lookup comes back."""
    text = list(range(100, 140))
    context = [*text, *text[:5]]
    drafter = CombinedDrafter(ScriptedModel(), NgramDrafter())  # type: ignore[arg-type]
    drafter.prefill(context, lambda: False)
    greedy, rng = SamplingParams(temperature=0.0), np.random.default_rng(0)
    refuse = _Plan(keep=0)
    assert drafter.propose(context, 4, greedy, rng, stop=refuse).source == "model"
    assert refuse.asked and refuse.chances
    chance = drafter.lookup_chance(5)
    for _ in range(3):  # lookup drafts rejected in this reply: its chance falls
        drafter.observe("n-gram", 4, 0)
    assert drafter.lookup_chance(5) < 0.6 * chance
    assert drafter.lookup_chance(8) <= 0.95
    for _ in range(CombinedDrafter.RETRY_EVERY):  # lookup lost the lead: the model drafts
        assert drafter.propose(context, 4, greedy, rng, stop=refuse).source == "model"
    asked = len(refuse.asked)
    retry = drafter.propose(context, 4, greedy, rng, stop=refuse)
    assert retry.source == "n-gram" and len(retry.tokens) == 4 and len(refuse.asked) == asked


class _Plan:
    """A stop rule that keeps ``keep`` tokens of a known draft and records what it was asked."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.asked: list[list[float]] = []

    def take(self, position: int, confidence: float) -> bool:
        raise AssertionError("a lookup draft is planned whole, not taken token by token")

    def look_further(self, position: int, decode_seconds: float) -> bool:
        raise AssertionError("a lookup draft is planned whole")

    def plan(self, confidences: Sequence[float], chances: bool = False) -> int:
        self.asked.append(list(confidences))
        self.chances = chances
        return self.keep


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
