"""PySide6 6.12's Signal.emit drops a reference to True; emit() must not (Python 3.11 aborts otherwise)."""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, Signal

from localchat.services.qt_signals import emit


class _Source(QObject):
    changed = Signal(object)


def test_emit_keeps_the_reference_count_of_true(qtbot) -> None:
    source = _Source()
    got: list[object] = []
    source.changed.connect(got.append)
    emit(source.changed, 0)  # the first call measures the bug
    before = sys.getrefcount(True)
    for i in range(500):
        emit(source.changed, i)
    assert abs(sys.getrefcount(True) - before) < 20
    assert got[-1] == 499
