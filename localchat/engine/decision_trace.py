"""An opt-in record of adaptive speculation's decisions, step by step, next to what happened.

Off by default (nothing is kept); ``Engine.decision_trace`` (or ``AdaptivePolicy.trace``) turns it on
for diagnosis: tools/adaptive_trace.py reads it. Per verification step it keeps what the policy
decided and why (the step's state: drafting, paused, skipping the look, or a plain step that measures
plain speed; the floor; each draft token's calibrated chance, the chance that it and every token
before it are accepted, the seconds it was weighed against and the decision), what the policy
predicted the step would cost, and what verification then found (tokens accepted, the declined
token's verdict, the measured seconds). Plain numbers only, so that a tool can tell apart the three
ways adaptive speculation can under-draft: acceptance predicted too low, costs misestimated, and
pauses or skipped looks on noise.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TokenDecision:
    """One question the stop rule answered: keep the token at ``position`` (``take``) or pay a
    drafter pass to look at the next one (``look``)."""

    kind: str  # "take" or "look"
    position: int
    confidence: float  # the drafter's (for "look": of the last kept token)
    chance: float  # its calibrated chance of acceptance (for "look": the guess for the next token)
    all_chance: float  # the chance that it and every token before it are accepted
    seconds: float  # what it would cost: extra verification (and for "look", a drafter pass)
    value: float  # tokens per second the time is priced at
    kept: bool
    floor: bool = False  # kept because of the floor, not because it paid


@dataclass(frozen=True)
class StepRecord:
    """One verification step as the policy saw it."""

    index: int
    # "draft", "probe" (ending a pause), "look back" (ending a pause: the plain step whose catch-up says
    # what drafting would have got), "paused", "skip" (look skipped), "plain" (measuring plain speed)
    state: str
    floor: int  # the shortest draft the floor asked for (0: none)
    explore: bool  # a probe step (ending a pause): drafted to the probe's length whatever the rule said
    decisions: tuple[TokenDecision, ...]
    drafted: int
    accepted: int
    source: str
    draft_s: float
    verify_s: float
    predicted_verify_s: float | None  # the verification time the cost curve predicted for this batch
    predicted_draft_s: float | None  # drafted tokens times the drafter's measured seconds per token
    declined: tuple[float, float] | None  # (confidence, verdict) of the token the rule declined
    offset: float  # the conversation's calibration offset (log-odds) after the step
    gain: float | None  # the window's measured speed-up over plain decoding after the step
    reason: str  # why the policy is paused, if it is
    catch_up_s: float = 0.0  # the drafter's catch-up batch before the step (a look back's is all of it)


@dataclass
class DecisionTrace:
    """The steps of every reply whose policy carries this trace, in order."""

    steps: list[StepRecord] = field(default_factory=list)

    def add(self, step: StepRecord) -> None:
        self.steps.append(step)

    def clear(self) -> None:
        self.steps.clear()
