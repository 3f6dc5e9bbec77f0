"""Both drafters in one reply on real models (engine/adaptive.py ``SwitchingPolicy``): on a machine
where the draft model pays little, a reply starts drafting by lookup alone and the draft model takes
over once its look back shows it pays; the text is plain decoding's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from localchat.engine.adaptive import HOLD_TOKENS, DrafterChoice, SwitchingPolicy
from localchat.engine.backend import Context
from localchat.engine.costs import CostModel
from localchat.engine.engine import Engine
from localchat.engine.types import (
    AdaptiveVariant,
    ChatMessage,
    DrafterKind,
    EngineConfig,
    GenerationRequest,
    SamplingParams,
    SpeculationConfig,
    TokenEvent,
)
from tests.engine.test_adaptive_real import charge_passes

# A machine where verifying two tokens costs 1.67 plain steps (a quantized target on a CPU): the draft
# model's best case is about 1.34x, under the line where a reply starts with it (DRAFT_MODEL_MIN_BEST).
TARGET_MS = {1: 60.0, 2: 100.0, 4: 140.0, 8: 240.0, 16: 440.0}
DRAFTER_MS = 12.0
COUNT = "Count from 1 to 40, one number per line, nothing else."  # text the drafter guesses whole
CODE = "Write a Python function is_prime(n) that checks whether n is a prime number. Only the code."


class Clock:
    """Each pass charged from the curve above (the drafter: its cost per token, a batch read at a
    fraction of that per extra token), so the decisions do not depend on the machine's load."""

    def __init__(self, target: Context) -> None:
        self.now, self.target = 0.0, target

    def perf_counter(self) -> float:
        return self.now

    def charge(self, ctx: Context, n: int) -> None:
        sizes = sorted(TARGET_MS)
        if ctx is self.target:
            ms = float(np.interp(n, sizes, [TARGET_MS[k] for k in sizes]))
            if n > sizes[-1]:
                ms = TARGET_MS[16] + 25.0 * (n - 16)
        else:
            ms = DRAFTER_MS * (1 + 0.15 * (n - 1))
        self.now += ms / 1000


def _install(eng: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    charge_passes(monkeypatch, Clock(eng.target))
    _costs(eng)


def _costs(eng: Engine) -> None:
    """This machine's costs as a calibration at load would have measured them, nothing else learnt yet:
    a new engine's first reply on it (its drafter's surest tokens not yet judged, the best case a first
    estimate, about 1.34x)."""
    eng.cost = CostModel()
    eng.drafter_choice = DrafterChoice()
    eng._policies.clear()
    assert eng.model_drafter is not None
    for size, ms in TARGET_MS.items():
        eng.cost.observe_verify(size, ms / 1000)
    eng.cost.draft_token_s[eng.model_drafter.name] = DRAFTER_MS / 1000
    eng.cost.calibrated = True


def _reply(eng: Engine, spec: SpeculationConfig, session: str, prompt: str = COUNT
           ) -> tuple[str, list[TokenEvent], int]:
    events: list[TokenEvent] = []
    result = eng.generate(
        GenerationRequest(messages=(ChatMessage("user", prompt),), max_tokens=120,
                          sampling=SamplingParams(temperature=0.0), speculation=spec, session=session),
        events.append,
    )
    return result.text, events, result.stats.draft_passes


@pytest.mark.slow
def test_a_reply_starts_with_lookup_and_the_draft_model_takes_over_where_it_pays(
    qwen_target_path: Path, qwen_draft_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Exact: the quantized target's batched passes round as its single ones (docs/SPECULATION.md).
    cfg = EngineConfig(str(qwen_target_path), draft_path=str(qwen_draft_path), n_ctx=2048,
                       use_profile=False, calibrate=False, exact=True)
    with Engine(cfg) as eng:
        _install(eng, monkeypatch)
        assert eng.model_drafter is not None
        name = eng.model_drafter.name
        plain, _, _ = _reply(eng, SpeculationConfig(enabled=False), "plain")
        adaptive = SpeculationConfig(drafter=DrafterKind.AUTO, draft_tokens=4, adaptive=True)
        text, events, passes = _reply(eng, adaptive, "count")
        assert text == plain
        assert passes > 0  # the draft model drafted (lookup makes no drafter pass)
        drafting = [(e.n_tokens, e.speculation.drafter) for e in events if e.n_tokens]
        first_model = [d for _, d in drafting].index(name)
        assert {d for _, d in drafting[:first_model]} == {"n-gram"}
        assert sum(n for n, _ in drafting[:first_model]) >= HOLD_TOKENS  # it sat out the hold
        assert drafting[-1][1] == name and events[-1].speculation.reason == ""
        assert "conversation itself" in events[0].speculation.reason
        policy = next(p for (session, drafter, _), p in eng._policies.items()
                      if session == "count" and p.source == name)
        assert policy.acceptance() is not None  # it drafts on the look's verdicts too

        # The count's drafts judged the drafter's surest tokens: the best case is now measured (about
        # 1.54x), over the line, and the next reply starts with the draft model (DrafterChoice: the
        # choice of lookup was made on a first estimate). The replies below are each a new engine's first.
        assert eng.cost.sure_known(name)
        assert not eng.speculation_state(adaptive).reason
        _costs(eng)

        # Code the drafter guesses less well: the draft model looks, and lookup drafts on.
        plain_code, _, _ = _reply(eng, SpeculationConfig(enabled=False), "plain", CODE)
        text, events, passes = _reply(eng, adaptive, "code", CODE)
        assert text == plain_code and passes == 0
        assert {e.speculation.drafter for e in events if e.n_tokens} <= {"n-gram", name}
        assert events[-1].speculation.drafter == "n-gram"

        # Kept to lookup alone, as before: no drafter pass at all, the same text.
        _costs(eng)
        before = SpeculationConfig(drafter=DrafterKind.AUTO, draft_tokens=4, adaptive=True,
                                   adaptive_variant=AdaptiveVariant(model_look=False))
        text, events, passes = _reply(eng, before, "lookup")
        assert text == plain and passes == 0
        assert {e.speculation.drafter for e in events if e.n_tokens} == {"n-gram"}
        assert not isinstance(eng._policy(GenerationRequest(speculation=before), eng.lookup), SwitchingPolicy)
