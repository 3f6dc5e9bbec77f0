"""Whether a draft model is predicted to pay on this computer, before it is downloaded.

A drafter pays where the tokens it gets accepted save more target passes than
its own passes and the longer verifications cost; that is a question of this
computer's costs, not of a size rule. The engine measures them when a pair
loads (its calibration, or the pair's saved profile), and the app keeps the
last measurement (``starter_choice.MachineMeasure``, services/starter_advisor.py).
From it this module predicts the speed-up of a catalog drafter with a catalog
target, so the model manager downloads the drafter only where it is expected
to pay, and says the figure where it is not (the user may download it anyway).

The costs:
- the target's passes: the measured verification curve scaled by the target's
  bytes (decoding reads every weight once; starter_choice.MachineMeasure.t_verify);
- the drafter's pass: measured, where it is the measured drafter's own file;
  else on a straight line through the two measured points of cost against
  bytes (the measured drafter's time per token at its size, and the measured
  target's one-token pass at its size): a small model's pass carries fixed
  costs that a pure size ratio would miss. Without the drafter's size in the
  measurement (one kept before it was recorded), its cost is the target's
  one-token pass scaled by the size ratio.
- the acceptance: ``PRIOR_ACCEPTANCE`` per token, a conservative prior below
  the 0.83-0.94 the catalog's Qwen pairs measure on code (chat is lower, and a
  drafter's quality for another target is not known before it ran).

With nothing measured yet (a first run) there is no prediction (``None``): the
drafter is downloaded, as before, and the load-time measurement decides whether
it drafts (engine: a draft model whose best case cannot pay drafts by lookup
alone, and says so). A wrong download costs disk space once; a missing drafter
would cost every reply its speed-up where it pays, and the user would not know.

No engine import: the measurement arrives as plain numbers, like starter_choice.
"""

from __future__ import annotations

from dataclasses import dataclass

from localchat.catalog.drafters import CatalogEntry, file_key
from localchat.catalog.names import SEPARATOR
from localchat.catalog.starter_choice import LONGEST_PREDICTED_DRAFT, MachineMeasure, best_speedup

# Per-token acceptance the prediction assumes: conservative, below what the catalog's Qwen pairs
# measure on code (0.83-0.94, docs/BENCHMARKS.md) and near what they measure on chat.
PRIOR_ACCEPTANCE = 0.7
# A drafter predicted at least this fast against plain decoding is downloaded with its target.
PAYS_FROM = 1.0

__all__ = ["LONGEST_PREDICTED_DRAFT", "PAYS_FROM", "PRIOR_ACCEPTANCE", "DrafterOutlook", "drafter_cost",
           "outlook_for_entry", "predict_drafter"]


@dataclass(frozen=True)
class DrafterOutlook:
    """A drafter's predicted speed-up with a target on this computer, and the sentence that says it."""

    drafter: str  # the drafter's name for the sentence ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    target: str  # the target's name
    speedup: float  # best predicted speed against plain decoding (0.0: the drafter's cost is unknown)
    draft_length: int  # the fixed draft length that reaches it
    measured_on: str  # what the measurement was taken with, for the tooltip

    @property
    def pays(self) -> bool:
        return self.speedup >= PAYS_FROM

    @property
    def prediction(self) -> str:
        """The figure in a clause: "On this computer the drafter D is predicted to run 0.8x plain speed
        with T" (or "to make T 1.3x as fast as plain decoding")."""
        figure = format_factor(self.speedup)
        if self.pays:
            return (f"On this computer the drafter {self.drafter} is predicted to make {self.target} "
                    f"{figure} as fast as plain decoding")
        return (f"On this computer the drafter {self.drafter} is predicted to run {figure} plain speed "
                f"with {self.target}")

    @property
    def sentence(self) -> str:
        """The prediction and what the model manager does with it."""
        if self.pays:
            return f"{self.prediction}, so it is downloaded with it."
        return f"{self.prediction}: it costs more than it saves, so it is not downloaded."


    @property
    def sentence_here(self) -> str:
        """The prediction where the drafter is on this computer already (nothing to download)."""
        if self.pays:
            return f"{self.prediction}."
        return (f"{self.prediction}; the engine measures the pair when it loads and drafts with it only "
                "if it pays.")


def format_factor(speedup: float) -> str:
    """A speed against plain decoding: "0.8x"; two decimals near 1, where one would say 1.0x for a
    loss (ui/formatting.format_speedup is this function)."""
    return f"{speedup:.1f}x" if speedup < 0.95 or speedup >= 1.5 else f"{speedup:.2f}x"


def drafter_cost(measured: MachineMeasure, drafter_bytes: int, drafter_file: str = "") -> float | None:
    """Seconds a token of a drafter of ``drafter_bytes`` costs here (see the module's docstring)."""
    d = measured.draft_token_s
    if drafter_file and d is not None and file_key(drafter_file) == file_key(measured.drafter_file or "-"):
        return d
    t1 = measured.t_verify(1)
    b_d, b_t = measured.drafter_bytes, measured.target_bytes
    if d is not None and d > 0 and 0 < b_d < b_t:
        slope = (t1 - d) / (b_t - b_d)
        return max(d + slope * (drafter_bytes - b_d), 1e-6)
    return t1 * drafter_bytes / b_t


def predict_drafter(measured: MachineMeasure, target_bytes: int, drafter_bytes: int, *,
                    drafter: str, target: str, drafter_file: str = "",
                    acceptance: float = PRIOR_ACCEPTANCE) -> DrafterOutlook:
    """The predicted speed-up of a drafter of ``drafter_bytes`` with a target of ``target_bytes``."""
    if target_bytes <= 0 or drafter_bytes <= 0:
        raise ValueError("a prediction needs the target's and the drafter's sizes")
    cost = drafter_cost(measured, drafter_bytes, drafter_file)
    speedup, length = best_speedup(measured, target_bytes / measured.target_bytes, cost, acceptance)
    return DrafterOutlook(drafter, target, speedup, length, measured.measured_on or "the loaded model")


def outlook_for_entry(entry: CatalogEntry, quant: str | None, measured: MachineMeasure | None
                      ) -> DrafterOutlook | None:
    """The prediction for ``entry``'s draft model with its ``quant`` (None: the default one); None
    where nothing is measured yet or the entry has no draft model."""
    drafter = entry.model_drafter
    if measured is None or drafter is None or drafter.size <= 0:
        return None
    try:
        q = entry.quant(quant)
    except KeyError:
        return None
    return predict_drafter(measured, q.size, drafter.size, drafter=drafter.label,
                           target=f"{entry.display_name}{SEPARATOR}{q.quant}", drafter_file=drafter.filename)
