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
    draft = drafter.propose(context, 16, greedy, rng, stop=object())
    assert model.calls == 1
    assert draft.source == "n-gram" and draft.tokens == text[5:9]  # lookup's own start length
    assert draft.catch_up_seconds == 0.25  # the model's catch-up stays accounted for
    # Without a match there is nothing to stand in: the model's empty draft (a plain step).
    other = [*text, 1, 2, 3]
    assert drafter.propose(other, 16, greedy, rng, stop=object()).tokens == []
