"""How many tokens to draft next: a fixed length, or one that follows what speculation earns.

``FixedPolicy`` drafts the same length every step (benchmarks, experts).

``AdaptivePolicy`` (the default) picks the draft length that maximises the
expected tokens per second from two measured models:

- acceptance (per conversation): the chance that draft position i is accepted
  given that the ones before it were, as a moving average per position;
- continuation (per conversation): the chance that the drafter drafts position
  i at all, given that it drafted i - 1. The draft model stops by itself when
  its confidence drops (p_min), so the length chosen here is a cap: on
  uncertain text a high cap costs little, because drafts end early anyway;
- cost (per engine, it is a property of the hardware): the target's
  verification time for a batch of b tokens (a straight line fitted to the
  measured passes) and the drafter's time per draft token.

For a cap of n, the expected tokens per pass are 1 + sum_{i<n} prod_{j<=i} c_j a_j,
the expected draft length is D = sum_{i<n} prod_{j<=i} c_j, the time is
t_draft(D) + t_verify(D + 1), and plain decoding earns 1 / t_verify(1). When
the measured speculative speed stays below plain speed for a stretch, the
policy pauses speculation (plain steps, which keep t_verify(1) fresh), says
so, and probes again later, waiting longer after each failed probe.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

MAX_DRAFT = 16


class DraftPolicy(Protocol):
    def draft_length(self) -> int:
        """Tokens to draft for the next step; 0 means a plain decoding step."""
        ...

    def observe(self, drafted: int, accepted: int, draft_s: float, verify_s: float, source: str) -> None:
        """Feed back one verification pass."""
        ...

    @property
    def paused(self) -> bool: ...

    @property
    def reason(self) -> str: ...


class FixedPolicy:
    def __init__(self, n: int) -> None:
        self.n = n

    def draft_length(self) -> int:
        return self.n

    def observe(self, drafted: int, accepted: int, draft_s: float, verify_s: float, source: str) -> None:
        pass

    @property
    def paused(self) -> bool:
        return False

    @property
    def reason(self) -> str:
        return ""


def _ewma(old: float | None, new: float, alpha: float) -> float:
    return new if old is None else old + alpha * (new - old)


@dataclass
class LineFit:
    """Seconds as a function of a size: per-size moving averages, and a weighted line between them."""

    points: dict[int, tuple[float, int]] = field(default_factory=dict)  # size -> (average, count)
    min_slope: float = 0.0

    def observe(self, size: int, seconds: float) -> None:
        avg, n = self.points.get(size, (seconds, 0))
        self.points[size] = (avg + (seconds - avg) / min(n + 1, 16), n + 1)

    def predict_at(self, size: float) -> float | None:
        return _between(self.predict, size)

    def predict(self, size: int) -> float | None:
        if size in self.points:
            # Measured at this size: its own average, even from one pass, beats a line
            # drawn through other sizes (one slow pass elsewhere can tilt the line to 0).
            return self.points[size][0]
        pts = [(b, t, min(n, 16)) for b, (t, n) in self.points.items()]
        if not pts:
            return None
        if len({b for b, _, _ in pts}) < 2:
            b0, t0, _ = pts[0]
            # One size seen: assume the cost grows mildly with the size (conservative on a CPU).
            return max(t0 * (1.0 + 0.08 * (size - b0)), 1e-6)
        w = sum(n for _, _, n in pts)
        mb = sum(b * n for b, _, n in pts) / w
        mt = sum(t * n for _, t, n in pts) / w
        var = sum(n * (b - mb) ** 2 for b, _, n in pts)
        slope = sum(n * (b - mb) * (t - mt) for b, t, n in pts) / var if var > 0 else 0.0
        return max(mt + max(slope, self.min_slope) * (size - mb), 1e-6)


def _between(predict: Callable[[int], float | None], size: float) -> float | None:
    """``predict`` between whole sizes, linearly (an expected draft length is fractional)."""
    low = max(1, int(size))
    a = predict(low)
    if a is None or size <= low:
        return a
    b = predict(low + 1)
    return a if b is None else a + (b - a) * (size - low)


@dataclass
class CostModel:
    """Measured timings of this engine's target and drafter (shared by all conversations).

    Verification time by batch size, and drafting time by draft length per
    drafter (a draft-model step has a fixed part, catching up on the accepted
    tokens, and a part per drafted token; a line captures both).
    """

    verify: LineFit = field(default_factory=LineFit)
    draft: dict[str, LineFit] = field(default_factory=dict)
    # The pair's acceptance by draft position over every conversation: a new
    # conversation starts from it instead of from a blind prior.
    accept: dict[str, list[float]] = field(default_factory=dict)
    cont: dict[str, list[float]] = field(default_factory=dict)  # continuation, likewise

    def observe_verify(self, batch: int, seconds: float) -> None:
        self.verify.observe(batch, seconds)

    def observe_draft(self, source: str, tokens: int, seconds: float) -> None:
        if tokens > 0:
            self.draft.setdefault(source, LineFit()).observe(tokens, seconds)

    def t_verify(self, batch: int) -> float | None:
        t = self.verify.predict(batch)
        if t is None:
            return None
        # A bigger batch never costs less: a few slow passes at one size (a cold
        # page-in of the weights, a busy machine) must not make plain decoding look slow.
        for size, (avg, n) in self.verify.points.items():
            if size > batch and n >= 3:
                t = min(t, avg)
        return t

    def t_verify_at(self, batch: float) -> float | None:
        return _between(self.t_verify, batch)

    def t_draft(self, source: str, tokens: float) -> float | None:
        fit = self.draft.get(source)
        return fit.predict_at(tokens) if fit is not None else None

    def ready(self) -> bool:
        return 1 in self.verify.points


@dataclass
class AdaptivePolicy:
    """Draft length from measured acceptance and cost; pauses itself when speculation loses."""

    cost: CostModel
    start: int = 4
    max_len: int = MAX_DRAFT
    source: str = "draft"  # the drafter's cost key for the length choice
    prior: float = 0.6  # assumed acceptance for positions not yet seen
    warmup_steps: int = 12  # speculative steps measured before auto-off may trigger
    retry_tokens: int = 128  # plain tokens before probing again (doubles after each failed probe)
    calibrate_every: int = 128  # a plain step now and then keeps plain speed measured

    _accept: list[float] = field(default_factory=list)
    _cont: list[float] = field(default_factory=list)  # index i-1: continuation at position i >= 1
    _last_cap: int = 0
    _n: int = 0
    _steps: int = 0
    _spec_steps: int = 0
    _window: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=32))
    _floor: int = 0  # least cap while drafts keep running to the cap and being accepted whole
    _spec_gain: float | None = None  # measured speculative speed / plain speed over the window
    _acc_rate: float | None = None
    _paused_left: int = 0
    _backoff: int = 1
    _reason: str = ""
    _next_plain: bool = True  # a plain step measures plain speed (first step, if not yet measured)

    def __post_init__(self) -> None:
        self._n = max(1, min(self.start, self.max_len))
        self._next_plain = not self.cost.ready()
        learned = self.cost.accept.get(self.source)
        if learned:
            # Start where this pair's earlier conversations ended up; if those showed
            # that speculation does not pay on this machine, start paused.
            self._accept = list(learned)
            self._cont = list(self.cost.cont.get(self.source, []))
            self._n, expected = self._best_length()
            if expected < 0.97 and self.cost.ready():
                self._pause(expected, sum(learned[:1]) or 0.0)

    # -- model ------------------------------------------------------------------------
    def _a(self, i: int) -> float:
        if i < len(self._accept):
            return self._accept[i]
        last = self._accept[-1] if self._accept else self.prior
        return last * 0.95 ** (i - len(self._accept) + 1)

    def _c(self, i: int) -> float:
        if i == 0:
            return 1.0
        if i - 1 < len(self._cont):
            return self._cont[i - 1]
        return self._cont[-1] if self._cont else 1.0

    def expected_tokens(self, n: int) -> float:
        total, run = 1.0, 1.0
        for i in range(n):
            run *= self._a(i) * self._c(i)
            total += run
        return total

    def expected_draft_length(self, n: int) -> float:
        total, run = 0.0, 1.0
        for i in range(n):
            run *= self._c(i)
            total += run
        return total

    def _best_length(self) -> tuple[int, float]:
        """(length, expected speed-up over plain) from the models; (current, 1) without timings."""
        t1 = self.cost.t_verify(1)
        if t1 is None or self.source not in self.cost.draft:
            return self._n, 1.0
        best_n, best_rate = self._n, 0.0
        for n in range(1, self.max_len + 1):
            d = self.expected_draft_length(n)
            tv = self.cost.t_verify_at(d + 1)
            td = self.cost.t_draft(self.source, d)
            assert tv is not None and td is not None
            rate = self.expected_tokens(n) / (td + tv)
            if rate > best_rate * 1.005:  # prefer shorter drafts on near-ties
                best_n, best_rate = n, rate
        return best_n, best_rate * t1

    # -- policy -----------------------------------------------------------------------------
    def draft_length(self) -> int:
        if self._paused_left > 0 or self._next_plain:
            return 0
        self._last_cap = self._n
        return self._n

    @property
    def paused(self) -> bool:
        return self._paused_left > 0

    @property
    def reason(self) -> str:
        return self._reason if self._paused_left > 0 else ""

    @property
    def acceptance(self) -> list[float]:
        return list(self._accept)

    def observe(self, drafted: int, accepted: int, draft_s: float, verify_s: float, source: str) -> None:
        self._steps += 1
        self.cost.observe_verify(drafted + 1, verify_s)
        if drafted == 0:
            self._next_plain = False
            if self._paused_left > 0:
                self._paused_left -= 1
                if self._paused_left == 0:
                    # Probe again from a modest length with fresh evidence.
                    self._spec_steps = 0
                    self._spec_gain = None
                    self._window.clear()
                    self._n = max(1, min(self._n, 3))
            return
        self._spec_steps += 1
        if source == self.source:
            self.cost.observe_draft(source, drafted, draft_s)
            self._observe_acceptance(drafted, accepted)
            self._observe_continuation(drafted)
            if accepted == drafted and drafted >= self._last_cap:
                # A whole draft cut by the cap where the last position is usually accepted:
                # the drafter would have gone on, so try twice as long (the cost model only
                # prices positions it has seen, and averages miss runs of easy text).
                if self._a(drafted - 1) >= 0.85:
                    self._floor = max(self._floor, 2 * drafted)
            elif accepted < drafted:
                self._floor = min(self._floor, accepted + 1)  # no further than where it failed
        self._acc_rate = _ewma(self._acc_rate, accepted / drafted, 0.1)
        self._update(drafted, accepted, draft_s, verify_s)

    def _observe_acceptance(self, drafted: int, accepted: int) -> None:
        shared = self.cost.accept.setdefault(self.source, [])
        for i in range(drafted):
            hit = 1.0 if i < accepted else 0.0
            for table, alpha in ((self._accept, 0.15), (shared, 0.05)):
                if i < len(table):
                    table[i] = _ewma(table[i], hit, alpha)
                else:
                    table.append(0.5 * self.prior + 0.5 * hit)
            if not hit:
                break

    def _observe_continuation(self, drafted: int) -> None:
        """Positions 1..drafted-1 were drafted; a draft shorter than the cap stopped at ``drafted``."""
        shared = self.cost.cont.setdefault(self.source, [])
        last = min(drafted, self._last_cap - 1) if drafted < self._last_cap else drafted - 1
        for i in range(1, last + 1):
            went_on = 1.0 if i < drafted else 0.0
            for table, alpha in ((self._cont, 0.15), (shared, 0.05)):
                if i - 1 < len(table):
                    table[i - 1] = _ewma(table[i - 1], went_on, alpha)
                else:
                    table.append(0.5 + 0.5 * went_on)

    def _pause(self, gain: float, acceptance: float) -> None:
        tokens = self.retry_tokens * self._backoff
        self._reason = (
            f"speculation paused: {gain:.2f}x at acceptance {acceptance:.2f}; retrying in {tokens} tokens"
        )
        self._paused_left = tokens
        self._backoff = min(self._backoff * 2, 8)

    def _update(self, drafted: int, accepted: int, draft_s: float, verify_s: float) -> None:
        t1 = self.cost.t_verify(1)
        self._window.append((accepted + 1, draft_s + verify_s))
        if t1 is not None:
            tokens = sum(t for t, _ in self._window)
            seconds = sum(s for _, s in self._window)
            self._spec_gain = tokens / seconds * t1 if seconds > 0 else None
        if self.source in self.cost.draft and t1 is not None:
            self._n, _ = self._best_length()
            # The model only knows positions it has seen drafted; while drafts run to
            # the cap and are accepted whole, the cap grows past what it predicts.
            self._n = max(self._n, min(self.max_len, self._floor))
        else:  # no timings yet: the +2/-1 rule
            self._n = min(self.max_len, self._n + 2) if accepted == drafted else max(1, self._n - 1)
        if self._steps % self.calibrate_every == 0:
            self._next_plain = True
        if (
            self._spec_steps >= self.warmup_steps
            and self._spec_gain is not None
            and self._spec_gain < 0.97
        ):
            self._pause(self._spec_gain, self._acc_rate or 0.0)
        elif self._spec_steps >= self.warmup_steps and self._spec_gain is not None and self._spec_gain >= 1.0:
            self._backoff = 1
