"""One localchat per chat history: the running app holds a lock, a later start asks it to come forward.

Two apps on one history each kept their own view of it and overwrote each other's replies (messages
were lost while both wrote). So, as LM Studio and Ollama's app do, the first app holds a lock file in
the data folder for as long as it runs, and listens on a local socket named after that folder; a second
start finds the lock taken, asks the first (through the socket) to bring its window to the front, and
ends without opening the history.

The lock is filelock's (an OS lock on Windows, macOS and Linux alike): the system drops it when the
process ends, however it ends, so a crashed app never locks the next one out, and no process id can
be mistaken for a live one. The socket is Qt's QLocalServer (a named pipe on Windows, a socket file
elsewhere), readable by this user only.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from localchat.settings import folders

log = logging.getLogger(__name__)

LOCK_NAME = "localchat.lock"
_SHOW = b"show\n"
_SHOWN = b"shown\n"
ANSWER_TIMEOUT_MS = 3000


def server_name(folder: Path) -> str:
    """The local socket's name for the app holding ``folder``: one per data folder (and so per user)."""
    digest = hashlib.sha256(str(folder.resolve()).encode("utf-8", "surrogateescape")).hexdigest()
    return f"{folders.APP_NAME}-{digest[:24]}"


class InstanceGuard(QObject):
    """Claims the data folder for this app; emits ``activation_requested`` when a later start asks."""

    activation_requested = Signal()

    def __init__(self, folder: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        from filelock import FileLock

        self.folder = folder
        self.name = server_name(folder)
        self._lock = FileLock(str(folder / LOCK_NAME), timeout=0)
        self._server: QLocalServer | None = None

    def claim(self) -> bool:
        """True when no other localchat holds the folder (this one now does, and listens for later
        starts); False when one does. A folder that cannot hold the lock file is logged and the app
        runs unguarded: refusing to start over it would lose more than it protects."""
        from filelock import Timeout

        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._lock.acquire()
        except Timeout:
            return False
        except OSError as exc:
            log.warning("cannot lock %s (%s); a second localchat would not be stopped", self.folder, exc)
            return True
        server = QLocalServer(self)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        QLocalServer.removeServer(self.name)  # a socket file a crashed app left (we hold the lock)
        if server.listen(self.name):
            server.newConnection.connect(self._on_server_new_connection)
            self._server = server
        else:  # the app still runs; only a later start cannot bring it forward
            log.warning("cannot listen for later starts on %s: %s", self.name, server.errorString())
        return True

    def wake_the_other(self, timeout_ms: int = ANSWER_TIMEOUT_MS) -> bool:
        """Ask the app holding the folder to bring its window to the front; whether it answered."""
        socket = QLocalSocket()
        socket.connectToServer(self.name)
        if not socket.waitForConnected(timeout_ms):
            return False
        socket.write(_SHOW)
        socket.flush()
        answer = b""
        while _SHOWN not in answer and socket.waitForReadyRead(timeout_ms):
            answer += bytes(socket.readAll().data())
        socket.disconnectFromServer()
        return _SHOWN in answer

    def release(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._lock.is_locked:
            self._lock.release()

    def _on_server_new_connection(self) -> None:
        assert self._server is not None
        while (socket := self._server.nextPendingConnection()) is not None:
            socket.readyRead.connect(lambda s=socket: self._on_socket_ready_read(s))
            socket.disconnected.connect(socket.deleteLater)

    def _on_socket_ready_read(self, socket: QLocalSocket) -> None:
        if not socket.canReadLine():
            return
        if bytes(socket.readLine().data()) == _SHOW:
            log.info("another start of localchat asked for this window")
            self.activation_requested.emit()
            socket.write(_SHOWN)
            socket.flush()
