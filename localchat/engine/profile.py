"""What a model pair costs on this machine, measured once and kept between engine processes.

Adaptive speculation (adaptive.py) decides from measured costs (costs.py): the target's
verification time by batch size, the drafter's time per token, and how often the
drafter's tokens are accepted at each confidence. Without this module every new
engine process (each app start, each ``localchat bench``) learned them again,
and where speculation cannot pay (a compute-bound target on a CPU) it learned
that at a loss, on the user's first reply.

Two remedies, both per pair:

- A **profile**: what the last process measured, saved as JSON in the user's
  data folder (``settings.folders.profiles_dir``) when the engine closes and
  loaded when the same pair loads again. It is keyed by content, not path
  (size and SHA-256 of the first and last MiB of each GGUF: a re-downloaded or
  re-quantised file under the same name is a different model), by backend,
  threads, offload, placement and llama.cpp build, and it carries the id of the
  machine that measured it: a profile from another computer (a synced home
  folder) says nothing about this one. A profile that cannot be read, of
  another format or another machine is ignored with one log line, never a
  crash, and replaced at close. Writes go to a temporary file renamed over the
  old one, so a crash mid-write leaves the previous profile or none.
- A **calibration** when no profile was loaded: verification passes of 1, 2, 4,
  8 and 16 tokens and a few drafter steps on a fixed stretch of code, right
  after the models load (the first of those passes also pages the weights in,
  which the first prompt would otherwise pay). It costs about six target
  passes, and the first reply then drafts the length this machine pays for, or
  starts paused where even the drafter's surest tokens cannot pay.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import math
import os
import platform
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from localchat.engine import sampling
from localchat.engine.backend import Context, llama_version, system_info
from localchat.engine.calibration import Calibration
from localchat.engine.costs import CostModel, repeated
from localchat.engine.draft_sources import NgramDrafter
from localchat.engine.types import SamplingParams
from localchat.settings.folders import profiles_dir

log = logging.getLogger("localchat.engine.profile")
LOOKUP = NgramDrafter.name  # the source name of lookup drafts (alone, under adaptive speculation)

FORMAT = 1  # bump when the meaning of a field changes: older profiles are then ignored
FINGERPRINT_SPAN = 1 << 20  # bytes hashed at each end of a model file
CALIBRATION_SIZES = (1, 2, 4, 8, 16, 1)  # verification batches; plain speed twice (it prices time)
DRAFTER_STEPS = 5
MAX_ROUNDS = 3  # another round of passes only while the last looks disturbed (and time is left)
ROUND_MARGIN = 1.25  # another round is given the time of the last one, and this much more
# A pass during which the process used less CPU than this share of its threads' time was slowed
# by another program (llama.cpp's threads run flat out during a pass on a CPU).
MIN_CPU_SHARE = 0.7
MAX_SLOWED = 2  # passes slowed by other programs before the calibration gives up
# A stretch of ordinary code: the passes run at a realistic context position on real tokens.
CALIBRATION_TEXT = (
    "def merge_sorted(a: list[int], b: list[int]) -> list[int]:\n"
    '    """Merge two sorted lists into one sorted list."""\n'
    "    out: list[int] = []\n"
    "    i = j = 0\n"
    "    while i < len(a) and j < len(b):\n"
    "        if a[i] <= b[j]:\n"
    "            out.append(a[i])\n"
    "            i += 1\n"
    "        else:\n"
    "            out.append(b[j])\n"
    "            j += 1\n"
    "    return out + a[i:] + b[j:]\n"
)
_CONTEXT_TOKENS = 24  # evaluated first: the warm-up, and the context the timed passes extend


def file_fingerprint(path: Path) -> str:
    """Size and SHA-256 of the first and last MiB: cheap on a 30 GB file, and any re-quantisation,
    re-download of another revision or truncation changes it."""
    size = path.stat().st_size
    h = hashlib.sha256()
    with path.open("rb") as fh:
        h.update(fh.read(FINGERPRINT_SPAN))
        if size > FINGERPRINT_SPAN:
            fh.seek(max(FINGERPRINT_SPAN, size - FINGERPRINT_SPAN))
            h.update(fh.read(FINGERPRINT_SPAN))
    return f"{size}:{h.hexdigest()[:32]}"


def _cpu_model() -> str:
    name = platform.processor()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():  # Linux: platform.processor() is often just "x86_64"
        with contextlib.suppress(OSError):
            for line in cpuinfo.read_text(errors="replace").splitlines():
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    return name


def machine_id() -> str:
    """This computer as far as speed goes: host name, OS, CPU model and count, memory."""
    parts = [
        platform.node(), platform.system(), platform.machine(), _cpu_model(),
        str(os.cpu_count()), str(round(psutil.virtual_memory().total / 2**30)),
    ]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ProfileKey:
    """Everything a measured cost depends on, besides the machine (stored in the file)."""

    target: str  # file fingerprints
    drafter: str
    backend: str
    threads: int
    gpu_layers: int
    placement: str
    llama: str  # llama.cpp's version and build features
    exact: bool = False  # weights kept as stored (EngineConfig.exact): other kernels, other costs

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def file_name(self) -> str:
        digest = hashlib.sha256(json.dumps(self.as_dict(), sort_keys=True).encode()).hexdigest()
        return f"{digest[:24]}.json"


@dataclass
class Measured:
    """The costs a profile keeps (see costs.CostModel for their meaning)."""

    verify: dict[int, tuple[float, int]] = field(default_factory=dict)  # batch -> (seconds, passes)
    draft_token_s: float | None = None
    draft_pass_s: float | None = None
    hits: list[float] = field(default_factory=list)  # the drafter's calibration, per confidence bin
    seen: list[float] = field(default_factory=list)
    # Lookup's own calibration (by the match's length), where adaptive speculation drafted by lookup
    # alone: which matches the target accepts on this pair is as much the pair's as the drafter's.
    lookup_hits: list[float] = field(default_factory=list)
    lookup_seen: list[float] = field(default_factory=list)
    # Adaptive speculation's last choice of drafter (``CostModel.lookup_alone``; None: none made).
    lookup_alone: bool | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "verify_s": {str(b): [round(t, 6), n] for b, (t, n) in sorted(self.verify.items())},
            "draft_token_s": self.draft_token_s,
            "draft_pass_s": self.draft_pass_s,
            "calibration": _bins_json(self.hits, self.seen),
        }
        if any(self.lookup_seen):
            out["lookup_calibration"] = _bins_json(self.lookup_hits, self.lookup_seen)
        if self.lookup_alone is not None:
            out["lookup_alone"] = self.lookup_alone
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Measured:
        """Parse and check; ValueError (or KeyError, TypeError) on anything out of place."""
        verify: dict[int, tuple[float, int]] = {}
        for b, (t, n) in obj["verify_s"].items():
            size, seconds, passes = int(b), float(t), int(n)
            if not (1 <= size <= 4096 and 0 < seconds < 600 and passes >= 1):
                raise ValueError(f"verification entry {b}: {t} s over {n} passes")
            verify[size] = (seconds, passes)
        if 1 not in verify or len(verify) < 3:
            raise ValueError("fewer than three verification sizes")

        def positive(v: Any) -> float | None:
            if v is None:
                return None
            x = float(v)
            if not (0 < x < 600):
                raise ValueError(f"a drafter time of {v} s")
            return x

        hits, seen = _bins_from(obj["calibration"])
        lookup_hits, lookup_seen = _bins_from(obj.get("lookup_calibration", {"accepted": [], "judged": []}))
        lookup_alone = obj.get("lookup_alone")
        if lookup_alone is not None and not isinstance(lookup_alone, bool):
            raise ValueError(f"a choice of drafter of {lookup_alone!r}")
        return cls(verify, positive(obj["draft_token_s"]), positive(obj["draft_pass_s"]), hits, seen,
                   lookup_hits, lookup_seen, lookup_alone)


def _bins_json(hits: list[float], seen: list[float]) -> dict[str, list[float]]:
    return {"accepted": [round(h, 3) for h in hits], "judged": [round(n, 3) for n in seen]}


def _bins_from(cal: Mapping[str, Any]) -> tuple[list[float], list[float]]:
    hits = [float(x) for x in cal["accepted"]]
    seen = [float(x) for x in cal["judged"]]
    if any(not math.isfinite(x) for x in hits + seen):
        raise ValueError("calibration values that are not numbers")
    return hits, seen


def measured_enough(cost: CostModel, source: str) -> bool:
    """Whether a process that was not calibrated measured enough by itself to be worth keeping."""
    sizes = [b for b, (_, n) in cost.verify.points.items() if n >= 3]
    return 1 in sizes and len(sizes) >= 3 and source in cost.draft_token_s


def measured_from(cost: CostModel, source: str, draft_pass_s: float | None) -> Measured:
    hits, seen = cost.calibration_for(source).state()
    lookup = cost.calibration.get(LOOKUP)
    lookup_hits, lookup_seen = lookup.state() if lookup is not None else ([], [])
    return Measured(dict(cost.verify.points), cost.draft_token_s.get(source), draft_pass_s, hits, seen,
                    lookup_hits, lookup_seen, cost.lookup_alone)


def apply(measured: Measured, cost: CostModel, source: str) -> None:
    """Start ``cost`` from a profile's measurements (ValueError, and ``cost`` untouched, if they do
    not fit it)."""
    restored = {source: _restored(measured.hits, measured.seen)}  # both checked before either is set
    if any(measured.lookup_seen):
        restored[LOOKUP] = _restored(measured.lookup_hits, measured.lookup_seen)
    cost.calibration.update(restored)
    for size, (seconds, passes) in measured.verify.items():
        cost.verify.seed(size, seconds, passes)
    if measured.draft_token_s is not None:
        cost.draft_token_s[source] = measured.draft_token_s
    cost.lookup_alone = measured.lookup_alone
    cost.calibrated = True


def _restored(hits: list[float], seen: list[float]) -> Calibration:
    calibration = Calibration()
    calibration.restore(hits, seen)
    return calibration


def load(path: Path, key: ProfileKey, machine: str) -> Measured | None:
    """The profile at ``path`` if it is this pair's on this machine; None (with one log line) if not."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("ignoring the speculation profile %s: it cannot be read (%s)", path, exc)
        return None
    try:
        obj = json.loads(text)
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
        if obj.get("format") != FORMAT:
            log.warning("ignoring the speculation profile %s: format %r, this version reads %d",
                        path, obj.get("format"), FORMAT)
            return None
        if obj.get("machine") != machine:
            log.warning("ignoring the speculation profile %s: it was measured on another machine", path)
            return None
        if obj.get("key") != key.as_dict():
            log.warning("ignoring the speculation profile %s: it belongs to other model files or settings",
                        path)
            return None
        return Measured.from_json(obj["measured"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("ignoring the speculation profile %s: %s", path, exc or type(exc).__name__)
        return None


def save(path: Path, key: ProfileKey, machine: str, measured: Measured) -> None:
    """Write atomically: a temporary file in the same folder, renamed over the old profile."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": FORMAT, "machine": machine, "key": key.as_dict(),
               "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "measured": measured.to_json()}
    fd, tmp = tempfile.mkstemp(prefix=".profile-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=1)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@dataclass(frozen=True)
class CalibrationReport:
    verify_s: dict[int, float]  # batch -> seconds (the fastest undisturbed pass)
    draft_token_s: float | None  # seconds a drafted token costs (a pass and reading its logits)
    draft_pass_s: float | None
    seconds: float  # the whole calibration, warm-up included
    warmup_s: float
    disturbed: str = ""  # why the measurements were not used (another program busy, ...), or ""


def calibrate(
    target: Context, drafter: Context, cost: CostModel, source: str, cpu_threads: int | None = None,
    budget_s: float = 2.5, sizes: Sequence[int] = CALIBRATION_SIZES,
) -> CalibrationReport | None:
    """Time verification passes of 1-16 tokens and a few drafter steps; feed them to ``cost``.

    Both contexts are empty afterwards. None when the contexts are too small to
    calibrate in (a tiny test context). ``budget_s`` (or 25 single-token passes, for
    a big target) bounds the timed passes, up to twice that for a round that must repeat a
    curve of a busy moment's shape (``repeated``). On a CPU (``cpu_threads`` given) a pass
    during which this process got much less CPU time than its threads could use
    was slowed by another program and does not count; a size without an
    undisturbed pass, or passes beyond ``budget_s``, leave ``cost`` untouched
    (``disturbed`` says why): the policy then learns as it goes, as before.
    ``sizes``: the batches timed, in the order of a round (a benchmark times every draft length).
    """
    need = _CONTEXT_TOKENS + max(sizes)
    if min(target.n_ctx, drafter.n_ctx) < need + 8 or min(target.n_batch, drafter.n_batch) < need:
        return None
    tokens = target.model.tokenize(CALIBRATION_TEXT, add_special=False)
    if len(tokens) < need:
        return None

    def timed(ctx: Context, batch: list[int], logits_for: str) -> tuple[float, bool]:
        """(seconds, undisturbed) of one decode."""
        c0, t0 = time.process_time(), time.perf_counter()
        ctx.decode(batch, logits_for=logits_for)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        return wall, cpu_threads is None or cpu >= MIN_CPU_SHARE * cpu_threads * wall

    t_start = time.perf_counter()
    target.clear()
    drafter.clear()
    passes: dict[int, list[float]] = {}
    rounds_s: list[dict[int, float]] = []  # each round's undisturbed passes, fastest per size
    this_round: dict[int, float] = {}
    disturbed = ""
    step_s: list[float] = []
    pass_s: list[float] = []
    try:
        target.decode(tokens[:_CONTEXT_TOKENS], logits_for="last")  # pages the weights in
        drafter.decode(tokens[:_CONTEXT_TOKENS], logits_for="last")
        warmup = time.perf_counter() - t_start
        begun = time.perf_counter()
        deadline = begun + budget_s
        ahead = tokens[_CONTEXT_TOKENS:]
        rounds = [size for _round in range(MAX_ROUNDS) for size in sizes]
        clean_in_round = slowed = 0
        round_began = begun
        for i, size in enumerate(rounds):
            if time.perf_counter() > deadline:
                break  # a machine this busy measures nothing worth keeping
            seconds, clean = timed(target, ahead[:size], "all")  # as a verification pass reads them
            target.truncate(_CONTEXT_TOKENS)
            if i == 0:  # a big target's round takes longer: the budget grows with its first pass
                deadline = max(deadline, begun + min(25 * seconds, 2 * budget_s))
            if clean:
                passes.setdefault(size, []).append(seconds)
                this_round[size] = min(seconds, this_round.get(size, seconds))
                clean_in_round += 1
            else:
                slowed += 1
                if slowed > MAX_SLOWED:
                    break  # the machine is busy: what it measures now is not worth its time
            if (i + 1) % len(sizes) == 0:  # a round done: another only if it looks disturbed
                rounds_s.append(this_round)
                this_round = {}
                measured = {b: min(v) for b, v in passes.items()}
                if len(measured) == len(set(sizes)) and (plausible(measured) or repeated(rounds_s)):
                    break
                if 2 * clean_in_round < len(sizes):
                    break  # most passes slowed: the machine is busy, another round would be too
                # A curve of a busy moment's shape counts where another round repeats it: that round
                # gets its time (a slow target's round can take most of the budget: a Q8_0 target with
                # 1 thread, 1.5 s), within twice the budget; where even that cannot hold it, stop now
                # rather than time a round that is cut short.
                now = time.perf_counter()
                next_end = now + ROUND_MARGIN * (now - round_began)
                if next_end > begun + 2 * budget_s:
                    break
                deadline = max(deadline, next_end)
                round_began = now
                clean_in_round = 0
        greedy = SamplingParams()
        complete = len(passes) == len(set(sizes))
        for tok in ahead[:DRAFTER_STEPS] if complete else []:  # not worth timing after a failed curve
            t0 = time.perf_counter()
            seconds, clean = timed(drafter, [tok], "last")
            logits = drafter.logits(0)
            sampling.greedy_token(logits, (), greedy)
            sampling.top_probability(logits)
            if clean:
                step_s.append(time.perf_counter() - t0)
                pass_s.append(seconds)
            else:
                slowed += 1
                if slowed > MAX_SLOWED:
                    break
    finally:
        target.clear()
        drafter.clear()
    best = {b: min(v) for b, v in sorted(passes.items())}
    if len(best) < len(set(sizes)):
        missing = sorted(set(sizes) - set(best))
        disturbed = f"passes of {', '.join(map(str, missing))} tokens were slowed by other programs"
    elif not (plausible(best) or repeated(rounds_s)):
        disturbed = "the passes' times contradict each other (a busy machine)"
    elif len(step_s) < 2:
        disturbed = "the drafter's steps were slowed by other programs"
    # Another program busy for a moment only ever slows a pass down: the faster passes are the truth.
    token_s = sorted(step_s)[(len(step_s) - 1) // 2] if step_s else None
    one_pass = sorted(pass_s)[(len(pass_s) - 1) // 2] if pass_s else None
    if not disturbed:
        for size, seconds_list in passes.items():
            for seconds in seconds_list:
                cost.observe_verify(size, seconds)
        assert token_s is not None
        cost.draft_token_s[source] = token_s
        cost.calibrated = True
    return CalibrationReport(best, token_s, one_pass, time.perf_counter() - t_start, warmup, disturbed)


def plausible(curve: Mapping[int, float]) -> bool:
    """Whether one round of passes looks undisturbed: a bigger batch never much cheaper than a
    smaller one, and no batch dearer than its tokens one at a time (a busy machine breaks both).
    Some real curves break them too (``repeated``)."""
    sizes = sorted(curve)
    t1 = curve[sizes[0]]
    for small, big in itertools.pairwise(sizes):
        if curve[big] < 0.8 * curve[small]:
            return False
    return all(curve[b] <= 1.25 * b * t1 for b in sizes[1:])


class PairProfile:
    """The saved profile of one loaded pair: loaded (or calibrated) at load, saved at close."""

    def __init__(self, directory: Path, key: ProfileKey, machine: str, source: str, use_saved: bool) -> None:
        self.path = directory / key.file_name()
        self.key = key
        self.machine = machine
        self.source = source
        self.use_saved = use_saved
        self.loaded = False
        self.calibration: CalibrationReport | None = None

    def start(self, cost: CostModel, target: Context, drafter: Context, do_calibrate: bool,
              cpu_threads: int | None = None) -> float | None:
        """Load the saved profile or calibrate; the drafter's seconds per pass, when known.
        ``cpu_threads``: the threads of a CPU-only target (see ``calibrate``)."""
        if self.use_saved:
            measured = load(self.path, self.key, self.machine)
            if measured is not None:
                try:
                    apply(measured, cost, self.source)
                except ValueError as exc:
                    log.warning("ignoring the speculation profile %s: %s", self.path, exc)
                else:
                    self.loaded = True
                    log.info("speculation profile loaded from %s: %s", self.path, describe(cost, self.source))
                    return measured.draft_pass_s
        if not do_calibrate:
            return None
        report = calibrate(target, drafter, cost, self.source, cpu_threads)
        if report is None:
            log.info("no calibration: the context is too small to measure in")
            return None
        self.calibration = report
        if report.disturbed:
            curve = ", ".join(f"{b}: {t * 1000:.1f}" for b, t in report.verify_s.items())
            log.info("calibration not used (%s; %.0f ms, measured ms by batch {%s}): learning as it goes",
                     report.disturbed, report.seconds * 1000, curve)
            return None
        log.info("calibrated in %.0f ms (warm-up %.0f ms): %s", report.seconds * 1000, report.warmup_s * 1000,
                 describe(cost, self.source))
        return report.draft_pass_s

    def save(self, cost: CostModel, draft_pass_s: float | None) -> None:
        if not self.use_saved or not (cost.calibrated or measured_enough(cost, self.source)):
            return
        try:
            save(self.path, self.key, self.machine, measured_from(cost, self.source, draft_pass_s))
        except OSError as exc:
            log.warning("could not save the speculation profile %s: %s", self.path, exc)


def describe(cost: CostModel, source: str) -> str:
    """One line of what is known: verification ms by batch, drafter ms a token, best case."""
    curve = ", ".join(f"{b}: {t * 1000:.1f}" for b, (t, _) in sorted(cost.verify.points.items()))
    per_token = cost.draft_token_s.get(source)
    best = cost.best_case_gain(source)
    drafter = f"drafter {per_token * 1000:.1f} ms a token" if per_token is not None else "drafter not timed"
    gain = f"; best case {best:.2f}x plain" if best is not None else ""
    return f"verification ms by batch {{{curve}}}; {drafter}{gain}"


def profile_for(
    target_path: Path, draft_path: Path, backend: str, threads: int, gpu_layers: int, placement: str,
    source: str, use_saved: bool, directory: Path | None = None, exact: bool = False,
) -> PairProfile:
    """The profile of this pair (fingerprinting both files: a few ms)."""
    key = ProfileKey(file_fingerprint(target_path), file_fingerprint(draft_path), backend, threads,
                     gpu_layers, placement, f"{llama_version()} {system_info().strip()}", exact)
    return PairProfile(directory or profiles_dir(), key, machine_id(), source, use_saved)
