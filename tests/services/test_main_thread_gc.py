"""The cycle collector runs on the GUI thread only (services/main_thread_gc.py)."""

from __future__ import annotations

import gc
import threading
import weakref

from PySide6.QtCore import QObject

from localchat.services.main_thread_gc import MainThreadCollector


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_cycles_are_freed_by_the_gui_threads_timer_not_by_other_threads(qtbot) -> None:
    collector = MainThreadCollector(interval_ms=20)
    collector.threshold = (0, 10, 10)  # collect at the first tick
    collector.start()
    try:
        assert not gc.isenabled()
        freed_on: list[str] = []

        class Watched(QObject):
            def __del__(self) -> None:
                freed_on.append(threading.current_thread().name)

        def make_cycles() -> None:
            # Allocate plenty on another thread, as a download does: nothing is collected there.
            for _ in range(20_000):
                a, b = _Node(), _Node()
                a.other, b.other = b, a
            w = Watched()
            w.cycle = w  # type: ignore[attr-defined]

        worker = threading.Thread(target=make_cycles, name="download")
        worker.start()
        worker.join()
        assert freed_on == []
        qtbot.waitUntil(lambda: freed_on != [], timeout=3000)
        assert freed_on == [threading.main_thread().name]
        assert collector.collections >= 1
    finally:
        collector.stop()
    assert gc.isenabled()


def test_nothing_is_collected_below_the_threshold() -> None:
    collector = MainThreadCollector()
    collector.threshold = (10**9, 10, 10)
    node = _Node()
    node.other = node
    ref = weakref.ref(node)
    del node
    assert collector.check() == 0
    assert ref() is not None
    gc.collect()
    assert ref() is None
