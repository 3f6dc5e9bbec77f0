"""``emit(signal, *args)``: Signal.emit with a guard against a PySide6 reference-count bug.

PySide6 6.12.0's ``SignalInstance.emit`` returns ``True`` without taking a
reference to it, so every emit from Python drops one reference to ``True``.
On Python 3.12+ ``True`` is immortal and nothing happens; on Python 3.11 the
count reaches zero after some thousands of emits (a few minutes of streaming)
and the interpreter aborts with "Fatal Python error: bool_dealloc".

``emit`` detects the bug once (by measuring it on a private signal) and, only
where it is present, gives back the reference that PySide6 took. Every
``.emit`` in localchat should go through this until the pinned PySide6 is
fixed; then the probe finds nothing and this is a plain emit.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

from PySide6.QtCore import QObject, Signal, SignalInstance


class _Probe(QObject):
    fired = Signal()


def _measure_leak() -> bool:
    probe = _Probe()
    before = sys.getrefcount(True)
    emit_fired: Any = probe.fired.emit  # typed as returning None; 6.12 returns a (borrowed) True
    results = [emit_fired() for _ in range(64)]
    del results
    leaked = before - sys.getrefcount(True)
    # Give back what the probe itself took; other threads can move the count a little, so be generous.
    if leaked >= 48:
        for _ in range(64):
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(True))
        return True
    return False


_LEAKS_TRUE: bool | None = None


def emit(signal: SignalInstance, *args: Any) -> None:
    """``signal.emit(*args)``, compensating PySide6 6.12's lost reference to True when present."""
    global _LEAKS_TRUE
    if _LEAKS_TRUE is None:
        _LEAKS_TRUE = _measure_leak()
    emit_signal: Any = signal.emit
    result = emit_signal(*args)
    if _LEAKS_TRUE and result is True:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(result))
