"""Byte sizes as people read them, and the one "fits in memory" rule.

One base everywhere: sizes are **decimal** (1 KB = 1000 bytes, 1 GB = 10^9
bytes), the unit the model hub, the catalog's published sizes and disk
makers use, so a file listed as "1.1 GB" on the hub reads "1.1 GB" here too.
The window, the CLI and the download messages all format through
``format_bytes``.

``fits_in_memory`` is the single rule the CLI's ``models`` list and the
app's model manager apply, against the machine's total RAM read through
psutil (``total_ram``), so both give the same answer for the same model.
"""

from __future__ import annotations

import enum

BYTES_BASE = 1000
_UNITS = ("B", "KB", "MB", "GB", "TB")

# A model needs its weights in memory plus the context and runtime: about 15% and half a GB
# more at common context lengths. "tight" means it fits only if little else is running.
OVERHEAD_FACTOR = 1.15
OVERHEAD_BYTES = 512 * 1024 * 1024
COMFORTABLE_SHARE = 0.75  # of total RAM, leaving room for the system and the app itself


def format_bytes(n: float | None) -> str:
    """``1_117_320_768`` -> ``"1.1 GB"``; whole bytes below 1 KB; ``"?"`` when unknown or negative."""
    if n is None or n < 0:
        return "?"
    value = float(n)
    for unit in _UNITS:
        if value < BYTES_BASE or unit == _UNITS[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= BYTES_BASE
    raise AssertionError("unreachable")  # pragma: no cover


class Fit(enum.Enum):
    """Whether a model fits in this machine's memory; ``value`` is the CLI's word."""

    YES = "yes"
    TIGHT = "tight"
    NO = "no"
    UNKNOWN = "?"

    @property
    def label(self) -> str:
        """The word as a table cell shows it ("Yes", "Tight", "No", "?")."""
        return self.value.capitalize()


def memory_needed(size: int) -> int:
    """About how much RAM a model (target plus drafter) of ``size`` bytes takes once loaded."""
    return int(size * OVERHEAD_FACTOR + OVERHEAD_BYTES)


def fits_in_memory(size: int, total_ram: int | None) -> Fit:
    """The rule for a model (target plus drafter) of ``size`` bytes in ``total_ram`` bytes of RAM."""
    if total_ram is None or total_ram <= 0:
        return Fit.UNKNOWN
    need = memory_needed(size)
    if need <= total_ram * COMFORTABLE_SHARE:
        return Fit.YES
    return Fit.TIGHT if need <= total_ram else Fit.NO


def total_ram() -> int | None:
    """This machine's total RAM in bytes, or None when psutil cannot tell."""
    import psutil

    try:
        return int(psutil.virtual_memory().total)
    except (psutil.Error, OSError):
        return None
