"""services.main_thread.on_main: calls from any thread run on the GUI thread, in order, after the
caller returns; a target that has gone is skipped; no timer polls."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, QThread

from localchat.services.main_thread import on_main


class Receiver(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[int, bool]] = []

    def take(self, value: int) -> None:
        self.calls.append((value, QThread.currentThread() is self.thread()))


def test_calls_from_threads_arrive_on_the_gui_thread_in_order(qtbot) -> None:
    receiver = Receiver()
    call = on_main(receiver.take)

    def work() -> None:
        for i in range(500):
            call(i)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    qtbot.waitUntil(lambda: len(receiver.calls) == 500, timeout=5000)
    assert [v for v, _ in receiver.calls] == list(range(500))
    assert all(on_gui for _, on_gui in receiver.calls)


def test_a_call_made_on_the_gui_thread_runs_after_the_caller_returns(qtbot) -> None:
    receiver = Receiver()
    call = on_main(receiver.take)
    call(1)
    assert receiver.calls == []  # queued, not run inside the caller
    qtbot.waitUntil(lambda: receiver.calls == [(1, True)], timeout=2000)


def test_a_target_that_has_gone_is_skipped(qtbot) -> None:
    receiver = Receiver()
    call = on_main(receiver.take)
    kept = Receiver()
    after = on_main(kept.take)
    del receiver
    call(1)
    after(2)
    qtbot.waitUntil(lambda: kept.calls == [(2, True)], timeout=2000)
