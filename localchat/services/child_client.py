"""ChildClient: the QtCore base of every GUI-side handle on a child process (engine, benchmark).

It owns what they share: the QTimer that polls the pipe on the GUI thread
(every ``POLL_INTERVAL_MS``, reading what is waiting without blocking and for
at most ``TICK_BUDGET_S`` per tick, so the GUI never waits on a child and no
extra thread delivers signals), the death detection (EOF on the pipe, then up
to ``EXIT_CODE_WAIT_S`` for the exit code before reporting), and the
cancel time-out (a child that has not answered ``cancel_timeout_s`` after a
cancel is killed).

Subclasses say what a message means (``_dispatch``), what a death means
(``_report_death``) and what a hung cancel means (``_cancel_timed_out``).
"""

from __future__ import annotations

import logging
import time

from PySide6.QtCore import QObject, QTimer

from localchat.host.child import ChildGone, ChildProcess

log = logging.getLogger(__name__)

POLL_INTERVAL_MS = 15
TICK_BUDGET_S = 0.02  # stop reading after this long in one tick and let the event loop breathe
EXIT_CODE_WAIT_S = 1.0  # after EOF, how long to wait for the process's exit code before reporting


class ChildClient(QObject):
    def __init__(self, parent: QObject | None = None, *, cancel_timeout_s: float) -> None:
        super().__init__(parent)
        self.cancel_timeout_s = cancel_timeout_s
        self._process: ChildProcess | None = None
        self._gone_since: float | None = None  # EOF seen, waiting for the exit code

        self._poll_timer = QTimer(self)
        self._poll_timer.setInterval(POLL_INTERVAL_MS)
        self._poll_timer.timeout.connect(self._on_poll_timer_timeout)
        self._cancel_timer = QTimer(self)
        self._cancel_timer.setSingleShot(True)
        self._cancel_timer.timeout.connect(self._on_cancel_timer_timeout)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def _alive(self) -> bool:
        """A child is attached, no EOF was seen, and it is running."""
        return self._process is not None and self._gone_since is None and self._process.is_alive()

    # For subclasses

    def _attach(self, process: ChildProcess) -> None:
        """Watch a started process (replacing any earlier one)."""
        self._discard_process()
        self._process = process
        self._poll_timer.start()

    def _send(self, message: object) -> bool:
        """Send to the child; False (and the death is reported on the next tick) if it has gone."""
        if self._process is None:
            return False
        try:
            self._process.send(message)
        except ChildGone:
            self._note_gone()
            return False
        return True

    def _start_cancel_timer(self) -> None:
        if not self._cancel_timer.isActive():
            self._cancel_timer.start(int(self.cancel_timeout_s * 1000))

    def _stop_cancel_timer(self) -> None:
        self._cancel_timer.stop()

    def _kill_hung(self) -> None:
        """Kill the child after a cancel it did not answer; the death is reported as usual."""
        if self._process is not None:
            log.warning("the %s did not stop within %.1f s of cancel; killing it",
                        self._process.what, self.cancel_timeout_s)
            self._process.kill()
            self._note_gone()

    def _discard_process(self) -> None:
        """Forget the child (killing it if it still runs); no signal is emitted."""
        process, self._process = self._process, None
        self._gone_since = None
        self._poll_timer.stop()
        self._cancel_timer.stop()
        if process is not None:
            process.kill()
            process.close()

    def _dispatch(self, message: object) -> None:
        raise NotImplementedError

    def _report_death(self, exitcode: int | None) -> None:
        raise NotImplementedError

    def _cancel_timed_out(self) -> None:
        raise NotImplementedError

    # The timers

    def _note_gone(self) -> None:
        if self._gone_since is None:
            self._gone_since = time.monotonic()
            self._poll_timer.start()

    def _on_poll_timer_timeout(self) -> None:
        process = self._process
        if process is None:
            self._poll_timer.stop()
            return
        if self._gone_since is None:
            deadline = time.monotonic() + TICK_BUDGET_S
            try:
                while time.monotonic() < deadline:
                    message = process.receive(0)
                    if message is None:
                        break
                    self._dispatch(message)
                    if self._process is not process:  # a slot killed or replaced it
                        return
            except ChildGone:
                self._note_gone()
        if self._gone_since is not None:
            exitcode = process.exitcode
            if exitcode is None and time.monotonic() - self._gone_since < EXIT_CODE_WAIT_S:
                return
            log.warning("%s process %s ended (exit code %s)", process.what, process.pid, exitcode)
            self._report_death(exitcode)

    def _on_cancel_timer_timeout(self) -> None:
        if self._process is not None:
            self._cancel_timed_out()
