"""How many tokens to draft next: a fixed length, or one that follows what speculation earns.

``FixedPolicy`` drafts the same length every step (benchmarks, experts).

``AdaptivePolicy`` (the default) picks the draft length that maximises the
expected tokens per second from two measured models:

- acceptance (per conversation): the chance that draft position i is accepted
  given that the ones before it were, as a moving average per position;
- cost (per engine, it is a property of the hardware): the target's
  verification time for a batch of b tokens (a straight line fitted to the
  measured passes) and the drafter's time per draft token.

Expected tokens for a draft of n are 1 + sum_i prod_{j<=i} a_j, the time is
n * t_draft + t_verify(n + 1), and plain decoding earns 1 / t_verify(1). When
the measured speculative speed stays below plain speed for a stretch, the
policy pauses speculation (plain steps, which keep t_verify(1) fresh), says
so, and probes again later, waiting longer after each failed probe.
"""

from __future__ import annotations

from collections import deque
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
class CostModel:
    """Measured timings of this engine's target and drafter (shared by all conversations)."""

    # batch size -> (moving average of verify seconds, observations)
    verify: dict[int, tuple[float, int]] = field(default_factory=dict)
    draft_per_token: dict[str, float] = field(default_factory=dict)  # source -> seconds per draft token

    def observe_verify(self, batch: int, seconds: float) -> None:
        avg, n = self.verify.get(batch, (seconds, 0))
        self.verify[batch] = (avg + (seconds - avg) / min(n + 1, 16), n + 1)

    def observe_draft(self, source: str, tokens: int, seconds: float) -> None:
        if tokens > 0:
            self.draft_per_token[source] = _ewma(self.draft_per_token.get(source), seconds / tokens, 0.1)

    def t_verify(self, batch: int) -> float | None:
        """Verification time for ``batch`` tokens: measured, else from a weighted line fit."""
        if batch in self.verify and self.verify[batch][1] >= 3:
            return self.verify[batch][0]
        pts = [(b, t, min(n, 16)) for b, (t, n) in self.verify.items()]
        if not pts:
            return None
        if len({b for b, _, _ in pts}) < 2:
            b0, t0, _ = pts[0]
            # One size seen: assume cost grows mildly with the batch (conservative on a CPU).
            return t0 * (1.0 + 0.08 * (batch - b0))
        w = sum(n for _, _, n in pts)
        mb = sum(b * n for b, _, n in pts) / w
        mt = sum(t * n for _, t, n in pts) / w
        var = sum(n * (b - mb) ** 2 for b, _, n in pts)
        slope = sum(n * (b - mb) * (t - mt) for b, t, n in pts) / var if var > 0 else 0.0
        slope = max(slope, 0.0)
        return max(mt + slope * (batch - mb), 1e-6)

    def ready(self) -> bool:
        return self.t_verify(1) is not None and 1 in self.verify


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
    calibrate_every: int = 48  # a plain step now and then keeps plain speed measured

    _accept: list[float] = field(default_factory=list)
    _n: int = 0
    _steps: int = 0
    _spec_steps: int = 0
    _window: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=32))
    _spec_gain: float | None = None  # measured speculative speed / plain speed over the window
    _acc_rate: float | None = None
    _paused_left: int = 0
    _backoff: int = 1
    _reason: str = ""
    _next_plain: bool = True  # the first step measures plain speed

    def __post_init__(self) -> None:
        self._n = max(1, min(self.start, self.max_len))

    # -- model ------------------------------------------------------------------------
    def _a(self, i: int) -> float:
        if i < len(self._accept):
            return self._accept[i]
        last = self._accept[-1] if self._accept else self.prior
        return last * 0.95 ** (i - len(self._accept) + 1)

    def expected_tokens(self, n: int) -> float:
        total, run = 1.0, 1.0
        for i in range(n):
            run *= self._a(i)
            total += run
        return total

    def _best_length(self) -> tuple[int, float]:
        """(length, expected speed-up over plain) from the models; (current, 1) without timings."""
        t1 = self.cost.t_verify(1)
        td = self.cost.draft_per_token.get(self.source)
        if t1 is None or td is None:
            return self._n, 1.0
        best_n, best_rate = self._n, 0.0
        for n in range(1, self.max_len + 1):
            tv = self.cost.t_verify(n + 1)
            assert tv is not None
            rate = self.expected_tokens(n) / (n * td + tv)
            if rate > best_rate * 1.005:  # prefer shorter drafts on near-ties
                best_n, best_rate = n, rate
        return best_n, best_rate * t1

    # -- policy -----------------------------------------------------------------------------
    def draft_length(self) -> int:
        if self._paused_left > 0 or self._next_plain:
            return 0
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
        self._acc_rate = _ewma(self._acc_rate, accepted / drafted, 0.1)
        self._update(drafted, accepted, draft_s, verify_s)

    def _observe_acceptance(self, drafted: int, accepted: int) -> None:
        for i in range(drafted):
            hit = 1.0 if i < accepted else 0.0
            if i < len(self._accept):
                self._accept[i] = _ewma(self._accept[i], hit, 0.15)
            else:
                self._accept.append(0.5 * self.prior + 0.5 * hit)
            if not hit:
                break

    def _update(self, drafted: int, accepted: int, draft_s: float, verify_s: float) -> None:
        t1 = self.cost.t_verify(1)
        self._window.append((accepted + 1, draft_s + verify_s))
        if t1 is not None:
            tokens = sum(t for t, _ in self._window)
            seconds = sum(s for _, s in self._window)
            self._spec_gain = tokens / seconds * t1 if seconds > 0 else None
        if self.cost.draft_per_token.get(self.source) is not None and t1 is not None:
            self._n, _ = self._best_length()
        else:  # no timings yet: the +2/-1 rule
            self._n = min(self.max_len, self._n + 2) if accepted == drafted else max(1, self._n - 1)
        if self._steps % self.calibrate_every == 0:
            self._next_plain = True
        if (
            self._spec_steps >= self.warmup_steps
            and self._spec_gain is not None
            and self._spec_gain < 0.97
        ):
            tokens = self.retry_tokens * self._backoff
            self._reason = (
                f"speculation paused: {self._spec_gain:.2f}x at acceptance {self._acc_rate or 0:.2f}; "
                f"retrying in {tokens} tokens"
            )
            self._paused_left = tokens
            self._backoff = min(self._backoff * 2, 8)
        elif self._spec_steps >= self.warmup_steps and self._spec_gain is not None and self._spec_gain >= 1.0:
            self._backoff = 1
