"""Run the API on a socket in a background thread: ``localchat serve``, the benchmark and the tests.

The socket is bound here, before uvicorn starts, so a port in use is one
clear sentence (not a uvicorn log line) and port 0 gives an ephemeral port
whose number is known at once. uvicorn gets explicit choices (asyncio loop,
h11 (server/connections.py's bounded protocol), no websockets, no lifespan) rather than "auto": the
same code path runs everywhere, and a frozen bundle needs only those lazily imported modules.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import threading

import uvicorn
from starlette.types import ASGIApp

from localchat.server.connections import ACCEPT_BATCH, ConnectionLimits, protocol_class

log = logging.getLogger(__name__)


class BindError(OSError):
    """The address cannot be bound; ``str`` is a sentence."""


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0: any free port)."""
    host = host.strip("[]")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise BindError(f"{host!r} is not an address of this computer ({exc.strerror}).") from exc
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if hasattr(socket, "SO_EXCLUSIVEADDRUSE"):  # Windows: no other program may share the port
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE, 1)
        else:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(ACCEPT_BATCH)
    except OSError as exc:
        sock.close()
        raise BindError(
            f"Cannot listen on {host}:{port} ({exc.strerror or exc}); another program may be using "
            "that port: choose another with --port."
        ) from exc
    sock.set_inheritable(False)
    return sock


def url_for(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


class ServerThread:
    """uvicorn serving ``app`` on ``sock`` in a daemon thread with its own event loop, its connections
    bounded by ``limits`` (server/connections.py)."""

    def __init__(self, app: ASGIApp, sock: socket.socket, limits: ConnectionLimits | None = None) -> None:
        self.sock = sock
        self.url = url_for(sock)
        config = uvicorn.Config(
            app, loop="asyncio", http=protocol_class(limits or ConnectionLimits()), ws="none", lifespan="off",
            log_config=None, access_log=False, proxy_headers=False, server_header=False,
            timeout_graceful_shutdown=2, backlog=ACCEPT_BATCH,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="api-server", daemon=True)
        self._error: BaseException | None = None

    def _run(self) -> None:
        try:
            asyncio.run(self._server.serve(sockets=[self.sock]))
        except BaseException as exc:  # reported by start() / stop()
            self._error = exc
            log.exception("the API server stopped")

    def start(self, timeout: float = 10.0) -> None:
        self._thread.start()
        deadline = threading.Event()
        waited = 0.0
        while not self._server.started and self._thread.is_alive() and waited < timeout:
            deadline.wait(0.02)
            waited += 0.02
        if not self._server.started:
            raise RuntimeError(f"The API server did not start ({self._error or 'timed out'}).")

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(1.0)
        self.sock.close()
