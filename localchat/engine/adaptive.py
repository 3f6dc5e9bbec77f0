"""How far to draft: a fixed length, or token by token from what speculation earns.

``FixedPolicy`` drafts the same length every step (benchmarks, experts); the
draft model still stops early when its confidence falls below ``p_min``.

``AdaptivePolicy`` (the default) drafts with a ``CostStopRule`` (engine/stop_rule.py):
before each draft token it weighs what the token is expected to earn (its calibrated
chance of acceptance, engine/calibration.py) against what it costs on this machine
(engine/costs.py). This module owns when and how the policy drafts, pauses and learns.

The costs start from what the pair showed on this machine before (a saved
profile, engine/profile.py) or from a short calibration at load; the
verification cost follows the measured curve (a CPU's cost per extra token
changes with the batch size as llama.cpp switches kernels), so drafts run as far
as that curve, the drafter's cost and the calibrated acceptance make pay. Where
even the drafter's surest tokens cannot pay on that curve, a conversation starts
paused.

When the measured speculative speed (drafting, catching the drafter up and
verifying, over a window of steps) stays below plain speed, the policy pauses
speculation (plain steps, which cost nothing extra and keep plain speed
measured), says so, and probes again later, waiting longer after each failed
probe. A new conversation starts paused when the pair's last measurement on
this machine said speculation does not pay.

A pause ends with a probe: a few steps that draft a short fixed length whatever
the confidence says, so that verification judges real drafts (a stop rule that
prices every token as a loss drafts nothing and learns nothing). Their verdicts
feed the floor, their passes re-measure the costs. A conversation paused on the
costs alone (a calibration at load through a busy moment can say the drafter
cannot pay) probes after ``first_probe_tokens`` plain tokens, not after a whole
retry wait, and stays paused only if the probe confirms it.

Opt-in (``listen``), a pause listens to the target: the target's confidence in each token it writes
during a pause (free: plain steps compute its logits) predicts how often the drafter would have
guessed it, on a calibration learned from the drafts' first tokens. Where the pause's recent tokens
predict an acceptance that proves a fixed length pays, the pause ends early with a probe.

Drafters without a confidence (n-gram lookup on its own) get a length instead:
doubled after a draft accepted whole, cut back to where the last one failed.

``SwitchingPolicy`` holds two of these policies, the draft model's and lookup alone's, for a reply
that may change drafter within it: one that starts with lookup alone (the draft model pays little on
this machine, ``plan_drafting``) and lets the draft model take over where a look back says it pays.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from localchat.engine.calibration import Calibration, ConversationCalibration
from localchat.engine.costs import CostModel, ewma
from localchat.engine.decision_trace import DecisionTrace, StepRecord, TokenDecision
from localchat.engine.stop_rule import CostStopRule, StopRule
from localchat.engine.types import AdaptiveVariant, EarlyPause
from localchat.settings.options import DRAFT_TOKENS_MAX

# Below this best-case speed-up, speculation with the drafter cannot pay here: start paused.
CANNOT_PAY = 0.97


# Below this best-case speed-up the draft model is not worth its passes for a new reply: the best case
# assumes text as easy as the drafter's surest tokens (16 of them, each accepted 97% of the time), and
# where even that pays little, real text loses to the looks, catch-ups and probes that find too little
# worth drafting. Measured: a best case of 1.06x, 0.91x plain on chat; replayed on a Q8_0 target with 2
# threads, a best case of 1.29x, 0.84-0.96x plain in every category, code included, against 1.75-2.55x
# best cases on F16 targets where the draft model pays (docs/BENCHMARKS.md). Lookup drafts a copy for
# free there instead. This line sits between the two, with room on each side for a curve's noise.
DRAFT_MODEL_MIN_BEST = 1.4


def draft_model_best_case(cost: CostModel, source: str, learnt: bool = True) -> float | None:
    """The draft model's best-case speed-up on this machine's measured costs; None until the curve
    is known: calibrated at load or saved, or (``learnt``) learnt in the replies well enough to
    judge from (``CostModel.curve_known``). Without the latter a target where the draft model
    cannot pay, with its calibration at load declined or skipped, measured every new conversation
    at a loss for itself.

    Below ``CANNOT_PAY`` it cannot pay for this target whatever the text (a compute-bound
    target on a CPU), and below ``DRAFT_MODEL_MIN_BEST`` only on the easiest: adaptive speculation
    then drafts by lookup alone (``Engine._choose_drafter``), which costs no drafter pass and still
    pays where a reply copies its context (code edits, quoting).
    """
    known = cost.curve_known() if learnt else cost.calibrated
    return cost.best_case_gain(source) if known else None


# Once the draft model gave way to lookup, it comes back only at this much over the line: its best case
# moves with the measured plain step, which on a CPU can switch between two speeds (a Q8_0 target with
# 2 threads: 43 or 60 ms, its batch of 8 about 170 ms either way, so a best case of 1.27x or 1.49x).
# A choice that follows it flips reply by reply; a reply that took the draft model so, on a target whose
# recorded best case is 1.29x, ran at 0.51x plain (docs/BENCHMARKS.md).
DRAFT_MODEL_RETURN = 1.15


@dataclass
class DrafterChoice:
    """Adaptive speculation's choice between the draft model and lookup alone, for one pair
    (``Engine._choose_drafter``): lookup alone below ``DRAFT_MODEL_MIN_BEST``, and, once chosen, until
    the best case reaches that line times ``DRAFT_MODEL_RETURN``, unless it was chosen on a first
    estimate (``provisional``: the drafter's surest tokens not yet judged often enough to price them,
    ``CostModel.sure_known``), which the next choice makes afresh at the line. The choice is kept in
    the cost model (``CostModel.lookup_alone``), whose profile a later process starts from: the best
    case a saved profile gives is higher than the first process's (its drafter's surest tokens are
    priced at the acceptance learnt instead of ``SURE_ACCEPTANCE``), and without the choice that process would
    decide afresh from it, above the line where the one before had given way."""

    lookup_alone: bool = False
    _started: bool = False
    _provisional: bool = False  # the last choice was made on a first estimate of the best case

    def choose_lookup(self, best: float | None, cost: CostModel | None = None,
                      provisional: bool = False) -> bool:
        """Whether the next reply drafts by lookup alone, given the draft model's best case on the
        measured costs (``draft_model_best_case``; None: not known yet, the draft model). ``cost``:
        the choice a saved profile restored is where the first reply of this process starts from,
        and this one is kept there for the next profile. ``provisional``: ``best`` is a first estimate
        (the surest tokens priced at ``SURE_ACCEPTANCE`` for want of evidence), so a choice of lookup
        made on it does not hold the draft model to the higher line that a measured one does. Before
        the evidence, four of five Q8_0 curves replayed gave 1.31-1.42x, around the line; after it 1.55-1.68x.
        Held to the higher line (1.61x), a first estimate under it kept lookup alone for good where the
        draft model paid: the Xeon's Q8_0 target with the F16 drafter, prompts in one order of four,
        0.928 of the best fixed choice against 0.983 with the draft model (docs/BENCHMARKS.md)."""
        if cost is not None and not self._started and cost.lookup_alone is not None:
            self.lookup_alone = cost.lookup_alone
        self._started = True
        if best is None:
            return False
        held = self.lookup_alone and not self._provisional
        line = DRAFT_MODEL_MIN_BEST * (DRAFT_MODEL_RETURN if held else 1.0)
        self.lookup_alone = best < line
        self._provisional = provisional
        if cost is not None:
            cost.lookup_alone = self.lookup_alone
        return self.lookup_alone


def lookup_instead(best: float) -> str:
    """Why adaptive speculation drafts by lookup alone, in words (see Engine._choose_drafter)."""
    why = ("costs more than it saves for this model" if best < 1.0
           else "saves too little for this model outside the easiest text")
    return (f"On this computer the draft model {why} ({best:.2f}x at best), so drafts come from the "
            f"conversation itself (n-gram lookup).")


# Said after ``lookup_instead`` where the draft model may take over within the reply (``SwitchingPolicy``).
TAKES_OVER = " Where a reply turns out to suit the draft model, it takes over."


def proven_length(acceptance: float, t_verify: Callable[[int], float | None], look_s: float,
                  max_len: int = DRAFT_TOKENS_MAX) -> tuple[int, float]:
    """The fixed draft length that is fastest if each draft token is accepted with chance
    ``acceptance`` once those before it were (a geometric run), on the measured costs: verification
    ``t_verify(batch)`` seconds and ``look_s`` drafter seconds per drafted token. Returns (length,
    its speed over plain decoding); (0, 1.0) where no length beats plain decoding or a cost is
    unknown.

    The expected tokens of a step drafting L are 1 + a + a^2 + ... + a^L; its time is L drafter
    passes and one verification of L + 1 tokens.
    """
    t1 = t_verify(1)
    if t1 is None or t1 <= 0.0:
        return 0, 1.0
    best, best_gain, expected = 0, 1.0, 1.0
    for k in range(1, max_len + 1):
        expected += acceptance**k
        tv = t_verify(k + 1)
        if tv is None:
            break
        gain = expected * t1 / (k * look_s + tv)
        if gain > best_gain:
            best, best_gain = k, gain
    return best, best_gain


def look_back_runs(looked: Sequence[tuple[float, bool]]) -> list[tuple[int, int]]:
    """The floor's verdicts from a look back (``AdaptivePolicy.observe_look_back``): for each position, a
    draft that could have started there, as (tokens accepted in a row, 1 if a wrong token ended the run,
    0 if the end of the look cut it off)."""
    runs: list[tuple[int, int]] = []
    run = 0
    for i in range(len(looked) - 1, -1, -1):  # backwards: the run from each position
        run = run + 1 if looked[i][1] else 0
        runs.append((run, int(i + run < len(looked))))
    return runs[::-1]


class DraftPolicy(Protocol):
    def draft_length(self) -> int:
        """Most tokens to draft for the next step; 0 means a plain decoding step."""
        ...

    def observe(
        self, drafted: int, accepted: int, draft_s: float, verify_s: float, source: str,
        confidence: Sequence[float] = (), catch_up_s: float = 0.0, passes: int | None = None,
    ) -> None:
        """Feed back one verification pass (``source`` is empty for a plain step). ``draft_s`` is the
        drafting itself; ``catch_up_s`` the batch that first caught the drafter up on tokens it sat
        out (skipped looks, a pause), which speculation paid for too; ``passes`` the drafter's
        single-token passes in ``draft_s`` (None: not known, one per drafted token)."""
        ...

    def stop_rule(self) -> StopRule | None:
        """How far the next draft goes, token by token; None: the drafter's own ``p_min``."""
        ...

    def observe_declined(self, source: str, confidence: float, hit: float) -> None:
        """A token the stop rule declined, judged by the verification pass anyway (see
        draft_sources.Declined): ``hit`` 1 if the target agreed, 0 if not (or the chance that
        speculative sampling would have accepted it)."""
        ...

    @property
    def listens(self) -> bool:
        """Whether the decode loop reports the target's confidence (``observe_target``)."""
        ...

    def observe_target(self, confidence: float, source: str, first_accepted: bool | None) -> None:
        """The target's confidence in its choice at a step's first row (its top probability): where
        the drafter drafted (``source``), whether its first token was that choice; at a plain step
        (``first_accepted`` None), only what the target was sure of."""
        ...

    def look_back_rows(self) -> int:
        """Before a plain step: how many of the tokens the drafter sat out it should look back on as
        it catches up (``LooksBack.look_back``); 0: none, no catch-up."""
        ...

    def observe_look_back(self, looked: Sequence[tuple[float, bool]]) -> None:
        """What the drafter would have drafted over the tokens it sat out: per position, its
        confidence and whether its choice was the token written (empty: it could not say)."""
        ...

    @property
    def paused(self) -> bool: ...

    @property
    def reason(self) -> str: ...

    @property
    def paused_speedup(self) -> float | None:
        """While paused: the measured speed against plain decoding that paused it."""
        ...


class FixedPolicy:
    def __init__(self, n: int) -> None:
        self.n = n

    def draft_length(self) -> int:
        return self.n

    def observe(
        self, drafted: int, accepted: int, draft_s: float, verify_s: float, source: str,
        confidence: Sequence[float] = (), catch_up_s: float = 0.0, passes: int | None = None,
    ) -> None:
        pass

    def stop_rule(self) -> StopRule | None:
        return None

    def observe_declined(self, source: str, confidence: float, hit: float) -> None:
        pass

    listens = False

    def observe_target(self, confidence: float, source: str, first_accepted: bool | None) -> None:
        pass

    def look_back_rows(self) -> int:
        return 0

    def observe_look_back(self, looked: Sequence[tuple[float, bool]]) -> None:
        pass

    @property
    def paused(self) -> bool:
        return False

    @property
    def reason(self) -> str:
        return ""

    @property
    def paused_speedup(self) -> float | None:
        return None


@dataclass
class AdaptivePolicy:
    """Drafts token by token from measured acceptance and cost; pauses itself when speculation loses."""

    cost: CostModel
    start: int = 4  # first length for drafters without a confidence (n-gram lookup)
    max_len: int = DRAFT_TOKENS_MAX
    source: str = "draft"  # the drafter whose calibration and verdict this policy uses
    confident: bool = True  # the drafter reports its confidence per token: use the CostStopRule
    warmup_steps: int = 12  # speculative steps measured before auto-off may trigger
    # A clear loss needs less evidence: after this many steps, a speed-up below
    # ``early_gain`` pauses at once (the first reply of a pair that loses here).
    early_steps: int = 4
    early_gain: float = 0.8
    retry_tokens: int = 128  # plain tokens before probing again (doubles after each failed probe)
    calibrate_every: int = 128  # a plain step now and then keeps plain speed measured
    rate_steps: int = 8  # speculative steps in the window before its rate prices time
    # The floor (``_floor``): never draft shorter than the fixed length that the conversation's own
    # recent verdicts prove fastest on the measured costs. Off: the stop rule alone (the policy
    # before issue 27; ``AdaptiveVariant.floor``).
    floor: bool = True
    floor_steps: int = 16  # recent drafting steps whose verdicts estimate the acceptance per token
    floor_min_steps: int = 3  # steps of evidence before the floor acts
    floor_margin: float = 1.02  # the proven length must beat plain decoding by this much
    floor_p_min: float = 0.5  # tokens after the first drafted under the floor: at least this confident
    # The probe that ends a pause: ``probe_steps`` drafting steps at ``probe_len`` tokens at least (the
    # floor's rule: the first token, then those at least ``floor_p_min`` confident). A conversation
    # that starts paused on the costs alone probes after ``first_probe_tokens`` plain tokens.
    probe: bool = True
    probe_len: int = 4
    probe_steps: int = 3
    first_probe_tokens: int = 16
    # A step's cost includes the batch that caught the drafter up on the tokens it sat out (skipped
    # looks, a pause): skipping a look saves its pass, not the drafter's reading of those tokens later.
    # Off: the policy before (``AdaptiveVariant.previous``).
    charge_catch_up: bool = True
    # A pause listens to the target (``observe_target``): the target's confidence in the tokens it
    # writes predicts how often the drafter would have guessed them (a drafter of the same family
    # agrees where the target is sure). Where the last ``listen_tokens`` plain tokens of a pause
    # predict an acceptance that proves a fixed length pays, the pause ends with a probe, whose
    # verdicts then decide. Opt-in (``AdaptiveVariant.listen``): on the second held-out set it
    # was ahead with 2 threads and 3% behind with 1 (docs/BENCHMARKS.md), so it is not the default.
    listen: bool = False
    listen_tokens: int = 16
    # A pause after a measured loss ends by looking back (``observe_look_back``): the drafter catches
    # up on the tokens it sat out and says what drafting would have got over the last ``look_rows`` of
    # them. Where those verdicts show neither a fixed length nor the drafter's confident tokens paying
    # by ``look_back_margin``, the pause starts again without a probe's drafts and verifications;
    # otherwise the probe follows. Off: every pause ends with a probe (``AdaptiveVariant.look_back``).
    look_back: bool = True
    look_rows: int = 16
    look_back_margin: float = 1.1
    # A pause's look back happens only where the target was sure of the tokens written during the pause
    # (the mean of its top probability at each step's first row, over the last ``look_rows`` of them, at
    # least ``LOOK_CONFIDENCE``, as for a hold's look); otherwise the pause waits ``first_probe_tokens``
    # more and asks again. A look costs a catch-up batch and its rows, two plain steps or more where a
    # batch of two costs 1.7x one, and text the target is unsure of (a story) is text the drafter seldom
    # guesses. Off: a pause always ends with its look (``adaptive-alwayslook``).
    sure_look: bool = True
    _sure: deque[float] = field(default_factory=deque)  # the target's confidence over this pause
    # A reply that drafts by lookup alone holds the draft model back (``hold``): it sits out the
    # reply's first tokens, then looks back over them as a pause does, on a margin of its own.
    _look_rows_now: int = 0  # the next look back's rows (``look_rows``, or a hold's)
    _look_margin_now: float = 0.0  # ... and the gain it needs for a probe to follow
    _held: bool = False  # the pause is a hold (``hold``), not a measured loss
    # The tokens after a draft's first priced with an offset of their own (``ConversationCalibration``).
    later: bool = False
    # A lookup draft beside the draft model is planned on the costs (``CostStopRule.plan_lookup``).
    plan_lookup: bool = True
    # Opt-in record of every decision (engine/decision_trace.py); None: nothing is kept.
    trace: DecisionTrace | None = None

    _n: int = 0
    _steps: int = 0
    _spec_steps: int = 0
    _window: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=32))
    _spec_gain: float | None = None  # measured speculative speed / plain speed over the window
    _rate: float | None = None  # measured speculative tokens per second over the window
    _acc_rate: float | None = None
    _paused_left: int = 0
    _backoff: int = 1
    _reason: str = ""  # what the status shows while paused: why (``_why``), then what comes next
    _why: str = ""  # what paused it, without what comes next (``_say``)
    _pause_gain: float | None = None
    _next_plain: bool = True  # a plain step measures plain speed (first step, if not yet measured)
    # Looking at the next token costs a drafter pass even when nothing is worth drafting. Per
    # conversation, the seconds the recent looks saved against plain decoding (a moving average);
    # while they lose, a few steps skip the look (plain steps; the drafter catches up in one batch).
    look_alpha: float = 0.2
    max_skip: int = 8
    # A look that paid does not end the skipping, the average alone decides, as before
    # (``AdaptiveVariant.sticky_skip``).
    sticky_skip: bool = False
    # Which clear losses in the first ``warmup_steps`` pause at once (``early_gain``). "skips": until the
    # measured costs show that the drafter can pay well (``DRAFT_MODEL_MIN_BEST``, the curve known) any
    # such loss; past that, a loss in a reply's first steps is the text (a sentence before the code),
    # which skipped looks sit out step by step, and it pauses only where a look still loses after the
    # skips have run their longest (``max_skip``): a sentence is over by then, a story is not. "cost":
    # the skipped looks go on to the warm-up's end, whose judgement pauses text that keeps losing (the
    # rule before). "always": any clear early loss (issue 27's first rule); "never": none, for
    # measurement (``AdaptiveVariant.early``).
    early_pause: EarlyPause = "skips"
    _look_saved: float | None = None
    _skip_left: int = 0
    _skip_len: int = 0
    _lost_after_longest: bool = False  # the last look lost after skips had run their longest
    _conversation: int = 0
    # Per recent drafting step of the model drafter: (tokens accepted in a row, 1 if a rejection
    # ended the run else 0): the run is known to end where verification rejected a token (a drafted
    # one, or the declined token judged after a draft accepted whole), else it is only known to be
    # at least as long (censored).
    _runs: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=16))
    # The recent steps the stop rule drafted alone (the floor kept no token): (tokens, seconds).
    _rule_alone: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=16))
    _declined_hit: float | None = None
    _declined_conf: float = 0.0
    _floor_now: int = 0
    _probe_left: int = 0  # probe steps still to draft
    _paused_once: bool = False  # this conversation has paused on a measured loss
    _cost_pause: bool = False  # the pause (or the probe ending it) came from the costs, not a measured loss
    _decisions: list[TokenDecision] = field(default_factory=list)
    _state: str = "draft"
    _looking: bool = False  # the next step looks back on the pause that just ended
    # The target's confidence at a step's first row against whether the drafter's first token was
    # accepted there: the chance that the drafter agrees, starting from the confidence itself.
    _target_calibration: Calibration = field(default_factory=Calibration)
    _heard: deque[float] = field(default_factory=deque)  # the target's confidence, this pause's plain steps
    # This conversation's calibration, starting from the pair's: a drafter can be
    # confidently wrong on one kind of text (its own equally good variant of some code)
    # and right on another; the conversation's evidence soon outweighs the pair's.
    _calibration: Calibration = field(init=False)

    @classmethod
    def for_variant(cls, variant: AdaptiveVariant, cost: CostModel, **kwargs: Any) -> AdaptivePolicy:
        """The policy of ``variant`` (the default, or one kept to measure beside it)."""
        before = variant.previous
        return cls(cost, floor=variant.floor, probe=not before, charge_catch_up=not before,
                   listen=variant.listen, sticky_skip=variant.sticky_skip, early_pause=variant.early,
                   look_back=variant.look_back and not before, later=variant.later,
                   sure_look=variant.sure_look, plan_lookup=variant.plan_lookup, **kwargs)

    def __post_init__(self) -> None:
        self._calibration = ConversationCalibration(self.cost.calibration_for(self.source), later=self.later)
        self._runs = deque(maxlen=self.floor_steps)
        self._heard = deque(maxlen=self.listen_tokens)
        self._sure = deque(maxlen=self.look_rows)
        self._look_rows_now, self._look_margin_now = self.look_rows, self.look_back_margin
        self._n = max(1, min(self.start, self.max_len))
        self._next_plain = not self.cost.ready()
        self._conversation = self.cost.new_conversation()
        if self.confident and self.cost.calibrated:
            # The cost curve is this machine's own (calibrated at load or saved): where even the
            # drafter's surest tokens cannot pay on it, start paused instead of learning at a loss.
            best = self.cost.best_case_gain(self.source)
            if best is not None and best < CANNOT_PAY:
                self._pause_at_most(best, first=self._probes)
                return
        verdict = self.cost.losing_verdict(self.source)
        if verdict is not None and self.cost.ready():
            # The last two conversations lost. If that was the text (stories after code),
            # this one measures for itself; if even the drafter's surest tokens cannot pay on
            # this machine, it starts paused.
            best = self.cost.best_case_gain(self.source) if self.confident else None
            if best is None or best < 0.97:
                self._pause(*verdict)

    # -- policy -----------------------------------------------------------------------------
    def draft_length(self) -> int:
        self._floor_now = self._floor()
        self._decisions = []
        self._declined_hit = None
        if self._looking:  # a plain step, on which the drafter looks back on the pause (``look_back``)
            self._state = "look back"
            return 0
        # A look is skipped on step times only where the verdicts prove no fixed length pays (the
        # floor's evidence, which no busy moment changes; see ``_judge``).
        skip = self._skip_left > 0 and self._floor_now == 0 and self._proven_gain() < self.floor_margin
        if self._paused_left > 0 or self._next_plain or (skip and self._probe_left == 0):
            self._state = ("paused" if self._paused_left > 0 else "plain" if self._next_plain else "skip")
            return 0
        if self._probe_left > 0:
            self._floor_now = max(self._floor_now, min(self.probe_len, self.max_len))
            self._state = "probe"
            return self.max_len
        self._state = "draft"
        return self.max_len if self.confident else self._n

    def acceptance(self) -> float | None:
        """The chance per token that the drafter's next token is accepted once those before it were,
        from the recent steps' verdicts (a geometric run's estimate: tokens accepted over tokens
        accepted plus runs ended by a rejection; a run still unended counts its tokens only), with a
        weak prior of 2 accepted to 1 rejected; None before ``floor_min_steps`` steps."""
        if len(self._runs) < self.floor_min_steps:
            return None
        accepted = sum(a for a, _ in self._runs)
        ended = sum(r for _, r in self._runs)
        return (accepted + 2.0) / (accepted + ended + 3.0)

    def _floor(self) -> int:
        """The shortest draft for the next step: the fixed length the recent verdicts prove fastest
        on the measured costs, when it beats plain decoding by ``floor_margin``; 0 otherwise.

        The stop rule prices each token from the drafter's confidence, calibrated; where that
        confidence understates the drafter (unsure but right) or a cost is misjudged, it drafts too
        little, and its own drafts teach it little (a token never drafted is never judged). The
        floor needs no confidence: it counts what verification accepted. Tokens it drafts are
        judged too, so a floor set too high by a run of easy tokens is soon lowered again by their
        rejections (it explores by construction), and on text the drafter cannot guess the
        acceptance falls below what pays, and the floor is 0.
        """
        if not self.floor or not self.confident:
            return 0
        acceptance = self.acceptance()
        look_s = self.cost.draft_token_s.get(self.source)
        if acceptance is None or look_s is None:
            return 0
        if not self.cost.calibrated and self.cost.verify.counts.get(2, 0) < 3:
            return 0
        length, gain = proven_length(acceptance, self.cost.t_verify, look_s, self.max_len)
        return length if gain >= self.floor_margin * max(1.0, self._rule_gain() or 0.0) else 0

    def _proven_gain(self) -> float:
        """The speed-up over plain decoding of the fixed length the recent verdicts prove, on the
        measured costs; 1.0 without the floor or without enough evidence."""
        acceptance = self.acceptance() if self.floor and self.confident else None
        look_s = self.cost.draft_token_s.get(self.source)
        if acceptance is None or look_s is None:
            return 1.0
        return proven_length(acceptance, self.cost.t_verify, look_s, self.max_len)[1]

    def _rule_gain(self) -> float | None:
        """The measured speed-up of the recent steps the stop rule drafted alone (None: too few):
        where the rule measurably does better than the proven fixed length, the floor stays out."""
        t1 = self.cost.t_verify(1)
        if t1 is None or len(self._rule_alone) < self.floor_min_steps:
            return None
        seconds = sum(s for _, s in self._rule_alone)
        return sum(t for t, _ in self._rule_alone) / seconds * t1 if seconds > 0 else None

    def stop_rule(self) -> CostStopRule | None:
        t1 = self.cost.t_verify(1)
        if not self.confident or t1 is None:
            return None
        # Time is priced at the better of plain speed and speculation's over the window, once the
        # window holds enough steps: one lucky draft accepted whole would price every token too dear.
        rate = self._rate if len(self._window) >= self.rate_steps else None
        value = max(1.0 / t1, rate or 0.0)
        return CostStopRule(self.cost, self._calibration, value, self.cost.draft_token_s.get(self.source),
                            floor=self._floor_now, floor_p_min=self.floor_p_min, log=self._decisions,
                            lookup_planned=self.plan_lookup)

    @property
    def paused(self) -> bool:
        return self._paused_left > 0

    @property
    def reason(self) -> str:
        return self._reason if self._paused_left > 0 else ""

    @property
    def paused_speedup(self) -> float | None:
        return self._pause_gain if self._paused_left > 0 else None

    def resume(self) -> None:
        """The user turned speculation back on: end a pause now and measure afresh.

        Without this a chat paused before the user switched speculation off and on again stayed
        paused for the rest of its retry wait, and turning it on changed nothing the user could see.
        """
        if self._paused_left > 0:
            self._paused_left = 0
            self._held = False
            self._backoff = 1
            self._reason = self._why = ""
            self._pause_gain = None
            self._cost_pause = False
        self._fresh_window()

    def _fresh_window(self) -> None:
        self._spec_steps = 0
        self._spec_gain = None
        self._rate = None
        self._window.clear()
        self._n = max(1, min(self._n, 3))
        self._look_saved, self._skip_left, self._skip_len = None, 0, 0
        self._lost_after_longest = False

    @property
    def speedup(self) -> float | None:
        """Measured speculative speed over plain speed, over the recent window."""
        return self._spec_gain

    def observe(
        self, drafted: int, accepted: int, draft_s: float, verify_s: float, source: str,
        confidence: Sequence[float] = (), catch_up_s: float = 0.0, passes: int | None = None,
    ) -> None:
        self._steps += 1
        if self.trace is not None:
            predicted_verify = self.cost.t_verify(drafted + 1)
            per_token = self.cost.draft_token_s.get(source)
            predicted_draft = drafted * per_token if per_token is not None else None
        # Steps where the rule drafted nothing count too (their declined first token is judged):
        # leaving them out would estimate the acceptance from the sure tokens alone.
        if self.confident and source == self.source and (drafted > 0 or self._declined_hit is not None):
            if accepted < drafted:
                self._runs.append((accepted, 1))
            elif self._declined_hit is not None:
                hit = self._declined_hit >= 0.5
                self._runs.append((accepted + int(hit), int(not hit)))
            else:
                self._runs.append((accepted, 0))
        seconds = draft_s + verify_s + (catch_up_s if self.charge_catch_up else 0.0)
        if source and not any(d.floor for d in self._decisions):
            self._rule_alone.append((accepted + 1, seconds))
        probing = self._state == "probe" and source == self.source
        self._observe(drafted, accepted, draft_s, verify_s, source, confidence, seconds, passes, catch_up_s)
        if probing:
            self._probe_left -= 1
            if self._probe_left == 0:
                self._end_probe()
        if self.trace is not None:
            self.trace.add(StepRecord(
                self._steps, self._state if source or self._state != "draft" else "plain", self._floor_now,
                probing, tuple(self._decisions), drafted, accepted, source, draft_s, verify_s,
                predicted_verify, predicted_draft,
                (self._declined_conf, self._declined_hit) if self._declined_hit is not None else None,
                self._calibration.shift.offset if isinstance(self._calibration, ConversationCalibration)
                else 0.0, self._spec_gain, self.reason, catch_up_s))
        self._decisions = []
        self._declined_hit = None

    def _observe(
        self, drafted: int, accepted: int, draft_s: float, verify_s: float, source: str,
        confidence: Sequence[float], seconds: float, passes: int | None = None, catch_up_s: float = 0.0,
    ) -> None:
        self.cost.observe_verify(drafted + 1, verify_s)
        if not source:  # a plain step: the drafter was not asked
            self._next_plain = False
            if self._skip_left > 0:
                self._skip_left -= 1
            self.sat_out(1)
            return
        # The drafter was asked. Even a step where it drafted nothing (nothing was worth
        # its cost) paid for keeping it in step: that is part of speculation's speed.
        self._spec_steps += 1
        if drafted > 0:
            if confidence and source == self.source:
                self._observe_passes(source, drafted, draft_s, passes, catch_up_s)
                self.cost.calibration_for(source).observe(confidence, accepted)
                self._calibration.observe(confidence, accepted)
            if not self.confident and source == self.source:
                if accepted == drafted and drafted >= self._n:
                    self._n = min(self.max_len, 2 * self._n)
                elif accepted < drafted:
                    self._n = max(1, accepted + 1)
            self._acc_rate = ewma(self._acc_rate, accepted / drafted, 0.1)
        if self.confident and source == self.source:
            self._judge_look(accepted, seconds)
        self._update(accepted + 1, seconds)

    def _observe_passes(self, source: str, drafted: int, draft_s: float, passes: int | None,
                        catch_up_s: float) -> None:
        """Time the drafter's passes: ``draft_token_s`` is what one drafted token costs, a single-token
        pass each, the first included (the pass that reads the target's last token). A draft whose
        first token came out of a catch-up batch (after a draft accepted whole the drafter is two
        tokens behind, and reads them in one batch, timed apart as a catch-up) made one pass fewer than
        it has tokens; counted per token, a one-token draft so timed its drafter as free, and on a
        curve where most drafts are that short the looks were priced at a fraction of their cost (the
        drafter's best case, the first token's price, the floor's proof). So the seconds are divided
        by the passes; a draft that made none with its token from a catch-up times nothing. Lookup
        makes no passes and no catch-up: its drafts are free, and timed so, per token."""
        if passes is not None and passes > 0:
            self.cost.observe_draft(source, passes, draft_s)
        elif passes is None or catch_up_s <= 0.0:
            self.cost.observe_draft(source, drafted, draft_s)

    def observe_declined(self, source: str, confidence: float, hit: float) -> None:
        if self.confident and source == self.source:
            self._declined_hit, self._declined_conf = hit, confidence
            self.cost.calibration_for(source).observe_one(confidence, hit)
            self._calibration.observe_one(confidence, hit)

    @property
    def listens(self) -> bool:
        return (self.listen or self._hears_pause) and self._probes

    @property
    def _hears_pause(self) -> bool:
        """A pause whose end waits for a sure target is running: its plain steps' confidence is kept."""
        return self._paused_left > 0 and self._gates_sure()

    def observe_target(self, confidence: float, source: str, first_accepted: bool | None) -> None:
        if self._hears_pause and first_accepted is None:
            self._sure.append(confidence)
        if not (self.listen and self._probes):
            return
        if first_accepted is not None:
            if source == self.source:
                self._target_calibration.observe_one(confidence, 1.0 if first_accepted else 0.0)
            return
        if self._paused_left <= 0:
            return
        self._heard.append(confidence)
        if len(self._heard) < self.listen_tokens:
            return
        look_s = self.cost.draft_token_s.get(self.source)
        if look_s is None:
            return
        heard = sum(self._target_calibration.q(c) for c in self._heard) / len(self._heard)
        if proven_length(heard, self.cost.t_verify, look_s, self.max_len)[1] >= self.floor_margin:
            # The text the target writes now is text the drafter guesses: probe instead of waiting.
            self._paused_left = 0
            self._end_pause()

    def _end_pause(self) -> None:
        """A pause is over (its wait ran out, or the target said the text got easier): look back on
        it, or probe again, with fresh evidence. A pause on the costs alone always probes: its probe
        re-measures the verification costs, which looking back does not."""
        if self._probes and self._gates_sure() and target_unsure(self._sure):
            # The target was unsure of what it wrote: text the drafter seldom guesses; wait, not look.
            self._sure.clear()
            self._paused_left = self.first_probe_tokens
            self._say(self._why or "speculation paused",
                      f"the text is still hard to guess, looking again in {self._paused_left} tokens")
            return
        self._sure.clear()
        self._fresh_window()
        if self._probes:
            if self.look_back and not self._cost_pause:
                self._looking = True
            else:
                self._probe_left = self.probe_steps

    def _gates_sure(self) -> bool:
        """Whether this pause's end waits for a sure target (``sure_look``). A hold's tokens are heard by
        ``SwitchingPolicy``, not by this policy (lookup's drafts them), which gates the hold's look itself."""
        return self.sure_look and self.look_back and not self._cost_pause and not self._held

    def look_back_rows(self) -> int:
        return self._look_rows_now if self._looking else 0

    @property
    def looking(self) -> bool:
        """The next step looks back on the pause that just ended."""
        return self._looking

    def hold(self, tokens: int, rows: int, margin: float) -> None:
        """This reply drafts by lookup alone (``SwitchingPolicy``): the draft model sits out its first
        ``tokens`` (a pause, longer if one is already running), then looks back over ``rows`` of them
        and probes where drafting would have paid by ``margin``. A pause on the costs alone is left as
        it is (its probe re-measures them)."""
        self._look_rows_now, self._look_margin_now = rows, margin
        if self._cost_pause and self._paused_left > 0:
            return
        self._looking = False
        self._probe_left = 0
        if self._paused_left < tokens:
            self._paused_left = tokens
            self._held = True
            self._reason = self._why = ""
            self._pause_gain = None

    def release_hold(self) -> None:
        """This reply drafts with the draft model: a hold left over from a reply that drafted by lookup
        alone ends without a look (a pause after a measured loss runs on), and looks back as usual."""
        self._look_rows_now, self._look_margin_now = self.look_rows, self.look_back_margin
        if self._held:
            self._held = False
            self._paused_left = 0
            self._fresh_window()

    def sat_out(self, tokens: int) -> None:
        """``tokens`` were written without this policy's drafter (a plain step's one, or another
        drafter's, ``SwitchingPolicy``): they count towards a pause's wait, which ends after the last."""
        if self._paused_left > 0:
            self._paused_left = max(0, self._paused_left - tokens)
            if self._paused_left == 0:
                self._held = False
                self._end_pause()

    def observe_look_back(self, looked: Sequence[tuple[float, bool]]) -> None:
        """The verdicts drafting would have had over the pause's last tokens (``look_back``): each
        position is a draft that could have started there, accepted for as many tokens as the
        drafter's choices run on unbroken from it (the last ones cut off by the end of the look). They
        join the floor's evidence, where they outnumber the older verdicts that paused it, and the
        conversation's calibration. The probe follows only where they show drafting paying by
        ``look_back_margin`` on the measured costs, at a fixed length (the floor's proof) or drafting
        the drafter's confident tokens (``_looked_gain``, what the stop rule earns on chat); a
        handful of positions is a noisy measure, and a probe on text that still loses costs most of
        what the look saved. Otherwise the pause starts again, longer. Too few of them (the drafter
        could not say: sampling) leave it to the probe."""
        self._looking = False
        if len(looked) < self.floor_min_steps:
            self._probe_left = self.probe_steps
            return
        self._runs.extend(look_back_runs(looked))
        for confidence, hit in looked:
            self._calibration.observe_one(confidence, 1.0 if hit else 0.0)
        gain = max(self._proven_gain(), self._looked_gain(looked))
        if gain >= self._look_margin_now:
            self._probe_left = self.probe_steps
            return
        self._pause(gain, self.acceptance() or 0.0)
        # What paused it is what drafting would have got, not a speed measured: no figure to show as one.
        self._pause_gain = None
        self._say(f"speculation paused: over the last {len(looked)} tokens drafting would have reached "
                  f"{gain:.2f}x at best", f"retrying in {self._paused_left} tokens")

    def _looked_gain(self, looked: Sequence[tuple[float, bool]]) -> float:
        """The speed-up over plain decoding that drafting the drafter's confident tokens would have
        had over the looked-back positions, step by step on the measured costs: from each step's
        start, the tokens on at least ``floor_p_min`` confidence (up to ``max_len``), accepted while
        the drafter's choices were the text; every step pays one look at least. What the stop rule
        earns on chat, where the drafter is sure of some tokens and not of others, and a fixed length
        does not; 1.0 where a cost is unknown."""
        t1 = self.cost.t_verify(1)
        look_s = self.cost.draft_token_s.get(self.source)
        if t1 is None or look_s is None:
            return 1.0
        tokens, seconds, i, n = 0, 0.0, 0, len(looked)
        while i < n:
            k = 0
            while i + k < n and k < self.max_len and looked[i + k][0] >= self.floor_p_min:
                k += 1
            accepted = 0
            while accepted < k and looked[i + accepted][1]:
                accepted += 1
            tv = self.cost.t_verify(k + 1)
            if tv is None:
                return 1.0
            tokens += accepted + 1
            seconds += max(k, 1) * look_s + tv
            i += accepted + 1
        return tokens * t1 / seconds if seconds > 0 else 1.0

    def _judge_look(self, accepted: int, seconds: float) -> None:
        """After a step that paid for a drafter pass: did looking pay? Where the recent looks lost
        (text the drafter cannot guess: chat, stories), skip the next 1, 2, 4 .. ``max_skip`` looks.

        A look that found nothing worth drafting still cost its drafter pass: on an F16 target that
        is a quarter of a plain step. The pause (``_judge``) needs a window of steps and then stops
        for a hundred tokens or more; this acts within a reply, step by step, and a look that pays
        again ends it.
        """
        self._lost_after_longest = False
        t1 = self.cost.t_verify(1)
        if t1 is None or self.cost.draft_token_s.get(self.source, 0.0) <= 0.0:
            return
        if not self.cost.calibrated and self.cost.verify.counts.get(2, 0) < 3:
            return  # the short drafts that measure the curve come first
        saved = (accepted + 1) * t1 - seconds  # against plain steps writing the same tokens
        self._look_saved = ewma(self._look_saved, saved, self.look_alpha)
        self._lost_after_longest = saved <= 0.0 and self._skip_len >= self.max_skip
        if saved > 0.0 and not self.sticky_skip:
            # This look paid: the next step looks again. The average remembers the looks that lost,
            # so one that loses next starts skipping again at one step; the skips grow only while
            # the looks keep losing. (An edit opens with a sentence the drafter cannot guess and
            # then copies code: skips grown on the opening, kept by an average that one good look
            # barely moves, sat out the copy.)
            self._skip_len = 0
        elif self._look_saved < 0.0:
            self._skip_len = min(self.max_skip, max(1, 2 * self._skip_len))
            self._skip_left = self._skip_len
        else:
            self._skip_len = 0

    def _pause(self, gain: float, acceptance: float, short: bool = False) -> None:
        """Pause after a measured loss, for ``retry_tokens`` (doubling after each), or, ``short``, for
        ``first_probe_tokens`` without doubling."""
        self._cost_pause = False
        self._probe_left = 0
        tokens = self._wait(short)
        self._say(f"speculation paused: {gain:.2f}x at acceptance {acceptance:.2f}",
                  f"retrying in {tokens} tokens")
        self._pause_gain = gain

    def _say(self, why: str, then: str) -> None:
        """The pause's reason: what paused it, kept apart (a wait that runs on says it again with what
        comes next), then what comes next."""
        self._why = why
        self._reason = f"{why}; {then}"

    def _pause_at_most(self, best: float, first: bool = False) -> None:
        """Pause on the costs alone: even the drafter's surest tokens cannot pay on them. The first
        such pause of a conversation is short (``first_probe_tokens``): the costs may have been
        measured through a busy moment, and the probe that ends it measures again."""
        tokens = self._wait(first)
        self._say(f"speculation paused: on this machine's measured costs the drafter can reach {best:.2f}x "
                  f"at best", f"retrying in {tokens} tokens")
        self._cost_pause = True

    def _wait(self, short: bool) -> int:
        """Start a pause's wait and return its plain tokens: ``first_probe_tokens``, or ``retry_tokens``
        doubled after each such wait."""
        tokens = self.first_probe_tokens if short else self.retry_tokens * self._backoff
        self._paused_left = tokens
        self._held = False
        self._heard.clear()
        self._sure.clear()
        if not short:
            self._backoff = min(self._backoff * 2, 8)
        return tokens

    def _end_probe(self) -> None:
        """The probe's steps are judged. Speculation goes on where its verdicts prove a fixed length
        that pays on the measured costs (the floor then keeps it), or where those costs, re-measured
        by the probe's own passes, no longer say the drafter cannot pay (the policy then judges as
        usual). A pause on the costs that the probe confirms starts again; a pause after a measured
        loss leaves the verdict to the usual judgement of the window."""
        cost_pause, self._cost_pause = self._cost_pause, False
        if not cost_pause or self._proven_gain() >= self.floor_margin:
            return
        best = self.cost.best_case_gain(self.source)
        if best is not None and best < CANNOT_PAY:
            self._pause_at_most(best)

    def _update(self, tokens: int, seconds: float) -> None:
        t1 = self.cost.t_verify(1)
        self._window.append((tokens, seconds))
        total_tokens = sum(t for t, _ in self._window)
        total_seconds = sum(s for _, s in self._window)
        if total_seconds > 0:
            self._rate = total_tokens / total_seconds
            self._spec_gain = self._rate * t1 if t1 is not None else None
        if self._steps % self.calibrate_every == 0:
            self._next_plain = True
        if self._spec_gain is None or t1 is None or self._spec_steps < self.early_steps:
            return
        # Judged robustly: one pass slowed by a busy moment, or one long draft rejected at
        # its first token, must not pause speculation that pays; so the verdict is the
        # better of the window's speed-up with and without its slowest step.
        slowest = max(self._window, key=lambda w: w[1])
        rest = total_seconds - slowest[1]
        without = (total_tokens - slowest[0]) / rest * t1 if rest > 0 else 0.0
        gain = max(self._spec_gain, without)
        if self._spec_steps < self.warmup_steps:
            if gain < self.early_gain and self._pause_early():  # a clear loss needs less evidence
                self._judge(gain, pause=True)
            return
        self._judge(gain, pause=gain < 0.97)
        if gain >= 1.0:
            self._backoff = 1

    def _pause_early(self) -> bool:
        """Whether a clear loss in the reply's first steps pauses at once (``early_pause``)."""
        if self.early_pause == "never":
            return False
        if self.early_pause == "always" or not self._pays_well():
            return True
        return self.early_pause == "skips" and self._lost_after_longest

    def _pays_well(self) -> bool:
        """Whether the measured costs say the drafter can pay well here (its best case at least
        ``DRAFT_MODEL_MIN_BEST``), on a curve known well enough to judge from (``CostModel.curve_known``)."""
        if not self.cost.curve_known():
            return False
        best = self.cost.best_case_gain(self.source)
        return best is not None and best >= DRAFT_MODEL_MIN_BEST

    @property
    def _probes(self) -> bool:
        """Pauses end with a probe (it drafts under the floor's rule, so the floor and a drafter's
        confidence are needed)."""
        return self.probe and self.floor and self.confident

    def _judge(self, gain: float, pause: bool) -> None:
        """Leave this conversation's measured verdict for the next ones; pause if it lost."""
        acceptance = self._acc_rate or 0.0
        self.cost.record_verdict(self.source, self._conversation, gain, acceptance)
        if pause and self._proven_gain() >= self.floor_margin:
            # The step times say speculation loses, but the verdicts (which no busy moment
            # changes) and the measured cost curve prove a fixed length that pays: on a shared or
            # throttled machine the times are the noisy evidence, so speculation goes on at the floor.
            return
        if pause:
            # The first pause of a conversation is short: it was judged on the reply's first steps,
            # and the start of a reply is often unlike the rest (a sentence of its own before the
            # code or the list the drafter then guesses well). A wait of ``retry_tokens`` would cover
            # most replies; the probe that ends a short one judges the text as it is by then.
            # Only where the measured costs say the drafter can pay well at all: on a target where
            # even its surest tokens barely pay, a second look costs more than a hard start loses.
            short = self._probes and not self._paused_once and self._pays_well()
            self._paused_once = True
            self._pause(gain, acceptance, short=short)


# A reply that drafts by lookup alone holds the draft model back for this many tokens, then looks back
# over them (``AdaptivePolicy.hold``): where drafting with the draft model would have paid by
# ``HOLD_MARGIN`` it takes over. The margin is above a pause's look back (``look_back_margin``): the
# draft model was set aside because it pays little here. Both were chosen on the builtin prompts alone:
# first by the study before this rule (tools/adaptive_replay.py ``--switch``, three curves of the fifth
# machine), then in a grid with ``LOOK_CONFIDENCE`` (``--hold``, its Q8_0 curves rebuilt;
# docs/BENCHMARKS.md "Issue 27 on a sixth machine").
HOLD_TOKENS = 24
HOLD_MARGIN = 1.3
# ... and looks only where the target was sure of what it wrote over the hold (the mean of its top
# probability at each step's first row): the look's catch-up and rows cost a few plain steps, and text the
# target is unsure of (chat, stories) is text the drafter guesses too seldom to take over. Otherwise
# the hold starts again, and the look waits for a stretch the target is sure of (the code after an
# explanation). On the builtin prompts the code replies where the draft model paid had 0.90-0.92 over
# their first 24 tokens, chat 0.60-0.82, stories 0.47-0.75 (tools/adaptive_replay.py recordings).
LOOK_CONFIDENCE = 0.85


def target_unsure(heard: Sequence[float]) -> bool:
    """Whether the target was unsure of the tokens it wrote (the mean of its top probability at each
    step's first row under ``LOOK_CONFIDENCE``): a look back over them is not worth its cost. False where
    nothing was heard."""
    return bool(heard) and sum(heard) / len(heard) < LOOK_CONFIDENCE


@dataclass(frozen=True)
class ReplyDrafting:
    """Which drafters one adaptive reply drafts with (``plan_drafting``)."""

    lookup_first: bool  # lookup alone from the reply's start (the draft model's best case is under the line)
    switching: bool  # both drafters in the reply, handing over within it (``SwitchingPolicy``)
    best: float | None  # the draft model's best case on the measured costs (None: not known yet)


def plan_drafting(cost: CostModel, choice: DrafterChoice, source: str,
                  variant: AdaptiveVariant) -> ReplyDrafting:
    """The drafters of the next adaptive reply with a draft model (``Engine._choose_drafter``; the
    replay's pipeline follows it). Lookup alone starts a reply whose draft model's best case is under
    ``DRAFT_MODEL_MIN_BEST`` (``DrafterChoice``); there the draft model may take over within the reply
    (``variant.model_look``), where a hold's look could show it paying (``hold_can_pass``). A reply that
    starts with the draft model drafts by lookup during its pauses only with ``variant.lookup_in_pause``."""
    best = draft_model_best_case(cost, source, variant.learnt_curve)
    provisional = variant.provisional_choice and not cost.sure_known(source)
    if choice.choose_lookup(best, cost if variant.keep_choice else None, provisional):
        assert best is not None
        return ReplyDrafting(True, variant.model_look and hold_can_pass(cost, source), best)
    return ReplyDrafting(False, variant.lookup_in_pause, best)


def hold_can_pass(cost: CostModel, source: str) -> bool:
    """Whether a hold's look back could reach ``HOLD_MARGIN`` on the measured costs at all: drafting
    ``DRAFT_TOKENS_MAX`` tokens all accepted (text the drafter guesses whole) pays that much. Where it
    cannot (the draft model costs most of a target pass), the draft model neither reads the prompt nor
    looks: the reply drafts by lookup alone, as before."""
    look_s = cost.draft_token_s.get(source)
    t1 = cost.t_verify(1)
    tv = cost.t_verify(DRAFT_TOKENS_MAX + 1)
    if look_s is None or t1 is None or tv is None:
        return False
    return (DRAFT_TOKENS_MAX + 1) * t1 / (DRAFT_TOKENS_MAX * look_s + tv) >= HOLD_MARGIN


class SwitchingPolicy:
    """Adaptive speculation with both drafters in one reply: the draft model's policy and lookup alone's
    (an ``AdaptivePolicy`` each, kept per conversation), of which lookup's drafts whenever the draft
    model's is paused. ``use_lookup`` tells the drafter (``draft_sources.SwitchingDrafter``) which one
    drafts each step.

    A reply that starts with lookup alone (``lookup_first``: the draft model pays little on this machine)
    holds the draft model back for its first ``HOLD_TOKENS`` tokens (``AdaptivePolicy.hold``); its
    drafter reads the prompt with the target, so that it can then look back over those tokens at the
    price of one batch: where drafting them would have paid by ``HOLD_MARGIN`` (code), the draft model
    probes and drafts on under its own policy, seeded with the look's verdicts; otherwise (chat, stories)
    its pause runs on and lookup drafts. Measured on one machine's curves, a reply drafting by lookup
    alone left code at 0.78-0.87 of the best fixed draft length, and neither drafter chosen for a whole
    reply met the goal in every category: the choice has to follow the text.
    """

    def __init__(self, model: AdaptivePolicy, lookup: AdaptivePolicy, use_lookup: Callable[[bool], None],
                 lookup_first: bool, model_name: str, lookup_reason: str = "") -> None:
        self.model, self.lookup = model, lookup
        self._use_lookup = use_lookup
        self.model_name, self.lookup_reason = model_name, lookup_reason
        self.lookup_first = lookup_first
        # The target's confidence at each recent step while the draft model sat out (``LOOK_CONFIDENCE``).
        self._heard: deque[float] = deque(maxlen=HOLD_TOKENS)
        if lookup_first:
            model.hold(HOLD_TOKENS, HOLD_TOKENS, HOLD_MARGIN)
        else:
            model.release_hold()
        self._step = self._current()

    def _holding(self) -> bool:
        """A reply that set out with lookup alone, the draft model sitting out."""
        return self.lookup_first and self.model.paused

    def _current(self) -> AdaptivePolicy:
        return self.lookup if self.model.paused else self.model

    @property
    def drafter(self) -> str:
        """The drafter drafting now, by name."""
        return self.lookup.source if self._current() is self.lookup else self.model_name

    def draft_length(self) -> int:
        model = self.model
        if self.lookup_first and model.looking and self._heard:
            unsure = target_unsure(self._heard)
            self._heard.clear()
            if unsure:  # not worth a look: hold again
                model.hold(HOLD_TOKENS, HOLD_TOKENS, HOLD_MARGIN)
        step = self._step = self._current()
        self._use_lookup(step is self.lookup)
        return step.draft_length()

    def observe(
        self, drafted: int, accepted: int, draft_s: float, verify_s: float, source: str,
        confidence: Sequence[float] = (), catch_up_s: float = 0.0, passes: int | None = None,
    ) -> None:
        step = self._step
        step.observe(drafted, accepted, draft_s, verify_s, source, confidence, catch_up_s, passes)
        if step is self.lookup:
            self.model.sat_out(accepted + 1)

    def stop_rule(self) -> StopRule | None:
        return self._step.stop_rule()

    def observe_declined(self, source: str, confidence: float, hit: float) -> None:
        self._step.observe_declined(source, confidence, hit)

    @property
    def listens(self) -> bool:
        return self._holding() or self._step.listens

    def observe_target(self, confidence: float, source: str, first_accepted: bool | None) -> None:
        if self._holding():
            self._heard.append(confidence)
        if self._step.listens:
            self._step.observe_target(confidence, source, first_accepted)

    def look_back_rows(self) -> int:
        return self._step.look_back_rows()

    def observe_look_back(self, looked: Sequence[tuple[float, bool]]) -> None:
        self._step.observe_look_back(looked)

    @property
    def paused(self) -> bool:
        return self._current().paused

    @property
    def reason(self) -> str:
        """Why the drafting is as it is now, in words ("" when the draft model drafts unpaused)."""
        if self._current() is self.model:
            return ""
        if self.lookup.paused:
            return self.lookup.reason
        if self.lookup_first or not self.model.reason:  # lookup drafts, as the reply set out to
            return self.lookup_reason
        why = self.model.reason.removeprefix("speculation paused: ")
        return f"The draft model is paused ({why}); drafts come from the conversation itself meanwhile."

    @property
    def paused_speedup(self) -> float | None:
        return self._current().paused_speedup
