"""How likely a draft token is to be accepted, given the drafter's confidence in it.

Adaptive speculation prices every draft token by this chance (engine/stop_rule.py). It is
learned from what verification accepted, per confidence bin:

- ``Calibration``: the pair's, shared by every conversation, kept in the saved profile
  (engine/profile.py). A bin starts from its own confidence and moves to what verification shows.
- ``Shifted``: the pair's calibration moved by one offset on the log-odds scale, fitted to a
  conversation's recent verdicts: the same confidence means different things in code and in chat.
- ``ConversationCalibration``: a conversation's own bins, starting from the pair's, shifted.

Plain numbers only: no llama.cpp, no timings (those are engine/costs.py's).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Calibration:
    """The chance that a draft token is accepted (the ones before it were) given the
    drafter's confidence in it, learned per confidence bin.

    A bin starts from its own confidence (a draft model that shares the target's
    training is roughly calibrated) and moves to what verification shows.
    """

    bins: int = 20
    prior_weight: float = 4.0
    max_count: float = 200.0  # older evidence fades: a bin weighs at most this many tokens
    # Where a bin starts: the confidence itself, or another calibration (a conversation's
    # own starts from the pair's, shifted, and moves away from it as its evidence grows).
    prior: Calibration | Shifted | None = None
    _hits: list[float] = field(default_factory=list)
    _seen: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._hits = [0.0] * self.bins
        self._seen = [0.0] * self.bins

    def _bin(self, conf: float) -> int:
        return min(self.bins - 1, max(0, int(conf * self.bins)))

    def q(self, conf: float) -> float:
        b = self._bin(conf)
        start = self.prior.q(conf) if self.prior is not None else conf
        return (self._hits[b] + self.prior_weight * start) / (self._seen[b] + self.prior_weight)

    def q_at(self, conf: float, position: int) -> float:
        """The chance for a token drafted at ``position`` (0-based) of a draft whose earlier tokens were
        accepted: the same at every position here (``ConversationCalibration`` may learn otherwise)."""
        return self.q(conf)

    def seen(self, conf: float) -> float:
        """Tokens of ``conf``'s bin that verification has judged (older ones faded)."""
        return self._seen[self._bin(conf)]

    def state(self) -> tuple[list[float], list[float]]:
        """(accepted, judged) per bin: what a saved profile keeps."""
        return list(self._hits), list(self._seen)

    def restore(self, hits: Sequence[float], seen: Sequence[float], cap: float = 50.0) -> None:
        """Start from a saved profile's evidence, each bin weighing at most ``cap`` tokens so that
        this process's own evidence can still move it."""
        if len(hits) != self.bins or len(seen) != self.bins:
            raise ValueError(f"expected {self.bins} calibration bins, got {len(hits)} and {len(seen)}")
        for b, (h, n) in enumerate(zip(hits, seen, strict=True)):
            if not (0.0 <= h <= n) or not math.isfinite(n):
                raise ValueError(f"calibration bin {b} holds {h} accepted of {n}")
            scale = min(1.0, cap / n) if n > 0 else 0.0
            self._hits[b], self._seen[b] = h * scale, n * scale

    def observe(self, confidence: Sequence[float], accepted: int) -> None:
        """Tokens before ``accepted`` were accepted, the one at ``accepted`` rejected; later ones unseen."""
        for i, conf in enumerate(confidence[: accepted + 1]):
            self.observe_one(conf, 1.0 if i < accepted else 0.0)

    def observe_one(self, conf: float, hit: float) -> None:
        """One token of confidence ``conf`` judged: ``hit`` 1 accepted, 0 rejected (or the chance
        that speculative sampling would have accepted it)."""
        b = self._bin(conf)
        if self._seen[b] >= self.max_count:
            keep = (self.max_count - 1) / self._seen[b]
            self._hits[b] *= keep
            self._seen[b] *= keep
        self._seen[b] += 1.0
        self._hits[b] += hit


class Shifted:
    """The pair's calibration moved by one offset on the log-odds scale, learned from a
    conversation's own verdicts: the prior of that conversation's bins.

    How often a drafter's tokens are accepted at a given confidence depends on the text: the
    starter's draft model sees its tokens of confidence 0.4-0.7 accepted about half the time in
    code and edits, three times in four in chat (docs/BENCHMARKS.md). Bins learn one by one, from
    the few tokens a reply puts in each; one offset learns from every token, so a chat after an
    hour of code drafts its mid-confidence tokens again within a few steps.
    """

    def __init__(self, base: Calibration, prior_sd: float = 1.0, keep: int = 64, limit: float = 3.0) -> None:
        self.base = base
        self.prior_sd = prior_sd  # how far from the pair a conversation is expected to be, in log-odds
        self.limit = limit
        self._offset = 0.0
        self._dirty = False
        self._seen: deque[tuple[float, float]] = deque(maxlen=keep)  # (the pair's log-odds, verdict)

    @property
    def offset(self) -> float:
        if self._dirty:
            self._fit()
        return self._offset

    @staticmethod
    def _logit(p: float) -> float:
        p = min(max(p, 1e-3), 1.0 - 1e-3)
        return math.log(p / (1.0 - p))

    def q(self, conf: float) -> float:
        return 1.0 / (1.0 + math.exp(-(self._logit(self.base.q(conf)) + self.offset)))

    def learn(self, conf: float, hit: float) -> None:
        """Add the verdict ``hit`` (1 accepted, 0 rejected); the offset is re-fitted when next read."""
        self._seen.append((self._logit(self.base.q(conf)), hit))
        self._dirty = True

    def _fit(self) -> None:
        """The most likely offset given the recent verdicts and a normal prior around 0 (a few
        Newton steps from the last one: once per draft, not per token)."""
        self._dirty = False
        d = self._offset
        inv_var = 1.0 / self.prior_sd**2
        for _ in range(3):
            grad, curv = -d * inv_var, inv_var
            for logit, y in self._seen:
                p = 1.0 / (1.0 + math.exp(-(logit + d)))
                grad += y - p
                curv += p * (1.0 - p)
            d = min(self.limit, max(-self.limit, d + grad / curv))
        self._offset = d


class ConversationCalibration(Calibration):
    """A conversation's calibration: per bin its own evidence, starting from the pair's
    calibration shifted by what the conversation showed so far (``Shifted``).

    ``later``: the tokens after a draft's first are priced with an offset of their own (``Shifted``
    over this calibration), learned from the verdicts on such tokens alone. The stop rule keeps a
    later token only where every chance before it is high, so the bins' errors that it keeps are
    mostly upward ones (a winner's curse), and on some text the drafter's later tokens are accepted
    less often than its first at the same confidence: the bins, learned mostly from first tokens,
    price the later ones too likely, and each step drafts a token or two more than pays."""

    def __init__(self, pair: Calibration, prior_weight: float = 8.0, max_count: float = 64.0,
                 later: bool = False) -> None:
        self.shift = Shifted(pair)
        super().__init__(prior_weight=prior_weight, max_count=max_count, prior=self.shift)
        self.later = Shifted(self) if later else None

    def q_at(self, conf: float, position: int) -> float:
        if position == 0 or self.later is None:
            return self.q(conf)
        return self.later.q(conf)

    def observe(self, confidence: Sequence[float], accepted: int) -> None:
        for i, conf in enumerate(confidence[: accepted + 1]):
            hit = 1.0 if i < accepted else 0.0
            if i > 0 and self.later is not None:
                self.later.learn(conf, hit)  # priced as it was, before this verdict moves the bins
            self.observe_one(conf, hit)

    def observe_one(self, conf: float, hit: float) -> None:
        self.shift.learn(conf, hit)
        super().observe_one(conf, hit)
