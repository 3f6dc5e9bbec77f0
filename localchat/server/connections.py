"""Connections the server holds, bounded: how many at once, and how long a request's headers may take.

Every open connection holds a file descriptor. A client (or a page, or a script gone wrong) that
opens more than the process may have open (1,024 on many systems) and sends its requests slowly
would leave none for the next client: ``accept`` fails and the server answers nobody until some
close. uvicorn's ``limit_concurrency`` does not help (it answers 503 only after a request's headers
arrived, on a connection it already holds), so the bound is kept here, in uvicorn's h11 protocol:

- at most ``max_connections`` are open (by default what the open-file limit leaves after a margin
  for the engine's pipes, the logs and the models). When one more arrives, the connection that has
  waited longest for its request to arrive (headers not complete, or its body still coming) is
  closed to make room; when every open connection is being answered, the newcomer gets a 503;
- a request's headers must arrive within ``header_timeout_s`` of the connection or of the previous
  response, else the connection is closed (with a 408 when part of a request came). The body has
  its own time-out in server/body.py, answered by the app.

Built on uvicorn's ``H11Protocol`` (``http=`` takes a protocol class): the subclass only adds a timer
and the bound, and reads h11's state, which says whether a request is still arriving.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

HEADER_TIMEOUT_S = 30.0
# asyncio accepts up to the listen backlog's count of connections in one go, before the ones closed to
# make room release their files: the open-file margin covers that batch and the process's other files.
ACCEPT_BATCH = 64  # uvicorn's backlog, so asyncio's batch
FD_MARGIN = ACCEPT_BATCH + 64  # open files kept for everything but connections
WARN_EVERY_S = 10.0  # a flood of connections is logged once in this time, not once a connection
FALLBACK_MAX_CONNECTIONS = 512  # where the open-file limit cannot be read (Windows)

TIMEOUT_RESPONSE = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
                    b"connection: close\r\ncontent-length: 49\r\n\r\n"
                    b"The request did not arrive in time; send it anew.")
BUSY_RESPONSE = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
                 b"retry-after: 5\r\nconnection: close\r\ncontent-length: 64\r\n\r\n"
                 b"The server has as many connections open as it may; retry shortly.")


def default_max_connections() -> int:
    """What the process's open-file limit leaves for connections after ``FD_MARGIN``."""
    try:
        import resource  # Unix only
    except ImportError:
        return FALLBACK_MAX_CONNECTIONS
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(16, min(4096, soft - FD_MARGIN))


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int | None = None  # None: default_max_connections()
    header_timeout_s: float = HEADER_TIMEOUT_S


def protocol_class(limits: ConnectionLimits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with ``limits`` kept (pass it as ``uvicorn.Config(http=...)``)."""
    most = limits.max_connections or default_max_connections()
    warned = [-WARN_EVERY_S]

    def warn(message: str, *args: object) -> None:
        now = asyncio.get_running_loop().time()
        if now - warned[0] >= WARN_EVERY_S:
            warned[0] = now
            log.warning(message, *args)

    class BoundedH11Protocol(H11Protocol):
        _timer: asyncio.TimerHandle | None = None
        _waiting_since = 0.0  # when it began waiting for its current request

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()
            if len(self.connections) > most:
                self._make_room()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request on this connection gets its own time

        # -- the header time-out ------------------------------------------------------
        def _arm(self) -> None:
            self._disarm()
            self._waiting_since = self.loop.time()
            self._timer = self.loop.call_later(limits.header_timeout_s, self._too_slow)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _too_slow(self) -> None:
            self._timer = None
            if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
                return  # its request arrived (a body still coming is the app's to time)
            partial = bool(self.conn.trailing_data[0])
            self._close(TIMEOUT_RESPONSE if partial else b"")

        def _close(self, answer: bytes) -> None:
            if answer and not self.transport.is_closing():
                self.transport.write(answer)
            self.transport.close()

        # -- the bound ----------------------------------------------------------------
        def _arriving(self) -> bool:
            """Whether its request is still arriving (nothing is being answered on it)."""
            if self.transport.is_closing():
                return False
            state = self.conn.their_state
            if state is h11.IDLE:
                return True
            cycle = self.cycle
            return state is h11.SEND_BODY and cycle is not None and not cycle.response_started

        def _make_room(self) -> None:
            others = [c for c in self.connections if c is not self and isinstance(c, BoundedH11Protocol)]
            waiting = [c for c in others if c._arriving()]
            if not waiting:
                warn("%d connections are open, each being answered; refusing more", len(self.connections) - 1)
                self._close(BUSY_RESPONSE)
                return
            oldest = min(waiting, key=lambda c: c._waiting_since)
            warn("%d connections are open (at most %d); closing those waiting longest for their requests",
                 len(self.connections), most)
            oldest._close(TIMEOUT_RESPONSE if oldest.conn.their_state is not h11.IDLE
                          or oldest.conn.trailing_data[0] else b"")

    return BoundedH11Protocol
