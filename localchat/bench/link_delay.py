"""Added link latency between this computer and its workers, for ``localchat bench --link-latency``.

A ``DelayRelay`` listens on 127.0.0.1 and passes every connection on to a worker, delivering each
chunk of bytes ``delay_s`` after it arrived, in each direction (a LAN is about 0.2-1 ms each way,
Wi-Fi 2-5 ms). It stands in for ``tc netem``, which needs the sch_netem kernel module (absent on
some CI kernels) and root; it adds latency only, not a bandwidth limit, so the figures are the
latency part of a real link. The delay is read for every chunk, so one engine loaded through the
relay is measured at several latencies in one run: ``DelayedEngine`` sets it before each reply.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time
from collections.abc import Callable, Sequence

from localchat.bench.runner import BenchEngine
from localchat.engine.rpc_wire import Endpoint, probe
from localchat.engine.types import GenerationRequest, GenerationResult, TokenEvent


class DelayRelay:
    """A TCP relay 127.0.0.1:``port`` -> ``target`` holding each chunk ``delay_s`` in each direction."""

    def __init__(self, target: Endpoint, delay_s: float = 0.0) -> None:
        self.target = target
        self.delay_s = delay_s
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self.endpoint = Endpoint("127.0.0.1", int(self._sock.getsockname()[1]))
        self._stop = threading.Event()
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, name="delay-relay", daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        for s in [self._sock, *self._open]:
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection((self.target.host, self.target.port))
            except OSError:
                client.close()
                continue
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._open += [client, upstream]
            self._pipe(client, upstream)
            self._pipe(upstream, client)

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        """Read ``src`` as fast as it comes; write each chunk to ``dst`` once it is due."""
        chunks: queue.Queue[tuple[float, bytes]] = queue.Queue()

        def read() -> None:
            while True:
                try:
                    data = src.recv(1 << 20)
                except OSError:
                    data = b""
                chunks.put((time.monotonic() + self.delay_s, data))
                if not data:
                    return

        def write() -> None:
            while True:
                due, data = chunks.get()
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if not data:
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                    return
                try:
                    dst.sendall(data)
                except OSError:
                    return

        threading.Thread(target=read, name="delay-relay-read", daemon=True).start()
        threading.Thread(target=write, name="delay-relay-write", daemon=True).start()


def round_trip_ms(endpoint: Endpoint, n: int = 5) -> float:
    """The median time of ``n`` HELLO exchanges with the worker at ``endpoint`` (a new connection each)."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        probe(endpoint)
        times.append(time.perf_counter() - t)
    return 1000 * sorted(times)[len(times) // 2]


class DelayedEngine:
    """A BenchEngine: ``engine`` (loaded through ``relays``) with the relays set to ``delay_s`` for each
    call."""

    def __init__(self, engine: BenchEngine, relays: Sequence[DelayRelay], delay_s: float) -> None:
        self.engine, self.relays, self.delay_s = engine, list(relays), delay_s

    def _set(self) -> None:
        for relay in self.relays:
            relay.delay_s = self.delay_s

    def reset(self) -> None:
        self._set()
        self.engine.reset()

    def generate(
        self,
        request: GenerationRequest,
        on_event: Callable[[TokenEvent], None] | None = None,
        should_cancel: Callable[[], bool] | None = None,
    ) -> GenerationResult:
        self._set()
        return self.engine.generate(request, on_event, should_cancel)
