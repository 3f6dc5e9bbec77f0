"""The few bytes of llama.cpp's RPC protocol that localchat speaks itself: endpoints and the HELLO probe.

Pure Python sockets, no llama_cpp: the app and its services use this to check
a worker before the engine process hands it to ggml (whose client aborts the
whole process on a worker it cannot reach or whose protocol differs), and to
name the worker that went away after the engine process died.

The wire format (ggml-rpc.cpp): a request is ``cmd (1 byte) | size (u64 LE) |
payload``, a response ``size (u64 LE) | payload``. HELLO is command 14; its
request carries 24 bytes of transport capabilities (zeros: plain TCP), its
response ``major, minor, patch, padding`` and 24 bytes of capabilities. An
RPC server serves one client at a time, so a worker that is busy with another
machine accepts the connection but answers only when that client leaves: the
probe reports that as "busy", not as dead.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from enum import Enum

# The protocol of the ggml RPC backend inside the pinned llama-cpp-python (0.3.36: RPC_PROTO 7.0.0).
# A client accepts a server of the same major version and a minor version not above its own.
PROTOCOL_VERSION = (7, 0, 0)
DEFAULT_PORT = 50052

_CMD_HELLO = 14
_CAPS_SIZE = 24


class WorkerAddressError(ValueError):
    """A worker address that is not ``host:port``."""


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_endpoint(text: str) -> Endpoint:
    """``host:port`` (IPv6 as ``[addr]:port``); a bare host gets the default port."""
    raw = text.strip()
    if not raw:
        raise WorkerAddressError("A worker address is empty; write it as host:port, e.g. 192.168.1.20:50052.")
    if raw.startswith("["):
        host, _, rest = raw[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif raw.count(":") == 1:
        host, _, port_text = raw.partition(":")
    elif ":" in raw:
        raise WorkerAddressError(f"Write the IPv6 worker address {raw!r} in brackets: [{raw}]:PORT.")
    else:
        host, port_text = raw, ""
    if not host:
        raise WorkerAddressError(f"The worker address {raw!r} has no host; write it as host:port.")
    if not port_text:
        return Endpoint(host, DEFAULT_PORT)
    try:
        port = int(port_text)
    except ValueError:
        raise WorkerAddressError(f"The worker address {raw!r} has no valid port number.") from None
    if not 0 < port < 65536:
        raise WorkerAddressError(f"The worker port {port} is out of range (1-65535).")
    return Endpoint(host, port)


def parse_endpoints(text: str) -> tuple[Endpoint, ...]:
    """A comma-separated list of workers; duplicates are refused (ggml would connect twice)."""
    endpoints = tuple(parse_endpoint(part) for part in text.split(",") if part.strip())
    seen: set[Endpoint] = set()
    for endpoint in endpoints:
        if endpoint in seen:
            raise WorkerAddressError(f"The worker {endpoint} is listed twice.")
        seen.add(endpoint)
    return endpoints


class ProbeStatus(Enum):
    READY = "ready"
    BUSY = "busy"  # connected, but it serves another client and has not answered yet
    UNREACHABLE = "unreachable"
    VERSION_MISMATCH = "version mismatch"
    NOT_RPC = "not an RPC worker"


@dataclass(frozen=True)
class ProbeResult:
    endpoint: Endpoint
    status: ProbeStatus
    version: tuple[int, int, int] | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status is ProbeStatus.READY

    def sentence(self) -> str:
        """What a user is told about this worker."""
        ours = ".".join(map(str, PROTOCOL_VERSION))
        if self.status is ProbeStatus.READY:
            return f"The worker {self.endpoint} is ready."
        if self.status is ProbeStatus.BUSY:
            return (
                f"The worker {self.endpoint} is busy serving another computer "
                "(a worker serves one at a time); stop the other one or start a second worker."
            )
        if self.status is ProbeStatus.VERSION_MISMATCH:
            theirs = ".".join(map(str, self.version or (0, 0, 0)))
            return (
                f"The worker {self.endpoint} speaks RPC protocol {theirs}, this localchat speaks {ours}: "
                "install the same localchat version on both computers."
            )
        if self.status is ProbeStatus.NOT_RPC:
            return f"Something answers at {self.endpoint}, but it is not a localchat or llama.cpp RPC worker."
        detail = f" ({self.detail})" if self.detail else ""
        return (
            f"The worker {self.endpoint} cannot be reached{detail}; check that `localchat worker` "
            "runs there and that its address and port are right."
        )


def compatible(version: tuple[int, int, int]) -> bool:
    return version[0] == PROTOCOL_VERSION[0] and version[1] <= PROTOCOL_VERSION[1]


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the worker closed the connection")
        buf.extend(chunk)
    return bytes(buf)


def probe(endpoint: Endpoint, timeout: float = 3.0) -> ProbeResult:
    """Connect, say HELLO, read the worker's protocol version, leave. Never raises."""
    try:
        sock = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout)
    except OSError as exc:
        return ProbeResult(endpoint, ProbeStatus.UNREACHABLE, detail=exc.strerror or str(exc))
    try:
        sock.settimeout(timeout)
        sock.sendall(struct.pack("<BQ", _CMD_HELLO, _CAPS_SIZE) + bytes(_CAPS_SIZE))
        try:
            (size,) = struct.unpack("<Q", _recv_exact(sock, 8))
        except TimeoutError:
            return ProbeResult(endpoint, ProbeStatus.BUSY)
        if size != 4 + _CAPS_SIZE:
            return ProbeResult(endpoint, ProbeStatus.NOT_RPC, detail=f"unexpected reply of {size} bytes")
        payload = _recv_exact(sock, size)
        version = (payload[0], payload[1], payload[2])
        if not compatible(version):
            return ProbeResult(endpoint, ProbeStatus.VERSION_MISMATCH, version)
        return ProbeResult(endpoint, ProbeStatus.READY, version)
    except (ConnectionError, OSError) as exc:
        return ProbeResult(endpoint, ProbeStatus.NOT_RPC, detail=str(exc))
    finally:
        sock.close()


def first_gone(endpoints: tuple[Endpoint, ...] | list[Endpoint], timeout: float = 1.0) -> Endpoint | None:
    """The first worker that refuses connections (for naming the one that died mid-reply)."""
    for endpoint in endpoints:
        try:
            with socket.create_connection((endpoint.host, endpoint.port), timeout=timeout):
                pass
        except OSError:
            return endpoint
    return None


def gone_worker(addresses: tuple[str, ...] | list[str], timeout: float = 0.3) -> Endpoint | None:
    """``first_gone`` over a config's ``host:port`` strings; None when one of them does not parse
    (the load itself names a malformed address)."""
    try:
        endpoints = [parse_endpoint(a) for a in addresses]
    except WorkerAddressError:
        return None
    return first_gone(endpoints, timeout=timeout)
