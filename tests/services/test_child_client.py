"""services.ChildClient: the shared poll timer, death detection and cancel time-out, in a real event loop."""

from __future__ import annotations

from PySide6.QtCore import Signal
from pytestqt.qtbot import QtBot

from localchat.host.child import ChildProcess
from localchat.services.child_client import ChildClient


class EchoClient(ChildClient):
    got = Signal(object)
    died = Signal(object)
    hung = Signal()

    def start(self) -> None:
        process = ChildProcess("tests.host.child_targets:echo", name="test-echo", what="echo")
        process.spawn("c")
        self._attach(process)

    def send(self, message: object) -> bool:
        return self._send(message)

    def cancel(self) -> None:
        self._send("hang")
        self._start_cancel_timer()

    def _dispatch(self, message: object) -> None:
        self.got.emit(message)

    def _report_death(self, exitcode: int | None) -> None:
        self._discard_process()
        self.died.emit(exitcode)

    def _cancel_timed_out(self) -> None:
        self.hung.emit()
        self._kill_hung()


def test_messages_arrive_as_signals_and_a_death_carries_the_exit_code(qtbot: QtBot) -> None:
    client = EchoClient(cancel_timeout_s=5.0)
    client.start()
    with qtbot.waitSignal(client.got, timeout=30_000) as got:
        assert client.send("hi")
    assert got.args == [("c", "hi")]
    assert client._alive and client.pid
    with qtbot.waitSignal(client.died, timeout=30_000) as died:
        client.send("exit 5")
    assert died.args == [5]
    assert client.pid is None and not client._alive
    assert client.send("after") is False  # no child: a False, never an exception


def test_a_child_that_ignores_cancel_is_killed_after_the_time_out(qtbot: QtBot) -> None:
    client = EchoClient(cancel_timeout_s=0.3)
    client.start()
    with qtbot.waitSignal(client.hung, timeout=30_000):
        client.cancel()
    with qtbot.waitSignal(client.died, timeout=30_000) as died:
        pass
    assert died.args[0] not in (None, 0)  # killed, not a clean exit
