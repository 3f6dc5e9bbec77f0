"""Python's cycle collector, run on the GUI thread only.

Left to itself, Python collects reference cycles in whichever thread happens to
allocate when a threshold is passed: a download, supervisor or server thread. When
such a cycle holds a Qt object, its destructor then runs on that thread and
waits for the GIL, while the GUI thread, holding the GIL, waits for a Qt lock the
destructor holds: the app freezes (seen in the test suite, where a widget left
in a cycle by one test was freed on the next one's download thread).

``MainThreadCollector`` switches automatic collection off and collects from a
timer on the GUI thread instead: the young generation often (it is cheap), the
older ones when their own thresholds would have been passed, as Python does.
"""

from __future__ import annotations

import gc
import logging

from PySide6.QtCore import QObject, QTimer

log = logging.getLogger("localchat.gc")

INTERVAL_MS = 1000


class MainThreadCollector(QObject):
    def __init__(self, parent: QObject | None = None, interval_ms: int = INTERVAL_MS) -> None:
        super().__init__(parent)
        self._was_enabled = gc.isenabled()
        self.threshold = gc.get_threshold()
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.check)
        self.collections = 0

    def start(self) -> None:
        gc.disable()
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()
        if self._was_enabled:
            gc.enable()

    def check(self) -> int:
        """Collect the generations whose counts passed their thresholds; returns objects freed."""
        young, middle, _ = gc.get_count()
        t0, t1, t2 = self.threshold
        if young <= t0:
            return 0
        generation = 0
        if middle > t1:
            generation = 1
            if gc.get_count()[2] > t2:
                generation = 2
        freed = gc.collect(generation)
        self.collections += 1
        if freed:
            log.debug("collected %d objects (generation %d) on the GUI thread", freed, generation)
        return freed
