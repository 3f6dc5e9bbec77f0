"""How far to draft: a fixed length, or token by token from what speculation earns.

``FixedPolicy`` drafts the same length every step (benchmarks, experts); the
draft model still stops early when its confidence falls below ``p_min``.

``AdaptivePolicy`` (the default) drafts with a ``StopRule``: before each draft
token it weighs what the token is expected to earn against what it costs.

- What it earns: the chance that it and every token before it in the draft
  are accepted. The chance of one token comes from the drafter's confidence in
  it, calibrated against what verification accepted (``Calibration``, per
  confidence bin, shared by every conversation of the pair). Confidence is
  known per token, so runs of easy text (code, a closing bracket, a quoted
  name) draft long and uncertain tokens are not drafted at all; averages per
  draft position cannot tell the two apart.
- What it costs (``CostModel``, measured on this machine): one drafter pass to
  look at the next token, and the extra verification time of a batch one token
  longer. Time is priced at the best rate measured (plain decoding, or
  speculation over the recent window): keep a token while its expected tokens
  exceed that rate times its cost.

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

Drafters without a confidence (n-gram lookup on its own) get a length instead:
doubled after a draft accepted whole, cut back to where the last one failed.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from localchat.settings.options import DRAFT_TOKENS_MAX

MAX_DRAFT = DRAFT_TOKENS_MAX
# The chance assumed for the drafter's surest tokens (confidence >= 0.95) until the pair's own
# calibration has seen enough of them: the confidence itself (0.99) is too kind to decide from.
SURE_ACCEPTANCE = 0.97
SURE_EVIDENCE = 32  # tokens of that bin before its own calibration is believed
# Below this best-case speed-up, speculation with the drafter cannot pay here: start paused.
CANNOT_PAY = 0.97


# Below this best-case speed-up the draft model is not worth its passes for a new reply: the best case
# assumes text as easy as the drafter's surest tokens, and where even that barely pays, ordinary text
# (chat, stories) loses a few percent to the passes that find nothing worth drafting (measured: 1.06x
# best case, 0.91x on chat; docs/BENCHMARKS.md). Lookup drafts a copy for free there instead.
DRAFT_MODEL_MIN_BEST = 1.15


def lookup_instead(best: float) -> str:
    """Why adaptive speculation drafts by lookup alone, in words (see Engine._choose_drafter)."""
    why = ("costs more than it saves for this model" if best < 1.0
           else "saves too little for this model outside the easiest text")
    return (f"On this computer the draft model {why} ({best:.2f}x at best), so drafts come from the "
            f"conversation itself (n-gram lookup).")


class DraftPolicy(Protocol):
    def draft_length(self) -> int:
        """Most tokens to draft for the next step; 0 means a plain decoding step."""
        ...

    def observe(
        self, drafted: int, accepted: int, draft_s: float, verify_s: float, source: str,
        confidence: Sequence[float] = (),
    ) -> None:
        """Feed back one verification pass (``source`` is empty for a plain step)."""
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
        confidence: Sequence[float] = (),
    ) -> None:
        pass

    def stop_rule(self) -> StopRule | None:
        return None

    def observe_declined(self, source: str, confidence: float, hit: float) -> None:
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


def _ewma(old: float | None, new: float, alpha: float) -> float:
    return new if old is None else old + alpha * (new - old)


@dataclass
class LineFit:
    """Seconds as a function of a size: per size the median of the recent passes (a busy
    moment only ever slows a pass down, and one slow pass must not stick), and a line
    through the sizes for sizes not measured."""

    keep: int = 9  # recent passes kept per size
    samples: dict[int, deque[float]] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)
    # Caches of ``points`` and of the lines through them (read for every draft token).
    _points: dict[int, tuple[float, int]] | None = None
    _lines: dict[int, tuple[float, float, float] | None] = field(default_factory=dict)
    _local: dict[int, float | None] = field(default_factory=dict)

    def observe(self, size: int, seconds: float) -> None:
        self.samples.setdefault(size, deque(maxlen=self.keep)).append(seconds)
        self.counts[size] = self.counts.get(size, 0) + 1
        self._changed()

    def seed(self, size: int, seconds: float, passes: int) -> None:
        """Start a size from an earlier measurement (a saved profile): it counts as ``passes``
        passes, at most three, so that this process's own passes soon outweigh it."""
        n = max(1, min(passes, 3))
        self.samples[size] = deque([seconds] * n, maxlen=self.keep)
        self.counts[size] = n
        self._changed()

    def _changed(self) -> None:
        self._points = None
        self._lines.clear()
        self._local.clear()

    @property
    def points(self) -> dict[int, tuple[float, int]]:
        """size -> (typical seconds: the lower median of the recent passes, passes seen)."""
        if self._points is None:
            self._points = {}
            for size, recent in self.samples.items():
                ordered = sorted(recent)
                self._points[size] = (ordered[(len(ordered) - 1) // 2], self.counts[size])
        return self._points

    def predict(self, size: int) -> float | None:
        points = self.points
        if size in points:
            # Measured at this size: its own passes, even one, beat a line drawn
            # through other sizes (one slow pass elsewhere can tilt the line to 0).
            return points[size][0]
        if not points:
            return None
        below = max((b for b in points if b < size), default=None)
        above = min((b for b in points if b > size), default=None)
        if below is not None and above is not None and below >= 2:
            # Between two measured sizes (past the one-token kernel): follow the measured curve.
            (t0, _), (t1, _) = points[below], points[above]
            return t0 + (t1 - t0) * (size - below) / (above - below)
        line = self._line(1)
        if line is None:
            (b0, (t0, _)), = points.items()
            # One size seen: assume the cost grows mildly with the size (conservative on a CPU).
            return max(t0 * (1.0 + 0.08 * (size - b0)), 1e-6)
        mb, mt, slope = line
        return max(mt + slope * (size - mb), 1e-6)

    def slope(self, min_size: int = 1) -> float | None:
        """Seconds per unit of size, of the weighted line through the sizes >= ``min_size``;
        None until two such sizes have been measured."""
        line = self._line(min_size)
        return line[2] if line is not None else None

    def local_slope(self, size: float, min_size: int = 2, width: float = 0.5) -> float | None:
        """Seconds per unit of size near ``size``, from the measured curve: the slopes between
        neighbouring measured sizes >= ``min_size``, averaged with weights for their passes, their
        span and how near they are, in doublings (``width``: the distance at which a stretch weighs
        1/e as much; a calibration measures 2, 4, 8 and 16). Over a run of neighbouring sizes the
        average telescopes to the slope between its ends, so noise at single sizes cancels. A CPU's
        cost per extra token changes with the batch: one line through every size would price the
        12th token like the 3rd. None until two such sizes have been measured."""
        key = int(size * 2)
        if key not in self._local:
            pts = sorted((b, t, min(n, self.keep)) for b, (t, n) in self.points.items() if b >= min_size)
            where = math.log2(size)
            num = den = 0.0
            for (b0, t0, n0), (b1, t1, n1) in itertools.pairwise(pts):
                mid = 0.5 * (math.log2(b0) + math.log2(b1))
                w = min(n0, n1) * (b1 - b0) * math.exp(-abs(mid - where) / width)
                num += w * (t1 - t0) / (b1 - b0)
                den += w
            self._local[key] = max(0.0, num / den) if den > 0 else None
        return self._local[key]

    def _line(self, min_size: int) -> tuple[float, float, float] | None:
        """(mean size, mean seconds, slope >= 0), weighted by passes (capped at ``keep``)."""
        if min_size not in self._lines:
            self._lines[min_size] = self._fit(min_size)
        return self._lines[min_size]

    def _fit(self, min_size: int) -> tuple[float, float, float] | None:
        pts = [(b, t, min(n, self.keep)) for b, (t, n) in self.points.items() if b >= min_size]
        if len(pts) < 2:
            return None
        w = sum(n for _, _, n in pts)
        mb = sum(b * n for b, _, n in pts) / w
        mt = sum(t * n for _, t, n in pts) / w
        var = sum(n * (b - mb) ** 2 for b, _, n in pts)
        return mb, mt, max(0.0, sum(n * (b - mb) * (t - mt) for b, t, n in pts) / var)


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
    calibration shifted by what the conversation showed so far (``Shifted``)."""

    def __init__(self, pair: Calibration, prior_weight: float = 8.0, max_count: float = 64.0) -> None:
        self.shift = Shifted(pair)
        super().__init__(prior_weight=prior_weight, max_count=max_count, prior=self.shift)

    def observe_one(self, conf: float, hit: float) -> None:
        self.shift.learn(conf, hit)
        super().observe_one(conf, hit)


class StopRule:
    """Token by token: draft the next token while what it is expected to earn pays for its cost.

    Time is worth ``value`` tokens per second (the best rate measured: plain or
    speculative). Keeping the token at position k adds P_k expected tokens, where
    P_k is the product of the calibrated chances of positions 0..k, and costs
    the extra verification time of a batch one longer; looking at the next token
    costs one drafter pass plus that token's own verification increment. Easy runs
    (code, quoting) draft long, uncertain tokens are not drafted at all.
    """

    def __init__(self, cost: CostModel, calibration: Calibration, value: float,
                 look_seconds: float | None = None) -> None:
        self.cost = cost
        self.calibration = calibration
        self.value = value
        self.look_seconds = look_seconds  # one drafter pass; None: a first token must pay alone
        self._p = 1.0  # chance that every token kept so far is accepted
        self._q = 1.0  # the last kept token's chance: the guess for the next one

    def take(self, position: int, confidence: float) -> bool:
        q = self.calibration.q(confidence)
        p = self._p * q
        pays = p >= self.value * self.cost.extra_verify(position + 1)
        if not pays and (position > 0 or not self._worth_starting(q)):
            return False
        self._p, self._q = p, q
        return True

    def _worth_starting(self, q: float) -> bool:
        """Whether a draft that starts with a token of chance ``q`` pays, if the tokens after it were
        as likely (the guess ``look_further`` makes too), priced as a whole.

        Weighed alone, the first token must pay for the jump from a one-token pass to a two-token
        one, which on a CPU can cost as much as several tokens further on: once time is priced at
        a fast speculative rate, even a sure first token could not, and drafting stopped on easy
        text. The jump is paid once for the whole draft.
        """
        t1 = self.cost.t_verify(1)
        if t1 is None or self.look_seconds is None:
            return False
        expected, p = 0.0, 1.0
        for k in range(1, MAX_DRAFT + 1):
            p *= q
            expected += p
            tv = self.cost.t_verify(k + 1)
            if tv is None:
                return False
            if expected > self.value * (tv - t1 + (k - 1) * self.look_seconds):
                return True
        return False

    def look_further(self, position: int, decode_seconds: float) -> bool:
        cost = decode_seconds + self.cost.extra_verify(position + 2)
        return self._p * self._q >= self.value * cost

    def plan(self, confidences: Sequence[float]) -> int:
        """For a draft whose tokens are all known before any is kept (lookup: free to make), how
        many of them to keep: the length whose expected extra tokens best pay for its longer
        verification, 0 when none does.

        Unlike ``take``, which weighs one token at a time, this sees the whole draft, so the jump
        from a one-token pass to a two-token one (steep on a CPU with a quantized target) is
        weighed against every token that follows it: a long copy pays where a short one cannot.
        """
        t1 = self.cost.t_verify(1)
        if t1 is None:
            return 0
        best_k, best_gain, expected, p = 0, 0.0, 0.0, 1.0
        for k, conf in enumerate(confidences[:MAX_DRAFT], start=1):
            p *= self.calibration.q(conf)
            expected += p
            tv = self.cost.t_verify(k + 1)
            if tv is None:
                break
            gain = expected - self.value * max(0.0, tv - t1)
            if gain > best_gain:
                best_k, best_gain = k, gain
        return best_k


@dataclass
class CostModel:
    """What this engine has measured (shared by all conversations): the target's verification
    time by batch size, each drafter's calibration, and whether speculation last paid."""

    verify: LineFit = field(default_factory=LineFit)
    calibration: dict[str, Calibration] = field(default_factory=dict)  # per drafter
    # Per drafter, the latest measured (speed-up, acceptance rate) of the last two
    # conversations. A new one starts paused when both lost and even the drafter's
    # surest tokens cannot pay here (``best_case_gain``): losing on stories says
    # nothing about the code reply that follows.
    verdicts: dict[str, deque[tuple[int, float, float]]] = field(default_factory=dict)
    _conversations: int = 0

    # Per drafter, seconds of drafting per drafted token (its passes and catching up).
    draft_token_s: dict[str, float] = field(default_factory=dict)
    # The verification curve was measured at every size a draft uses (calibration at load, or a
    # saved profile): a new conversation can trust it from its first token.
    calibrated: bool = False

    def observe_draft(self, source: str, drafted: int, seconds: float) -> None:
        if drafted > 0:
            self.draft_token_s[source] = _ewma(self.draft_token_s.get(source), seconds / drafted, 0.1)

    def best_case_gain(self, source: str) -> float | None:
        """The speed-up over plain decoding of this machine's best draft length if the drafter were
        as right as it is on its most confident tokens; None until measured. Below 1, speculation
        cannot pay here whatever the text (a compute-bound target); above, it depends on the text."""
        t1 = self.t_verify(1)
        per_token = self.draft_token_s.get(source)
        if t1 is None or per_token is None or len(self.verify.points) < 2:
            return None
        cal = self.calibration_for(source)
        q = cal.q(0.99)
        if cal.seen(0.99) < SURE_EVIDENCE:
            q = min(q, SURE_ACCEPTANCE)
        best, expected = 0.0, 1.0
        for k in range(1, MAX_DRAFT + 1):
            expected += q**k
            tv = self.t_verify(k + 1)
            assert tv is not None
            best = max(best, expected * t1 / (k * per_token + tv))
        return best

    def new_conversation(self) -> int:
        self._conversations += 1
        return self._conversations

    def record_verdict(self, source: str, conversation: int, gain: float, acceptance: float) -> None:
        recent = self.verdicts.setdefault(source, deque(maxlen=2))
        if recent and recent[-1][0] == conversation:
            recent.pop()
        recent.append((conversation, gain, acceptance))

    def losing_verdict(self, source: str) -> tuple[float, float] | None:
        """(speed-up, acceptance) of the last conversation when the last two lost; else None."""
        recent = self.verdicts.get(source)
        if recent is None or len(recent) < 2 or any(g >= 0.97 for _, g, _ in recent):
            return None
        return recent[-1][1], recent[-1][2]

    def calibration_for(self, source: str) -> Calibration:
        return self.calibration.setdefault(source, Calibration())

    def observe_verify(self, batch: int, seconds: float) -> None:
        self.verify.observe(batch, seconds)

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

    def extra_verify(self, batch: int) -> float:
        """Seconds that one more token adds to a verification batch of ``batch`` tokens.

        From one token to two a CPU switches kernels (a jump, measured as such); past
        two the slope of a line through the measured sizes near this one is used
        (``LineFit.local_slope``): increments between single sizes are noisy, and one
        slow pass at a size that then stops being drafted would otherwise stick, but
        the cost per token does change along the curve.
        """
        if batch <= 1:
            if self.verify.counts.get(2, 0) < 3 and not self.calibrated:
                return 0.0  # not measured enough yet: draft, and measure it
            t1, t2 = self.t_verify(1), self.t_verify(2)
            return max(0.0, t2 - t1) if t1 is not None and t2 is not None else 0.0
        # Around this size (the step from ``batch`` to ``batch + 1`` tokens), from the measured
        # curve: flat stretches draft further, steep ones stop sooner.
        slope = self.verify.local_slope(batch + 0.5)
        if slope is not None:
            return slope
        t1 = self.t_verify(1)
        return 0.08 * t1 if t1 is not None else 0.0

    def ready(self) -> bool:
        return 1 in self.verify.points


@dataclass
class AdaptivePolicy:
    """Drafts token by token from measured acceptance and cost; pauses itself when speculation loses."""

    cost: CostModel
    start: int = 4  # first length for drafters without a confidence (n-gram lookup)
    max_len: int = MAX_DRAFT
    source: str = "draft"  # the drafter whose calibration and verdict this policy uses
    confident: bool = True  # the drafter reports its confidence per token: use the StopRule
    warmup_steps: int = 12  # speculative steps measured before auto-off may trigger
    # A clear loss needs less evidence: after this many steps, a speed-up below
    # ``early_gain`` pauses at once (the first reply of a pair that loses here).
    early_steps: int = 4
    early_gain: float = 0.8
    retry_tokens: int = 128  # plain tokens before probing again (doubles after each failed probe)
    calibrate_every: int = 128  # a plain step now and then keeps plain speed measured
    rate_steps: int = 8  # speculative steps in the window before its rate prices time

    _n: int = 0
    _steps: int = 0
    _spec_steps: int = 0
    _window: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=32))
    _spec_gain: float | None = None  # measured speculative speed / plain speed over the window
    _rate: float | None = None  # measured speculative tokens per second over the window
    _acc_rate: float | None = None
    _paused_left: int = 0
    _backoff: int = 1
    _reason: str = ""
    _pause_gain: float | None = None
    _next_plain: bool = True  # a plain step measures plain speed (first step, if not yet measured)
    # Looking at the next token costs a drafter pass even when nothing is worth drafting. Per
    # conversation, the seconds the recent looks saved against plain decoding (a moving average);
    # while they lose, a few steps skip the look (plain steps; the drafter catches up in one batch).
    look_alpha: float = 0.2
    max_skip: int = 8
    _look_saved: float | None = None
    _skip_left: int = 0
    _skip_len: int = 0
    _conversation: int = 0
    # This conversation's calibration, starting from the pair's: a drafter can be
    # confidently wrong on one kind of text (its own equally good variant of some code)
    # and right on another; the conversation's evidence soon outweighs the pair's.
    _calibration: Calibration = field(init=False)

    def __post_init__(self) -> None:
        self._calibration = ConversationCalibration(self.cost.calibration_for(self.source))
        self._n = max(1, min(self.start, self.max_len))
        self._next_plain = not self.cost.ready()
        self._conversation = self.cost.new_conversation()
        if self.confident and self.cost.calibrated:
            # The cost curve is this machine's own (calibrated at load or saved): where even the
            # drafter's surest tokens cannot pay on it, start paused instead of learning at a loss.
            best = self.cost.best_case_gain(self.source)
            if best is not None and best < CANNOT_PAY:
                self._pause_at_most(best)
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
        if self._paused_left > 0 or self._next_plain or self._skip_left > 0:
            return 0
        return self.max_len if self.confident else self._n

    def stop_rule(self) -> StopRule | None:
        t1 = self.cost.t_verify(1)
        if not self.confident or t1 is None:
            return None
        # Time is priced at the better of plain speed and speculation's over the window, once the
        # window holds enough steps: one lucky draft accepted whole would price every token too dear.
        rate = self._rate if len(self._window) >= self.rate_steps else None
        value = max(1.0 / t1, rate or 0.0)
        return StopRule(self.cost, self._calibration, value, self.cost.draft_token_s.get(self.source))

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
            self._backoff = 1
            self._reason = ""
            self._pause_gain = None
        self._fresh_window()

    def _fresh_window(self) -> None:
        self._spec_steps = 0
        self._spec_gain = None
        self._rate = None
        self._window.clear()
        self._n = max(1, min(self._n, 3))
        self._look_saved, self._skip_left, self._skip_len = None, 0, 0

    @property
    def speedup(self) -> float | None:
        """Measured speculative speed over plain speed, over the recent window."""
        return self._spec_gain

    def observe(
        self, drafted: int, accepted: int, draft_s: float, verify_s: float, source: str,
        confidence: Sequence[float] = (),
    ) -> None:
        self._steps += 1
        self.cost.observe_verify(drafted + 1, verify_s)
        if not source:  # a plain step: the drafter was not asked
            self._next_plain = False
            if self._skip_left > 0:
                self._skip_left -= 1
            if self._paused_left > 0:
                self._paused_left -= 1
                if self._paused_left == 0:
                    self._fresh_window()  # probe again with fresh evidence
            return
        # The drafter was asked. Even a step where it drafted nothing (nothing was worth
        # its cost) paid for keeping it in step: that is part of speculation's speed.
        self._spec_steps += 1
        if drafted > 0:
            if confidence and source == self.source:
                self.cost.observe_draft(source, drafted, draft_s)
                self.cost.calibration_for(source).observe(confidence, accepted)
                self._calibration.observe(confidence, accepted)
            if not self.confident and source == self.source:
                if accepted == drafted and drafted >= self._n:
                    self._n = min(self.max_len, 2 * self._n)
                elif accepted < drafted:
                    self._n = max(1, accepted + 1)
            self._acc_rate = _ewma(self._acc_rate, accepted / drafted, 0.1)
        if self.confident and source == self.source:
            self._judge_look(accepted, draft_s + verify_s)
        self._update(accepted + 1, draft_s + verify_s)

    def observe_declined(self, source: str, confidence: float, hit: float) -> None:
        if self.confident and source == self.source:
            self.cost.calibration_for(source).observe_one(confidence, hit)
            self._calibration.observe_one(confidence, hit)

    def _judge_look(self, accepted: int, seconds: float) -> None:
        """After a step that paid for a drafter pass: did looking pay? Where the recent looks lost
        (text the drafter cannot guess: chat, stories), skip the next 1, 2, 4 .. ``max_skip`` looks.

        A look that found nothing worth drafting still cost its drafter pass: on an F16 target that
        is a quarter of a plain step. The pause (``_judge``) needs a window of steps and then stops
        for a hundred tokens or more; this acts within a reply, step by step, and a look that pays
        again ends it.
        """
        t1 = self.cost.t_verify(1)
        if t1 is None or self.cost.draft_token_s.get(self.source, 0.0) <= 0.0:
            return
        if not self.cost.calibrated and self.cost.verify.counts.get(2, 0) < 3:
            return  # the short drafts that measure the curve come first
        saved = (accepted + 1) * t1 - seconds  # against plain steps writing the same tokens
        self._look_saved = _ewma(self._look_saved, saved, self.look_alpha)
        if self._look_saved < 0.0:
            self._skip_len = min(self.max_skip, max(1, 2 * self._skip_len))
            self._skip_left = self._skip_len
        else:
            self._skip_len = 0

    def _pause(self, gain: float, acceptance: float) -> None:
        tokens = self.retry_tokens * self._backoff
        self._reason = (
            f"speculation paused: {gain:.2f}x at acceptance {acceptance:.2f}; retrying in {tokens} tokens"
        )
        self._paused_left = tokens
        self._pause_gain = gain
        self._backoff = min(self._backoff * 2, 8)

    def _pause_at_most(self, best: float) -> None:
        tokens = self.retry_tokens * self._backoff
        self._reason = (f"speculation paused: on this machine's measured costs the drafter can reach "
                        f"{best:.2f}x at best; retrying in {tokens} tokens")
        self._paused_left = tokens
        self._backoff = min(self._backoff * 2, 8)

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
            if gain < self.early_gain:  # a clear loss needs less evidence
                self._judge(gain, pause=True)
            return
        self._judge(gain, pause=gain < 0.97)
        if gain >= 1.0:
            self._backoff = 1

    def _judge(self, gain: float, pause: bool) -> None:
        """Leave this conversation's measured verdict for the next ones; pause if it lost."""
        acceptance = self._acc_rate or 0.0
        self.cost.record_verdict(self.source, self._conversation, gain, acceptance)
        if pause:
            self._pause(gain, acceptance)
