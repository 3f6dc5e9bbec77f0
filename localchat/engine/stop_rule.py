"""Where a draft stops: the interface the drafters ask (``StopRule``) and adaptive speculation's
rule, priced on this machine's measured costs (``CostStopRule``).

A drafter asks its stop rule before each draft token (``take``, ``look_further``), or once for a
draft it knows whole (``plan``: n-gram lookup). ``StopRule`` is what the drafters type against
(engine/draft_sources.py), so that tools and tests can draft with rules of their own (a fixed
count, a recorder); ``CostStopRule`` is the one adaptive speculation uses (engine/adaptive.py).

Before each draft token ``CostStopRule`` weighs what the token is expected to earn against what it
costs:

- What it earns: the chance that it and every token before it in the draft are accepted. The chance
  of one token comes from the drafter's confidence in it, calibrated against what verification
  accepted (engine/calibration.py). Confidence is known per token, so runs of easy text (code, a
  closing bracket, a quoted name) draft long and uncertain tokens are not drafted at all; averages
  per draft position cannot tell the two apart.
- What it costs (engine/costs.py, measured on this machine): one drafter pass to look at the next
  token, and the extra verification time of a batch one token longer. Time is priced at the best
  rate measured (plain decoding, or speculation over the recent window): keep a token while its
  expected tokens exceed that rate times its cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from localchat.engine.calibration import Calibration
from localchat.engine.costs import CostModel
from localchat.engine.decision_trace import TokenDecision
from localchat.settings.options import DRAFT_TOKENS_MAX


class StopRule(Protocol):
    """Decides token by token how far a draft goes (adaptive speculation's is ``CostStopRule``)."""

    def take(self, position: int, confidence: float) -> bool:
        """Keep the token drafted at ``position`` (0-based), given the drafter's confidence in it?"""
        ...

    def look_further(self, position: int, decode_seconds: float) -> bool:
        """Pay one drafter pass (``decode_seconds``) to draft the token after ``position``?"""
        ...

    def plan(self, confidences: Sequence[float]) -> int:
        """How many of these already known draft tokens to keep (0: none)."""
        ...

    def plan_lookup(self, chances: Sequence[float]) -> int:
        """How many tokens of a lookup draft made beside the draft model to keep (0: none), given each
        token's chance of acceptance, those before it accepted (lookup's own record in the reply)."""
        ...


class CostStopRule:
    """Token by token: draft the next token while what it is expected to earn pays for its cost.

    Time is worth ``value`` tokens per second (the best rate measured: plain or
    speculative). Keeping the token at position k adds P_k expected tokens, where
    P_k is the product of the calibrated chances of positions 0..k, and costs
    the extra verification time of a batch one longer; looking at the next token
    costs one drafter pass plus that token's own verification increment. Easy runs
    (code, quoting) draft long, uncertain tokens are not drafted at all.
    """

    def __init__(self, cost: CostModel, calibration: Calibration, value: float,
                 look_seconds: float | None = None, floor: int = 0, floor_p_min: float = 0.5,
                 log: list[TokenDecision] | None = None, lookup_planned: bool = True) -> None:
        self.cost = cost
        self.calibration = calibration
        self.value = value
        self.look_seconds = look_seconds  # one drafter pass; None: a first token must pay alone
        # The floor (engine/adaptive.py, ``proven_length``): the first ``floor`` tokens are drafted
        # as a fixed length drafts them (the first whatever its confidence, the next while the
        # drafter's confidence is at least ``floor_p_min``), whether or not the rule says they pay.
        self.floor = floor
        self.floor_p_min = floor_p_min
        self.log = log  # the decisions, for a DecisionTrace (None: not kept)
        # A lookup draft beside the draft model is planned (``plan_lookup``); False: kept whole, as
        # before (``AdaptiveVariant.plan_lookup``).
        self.lookup_planned = lookup_planned
        self._p = 1.0  # chance that every token kept so far is accepted
        self._q = 1.0  # the guess for the next token's chance (the last kept one's, at the next position)
        self._conf = 1.0

    def take(self, position: int, confidence: float) -> bool:
        q = self.calibration.q_at(confidence, position)
        # The guess for the next token: as likely as this one, priced at the next position.
        q_next = self.calibration.q_at(confidence, position + 1)
        p = self._p * q
        cost = self.cost.extra_verify(position + 1)
        pays = p >= self.value * cost
        kept = pays or (position == 0 and self._worth_starting(q, q_next))
        floored = (not kept and position < self.floor
                   and (position == 0 or confidence >= self.floor_p_min))
        if self.log is not None:
            self.log.append(TokenDecision("take", position, confidence, q, p, cost, self.value,
                                          kept or floored, floored))
        if not (kept or floored):
            return False
        self._p, self._q, self._conf = p, q_next, confidence
        return True

    def _worth_starting(self, q: float, q_later: float) -> bool:
        """Whether a draft that starts with a token of chance ``q`` pays, if the tokens after it were
        as likely (the guess ``look_further`` makes too: ``q_later``, the same confidence priced at a
        later position), priced as a whole.

        Weighed alone, the first token must pay for the jump from a one-token pass to a two-token
        one, which on a CPU can cost as much as several tokens further on: once time is priced at
        a fast speculative rate, even a sure first token could not, and drafting stopped on easy
        text. The jump is paid once for the whole draft.
        """
        t1 = self.cost.t_verify(1)
        if t1 is None or self.look_seconds is None:
            return False
        expected, p = 0.0, 1.0
        for k in range(1, DRAFT_TOKENS_MAX + 1):
            p *= q if k == 1 else q_later
            expected += p
            tv = self.cost.t_verify(k + 1)
            if tv is None:
                return False
            if expected > self.value * (tv - t1 + (k - 1) * self.look_seconds):
                return True
        return False

    def look_further(self, position: int, decode_seconds: float) -> bool:
        cost = decode_seconds + self.cost.extra_verify(position + 2)
        pays = self._p * self._q >= self.value * cost
        floored = not pays and position + 1 < self.floor
        if self.log is not None:
            self.log.append(TokenDecision("look", position, self._conf, self._q, self._p * self._q, cost,
                                          self.value, pays or floored, floored))
        return pays or floored

    def plan(self, confidences: Sequence[float]) -> int:
        """For a draft whose tokens are all known before any is kept (lookup: free to make), how
        many of them to keep: the length whose expected extra tokens best pay for its longer
        verification, 0 when none does.

        Unlike ``take``, which weighs one token at a time, this sees the whole draft, so the jump
        from a one-token pass to a two-token one (steep on a CPU with a quantized target) is
        weighed against every token that follows it: a long copy pays where a short one cannot.
        """
        return self._plan([self.calibration.q_at(conf, k) for k, conf in
                           enumerate(confidences[:DRAFT_TOKENS_MAX])])

    def plan_lookup(self, chances: Sequence[float]) -> int:
        """As ``plan``, for a lookup draft beside the draft model, from its tokens' chances (lookup's
        record in the reply, ``CombinedDrafter.lookup_chance``): the draft model's calibration does not
        price lookup's tokens. Free to make, such a draft was kept whole before; verifying it is not
        free, and where a batch one token longer costs more than the token is likely to earn (a
        quantized target's step at five tokens, a story whose lookups keep missing) it is cut there."""
        if not self.lookup_planned:
            return len(chances)
        return self._plan(chances)

    def _plan(self, chances: Sequence[float]) -> int:
        t1 = self.cost.t_verify(1)
        if t1 is None:
            return 0
        best_k, best_gain, expected, p = 0, 0.0, 0.0, 1.0
        for k, q in enumerate(chances[:DRAFT_TOKENS_MAX], start=1):
            p *= q
            expected += p
            tv = self.cost.t_verify(k + 1)
            if tv is None:
                break
            gain = expected - self.value * max(0.0, tv - t1)
            if gain > best_gain:
                best_k, best_gain = k, gain
        return best_k
