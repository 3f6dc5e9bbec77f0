"""Which starter pair suits this computer, from what the engine measured on it.

The catalog's starter (Qwen2.5-Coder 1.5B) runs anywhere, but where it is cheap
next to its drafter (a CPU with a quantized target, a GPU with a tiny model)
speculation cannot pay. The bigger targets of the same family share the same
drafter file, and the bigger the target, the more a draft saves; whether they
are fast enough here is a question of this computer.

What the engine measures when it loads a pair (its calibration, or a saved
profile: engine/profile.py) answers it: the verification time by batch size of
the loaded target, and the drafter's time per token. Decoding a token reads
every weight once, so a target with ``s`` times the bytes takes about ``s``
times as long per pass, at every batch size; the drafter's cost stays what was
measured. From that, for each candidate: plain speed, the best speed-up over
fixed draft lengths 1..``LONGEST_PREDICTED_DRAFT`` (8) at a typical acceptance
(``ACCEPTANCE``), and the speed a chat would see (adaptive speculation pauses
where it loses, so never below plain).

The choice: the largest candidate that fits in memory and is expected to write
at least ``COMFORTABLE_TPS`` tokens a second (faster than anyone reads); where
none does, the smallest. Bigger targets answer better, and their speed-up is the
larger one. The prediction errs on the slow side for a bigger target (a small
model's passes carry fixed costs that do not grow with its size), so the choice
never promises a speed the machine cannot give.

No engine import here: the measurement arrives as plain numbers
(``MachineMeasure``), so the app, the CLI and the tests all use the same rule.
"""

from __future__ import annotations

import json
import logging
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from localchat.catalog.drafters import Catalog, CatalogEntry, file_key
from localchat.catalog.sizes import Fit, fits_in_memory

# A typical per-token acceptance rate of the Qwen2.5-Coder drafter for its family's targets (measured
# 0.83-0.94 on code, lower on chat: docs/BENCHMARKS.md); the speed-up is judged at this rate.
ACCEPTANCE = 0.8
# Faster than people read: a target slower than this with speculation is not chosen for a first chat.
COMFORTABLE_TPS = 10.0
# The prediction tries every fixed draft length from 1 to this one at ``ACCEPTANCE`` and keeps the best
# (``Prediction.draft_length``). Not the engine's bound on one draft (settings' DRAFT_TOKENS_MAX, 16).
LONGEST_PREDICTED_DRAFT = 8
FORMAT = "localchat-machine-measure/1"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MachineMeasure:
    """What the engine measured of a loaded pair on this computer."""

    target_bytes: int
    verify_s: Mapping[int, float]  # seconds of one verification pass, by batch size (1 at least)
    draft_token_s: float | None  # seconds of the drafter per drafted token
    drafter_file: str = ""  # base name of the drafter measured with the target
    backend: str = "CPU"
    measured_on: str = ""  # the target's name, for the sentence
    accelerator_bytes: int | None = None  # the GPUs' memory where the target ran on them
    drafter_bytes: int = 0  # the measured drafter's size (0: not known, kept before it was)

    def __post_init__(self) -> None:
        if self.target_bytes <= 0 or 1 not in self.verify_s or any(t <= 0 for t in self.verify_s.values()):
            raise ValueError("a measurement needs the target's size and a positive one-token pass time")

    def t_verify(self, batch: int, scale: float = 1.0) -> float:
        """One pass of ``batch`` tokens, for a target ``scale`` times the measured one's size
        (``pass_seconds``)."""
        return pass_seconds(self.verify_s, batch) * scale


def pass_seconds(verify_s: Mapping[int, float], batch: int) -> float:
    """Seconds of a verification pass of ``batch`` tokens on a measured curve (seconds by batch size):
    measured, else linear between the nearest measured sizes, and along the last two beyond them;
    never below the smallest size's pass."""
    sizes = sorted(verify_s)
    if batch in verify_s:
        return verify_s[batch]
    lower = [s for s in sizes if s < batch]
    upper = [s for s in sizes if s > batch]
    if lower and upper:
        a, b = lower[-1], upper[0]
    elif len(sizes) >= 2:
        a, b = sizes[-2], sizes[-1]
    else:
        return verify_s[sizes[0]] * batch  # one size known: no cheaper batches assumed
    ta, tb = verify_s[a], verify_s[b]
    t = ta + (tb - ta) * (batch - a) / (b - a)
    return max(t, verify_s[sizes[0]])


@dataclass(frozen=True)
class Prediction:
    entry: CatalogEntry
    size: int  # target plus drafter, bytes
    fit: Fit
    plain_tps: float
    speedup: float  # best speed-up of speculation with the draft model (below 1: it cannot pay)
    draft_length: int  # the draft length that reaches it

    @property
    def usable(self) -> bool:
        """Fits in memory with room to spare (or the memory is not known)."""
        return self.fit in (Fit.YES, Fit.UNKNOWN)

    @property
    def chat_tps(self) -> float:
        """What a chat sees: adaptive speculation drafts where it pays and pauses where it loses."""
        return self.plain_tps * max(1.0, self.speedup)


@dataclass(frozen=True)
class StarterChoice:
    chosen: Prediction
    candidates: tuple[Prediction, ...]  # smallest first
    measured_on: str  # the file the measurement came from, for the sentence

    @property
    def sentence(self) -> str:
        c = self.chosen
        name = c.entry.display_name
        spec = (f"speculation {c.speedup:.1f}x" if c.speedup >= 1.05
                else "speculation pays only where the reply repeats the conversation")
        text = (f"For this computer: {name}, about {c.chat_tps:.0f} tokens/s expected ({spec}), "
                f"measured with {self.measured_on}.")
        bigger = [p for p in self.candidates if p.size > c.size and p.usable]
        if bigger:
            nxt = bigger[0]
            text += f" {nxt.entry.display_name} would write about {nxt.chat_tps:.0f} tokens/s here."
        return text


def candidates(catalog: Catalog) -> tuple[CatalogEntry, ...]:
    """The starter and every entry drafted by the same drafter file, smallest target first."""
    starter = catalog.starter
    if starter is None or starter.model_drafter is None:
        return ()
    drafter = file_key(starter.model_drafter.filename)
    found = [e for e in catalog.entries
             if e.model_drafter is not None and file_key(e.model_drafter.filename) == drafter and not e.gated]
    return tuple(sorted(found, key=lambda e: e.default_quant.size))


def best_speedup(measured: MachineMeasure, scale: float, draft_s: float | None,
                 acceptance: float) -> tuple[float, int]:
    """The best speed-up over plain decoding of a fixed draft length 1..``LONGEST_PREDICTED_DRAFT``,
    and that length, for a target ``scale`` times the measured one's size and a drafter of
    ``draft_s`` seconds a token, where each draft token is accepted with chance ``acceptance`` once
    those before it were: a step drafting k yields 1 + a + ... + a^k tokens in k drafter passes and
    one verification of k + 1 tokens. (0.0, 0) where the drafter's cost is not known."""
    if draft_s is None or draft_s <= 0:
        return 0.0, 0
    t1 = measured.t_verify(1, scale)
    best, best_k, expected = 0.0, 0, 1.0
    for k in range(1, LONGEST_PREDICTED_DRAFT + 1):
        expected += acceptance**k
        gain = expected * t1 / (k * draft_s + measured.t_verify(k + 1, scale))
        if gain > best:
            best, best_k = gain, k
    return best, best_k


def predict(entry: CatalogEntry, measured: MachineMeasure, total_ram: int | None) -> Prediction:
    target = entry.default_quant.size
    drafter = entry.model_drafter.size if entry.model_drafter is not None else 0
    scale = target / measured.target_bytes
    best, best_k = best_speedup(measured, scale, measured.draft_token_s, ACCEPTANCE)
    fit = fits_in_memory(target + drafter, total_ram)
    return Prediction(entry, target + drafter, fit, 1.0 / measured.t_verify(1, scale), best, best_k)


def choose(catalog: Catalog, measured: MachineMeasure, total_ram: int | None) -> StarterChoice | None:
    """The starter for this computer; None where the catalog has no starter with a draft model."""
    entries = candidates(catalog)
    if not entries:
        return None
    # On a GPU what must fit is the GPU's memory: a target spilling into RAM runs at the CPU's speed.
    memory = measured.accelerator_bytes if measured.accelerator_bytes else total_ram
    preds = tuple(predict(e, measured, memory) for e in entries)
    usable = [p for p in preds if p.usable]
    fast = [p for p in usable if p.chat_tps >= COMFORTABLE_TPS]
    chosen = fast[-1] if fast else (usable[0] if usable else preds[0])
    return StarterChoice(chosen, preds, measured.measured_on or "the loaded model")


def this_machine() -> str:
    """What a measurement is only good for: this processor architecture and core count."""
    return f"{platform.machine()} {os.cpu_count()} cpus"


def save(path: Path, measured: MachineMeasure) -> None:
    """Keep the last measurement (atomically; a failure is a log line, never an error for the user)."""
    data = {
        "format": FORMAT,
        "machine": this_machine(),
        "backend": measured.backend,
        "target_bytes": measured.target_bytes,
        "verify_s": {str(k): v for k, v in sorted(measured.verify_s.items())},
        "draft_token_s": measured.draft_token_s,
        "drafter_file": measured.drafter_file,
        "measured_on": measured.measured_on,
        "accelerator_bytes": measured.accelerator_bytes,
        "drafter_bytes": measured.drafter_bytes,
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("could not keep this computer's measurement in %s: %s", path, exc)


def load(path: Path) -> MachineMeasure | None:
    """The measurement kept at ``path`` if it is this machine's; None (with a log line) otherwise."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        log.warning("ignoring %s: %s", path, exc)
        return None
    try:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError("not a measurement of this format")
        if data.get("machine") != this_machine():
            log.info("ignoring %s: measured on another machine (%s)", path, data.get("machine"))
            return None
        draft = data.get("draft_token_s")
        return MachineMeasure(
            target_bytes=int(data["target_bytes"]),
            verify_s={int(k): float(v) for k, v in dict(data["verify_s"]).items()},
            draft_token_s=float(draft) if draft is not None else None,
            drafter_file=str(data.get("drafter_file", "")),
            backend=str(data.get("backend", "CPU")),
            measured_on=str(data.get("measured_on", "")),
            accelerator_bytes=int(data["accelerator_bytes"]) if data.get("accelerator_bytes") else None,
            drafter_bytes=int(data.get("drafter_bytes") or 0),
        )
    except (KeyError, TypeError, ValueError) as exc:
        log.warning("ignoring %s: %s", path, exc)
        return None
