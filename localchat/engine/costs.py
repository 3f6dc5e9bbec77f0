"""What speculation costs on this machine, as measured: the cost curves adaptive speculation prices with.

- ``LineFit``: seconds by size, from the recent passes at each size (their median) and the
  measured curve between them; the verification time by batch size is one.
- ``CostModel``: what the engine measured, shared by every conversation: the target's
  verification time by batch size (a CPU's cost per extra token changes with the batch as
  llama.cpp switches kernels, so the curve is followed, not one line), each drafter's seconds per
  drafted token and its acceptance calibration (engine/calibration.py), and whether speculation
  paid in the last conversations (``losing_verdict``), and, from all of it, the best speed-up the
  drafter could reach here (``best_case_gain``).

The costs start from a saved profile or a short calibration at load (engine/profile.py); the
policy that reads them is engine/adaptive.py, the rule that prices each draft token
engine/stop_rule.py.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from localchat.engine.calibration import Calibration
from localchat.settings.options import DRAFT_TOKENS_MAX

# The chance assumed for the drafter's surest tokens (confidence >= 0.95) until the pair's own
# calibration has seen enough of them: the confidence itself (0.99) is too kind to decide from.
SURE_ACCEPTANCE = 0.97
SURE_EVIDENCE = 32  # tokens of that bin before its own calibration is believed


# Padding a verification batch to a size this machine runs faster (``CostModel.verify_batch``).
PAD_MAX = 4  # most padding tokens
PAD_MARGIN = 0.9  # the padded batch costs at most this share of the batch itself
PAD_EVIDENCE = 3  # passes measured at the larger size
PAD_RECHECK = 16  # every this many paddings of a size, it runs unpadded (measured again)


def ewma(old: float | None, new: float, alpha: float) -> float:
    """A moving average weighing the newest value ``alpha``: ``new`` itself when there is no ``old``."""
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
    # Adaptive speculation's last choice between the draft model and lookup alone (``adaptive.
    # DrafterChoice``; None: not made yet), kept in the profile so that a later process goes on from it.
    lookup_alone: bool | None = None
    _pads: dict[int, int] = field(default_factory=dict)  # times each size was padded (``verify_batch``)
    _ran: tuple[int, int] | None = None  # the last (batch, size run) of ``verify_batch``

    def observe_draft(self, source: str, drafted: int, seconds: float) -> None:
        if drafted > 0:
            self.draft_token_s[source] = ewma(self.draft_token_s.get(source), seconds / drafted, 0.1)

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
        if not self.sure_known(source):
            q = min(q, SURE_ACCEPTANCE)
        best, expected = 0.0, 1.0
        for k in range(1, DRAFT_TOKENS_MAX + 1):
            expected += q**k
            tv = self.t_verify(k + 1)
            assert tv is not None
            best = max(best, expected * t1 / (k * per_token + tv))
        return best

    def sure_known(self, source: str) -> bool:
        """Whether the drafter's surest tokens have been judged often enough (``SURE_EVIDENCE``) for
        their own acceptance to price them; until then ``best_case_gain`` caps it at ``SURE_ACCEPTANCE``,
        and the best case is a first estimate, lower than the one the evidence will give."""
        return self.calibration_for(source).seen(0.99) >= SURE_EVIDENCE

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
        ran, self._ran = self._ran, None
        self.verify.observe(ran[1] if ran is not None and ran[0] == batch else batch, seconds)

    def t_verify(self, batch: int) -> float | None:
        """Seconds to verify ``batch`` tokens: at the size the engine runs them in (``padded``)."""
        if batch >= 2:
            return self.verify.predict(self.padded(batch))
        t = self.verify.predict(batch)
        if t is None:
            return None
        # A bigger batch never costs less than a plain step: a few slow passes of one token (a cold
        # page-in of the weights, a busy machine) must not make plain decoding look slow.
        for size, (avg, n) in self.verify.points.items():
            if size > batch and n >= 3:
                t = min(t, avg)
        return t

    def padded(self, batch: int, limit: int | None = None) -> int:
        """The size that verifies ``batch`` tokens fastest here: ``batch``, or a batch up to
        ``PAD_MAX`` tokens larger (at most ``limit``), measured ``PAD_EVIDENCE`` passes or more, that
        runs in at most ``PAD_MARGIN`` of the time ``batch`` is predicted to take.

        A CPU's cost by batch size is not monotone: llama.cpp's quantized kernels work on blocks of
        rows, so a Q8_0 target with 2 threads verified 5 tokens in 238 ms and 8 in 170 ms, and an
        F16 target ran 9 tokens faster than 8. The decode loop pads such a batch (``verify_batch``)
        and the policy prices it so; priced so without the padding, drafts of 5 to 7 tokens cost
        1.4 times what the rule and the floor counted on, and a reply ran at half plain speed."""
        if batch < 2:
            return batch
        points = self.verify.points
        own = self.verify.predict(batch)
        if own is None:
            return batch
        run, best = batch, own * PAD_MARGIN
        top = batch + PAD_MAX if limit is None else min(batch + PAD_MAX, limit)
        for size in range(batch + 1, top + 1):
            seen = points.get(size)
            if seen is not None and seen[1] >= PAD_EVIDENCE and seen[0] < best:
                run, best = size, seen[0]
        return run

    def verify_batch(self, batch: int, limit: int) -> int:
        """The batch the decode loop runs to verify ``batch`` tokens, at most ``limit`` (``padded``).
        Every ``PAD_RECHECK``-th padding of a size runs it unpadded, so that a size once measured
        slow (a busy moment) is measured again. The next ``observe_verify`` of ``batch`` is recorded
        at the size run."""
        run = self.padded(batch, limit)
        if run != batch:
            self._pads[batch] = self._pads.get(batch, 0) + 1
            if self._pads[batch] % PAD_RECHECK == 0:
                run = batch
        self._ran = (batch, run)
        return run

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

    def curve_known(self) -> bool:
        """Whether the verification curve is measured well enough to judge a drafter's best case from:
        calibrated (at load, or a saved profile), or passes of three sizes past one token measured at
        least twice each in the replies (a line through a pass or two makes every drafter look cheap)."""
        counts = self.verify.counts
        return self.calibrated or sum(1 for b, n in counts.items() if b >= 2 and n >= 2) >= 3


# Two rounds whose times agree this closely, size by size, measured the machine, not a busy moment.
REPEAT_TOLERANCE = 0.1


def repeated(rounds: Sequence[Mapping[int, float]], tolerance: float = REPEAT_TOLERANCE) -> bool:
    """Whether two complete rounds of passes agree, every size within ``tolerance`` of the other
    round's time: a curve that ``profile.plausible`` doubts but that repeats is the machine's own.

    On a CPU some curves have the shape a busy moment gives: a Q8_0 target's batch of two costs three
    single tokens (2 threads: 39 ms for one token, 121 ms for two, as llama.cpp leaves its one-token
    kernel), and a batch of 8 can cost less than one of 7 (a kernel for whole blocks). Such a curve
    was declined at every load as "a busy machine", and speculation learnt at a loss in the replies
    what the calibration had measured. A busy moment does not slow the same sizes by the same
    amount twice."""
    sizes = set().union(*rounds) if rounds else set()
    whole = [r for r in rounds if set(r) == sizes]  # a round with a size slowed is no evidence
    return any(all(abs(a[k] - b[k]) <= tolerance * min(a[k], b[k]) for k in sizes)
               for a, b in itertools.combinations(whole, 2))
