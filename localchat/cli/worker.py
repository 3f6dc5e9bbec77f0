"""``localchat worker``: lend this computer's CPU (or GPU) to another localchat over llama.cpp RPC.

The server is ggml's own (``ggml_backend_rpc_start_server``, in the library
llama-cpp-python ships when built with ``-DGGML_RPC=on``); no separate binary.
It serves one client at a time and has no authentication, so it binds
127.0.0.1 unless ``--host`` names another address, and then prints
llama.cpp's own warning.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import socket
import sys
from typing import Any

from localchat.cli.common import fail, whole
from localchat.engine.rpc_wire import DEFAULT_PORT, PROTOCOL_VERSION, Endpoint

OPEN_NETWORK_WARNING = """\
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
WARNING: Host ('{host}') is != '127.0.0.1'
         Never expose the RPC server to an open network!
         This is an experimental feature and is not secure!
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"""


def register(sub: Any) -> None:
    p = sub.add_parser("worker", help="serve this computer's CPU/GPU to another localchat (llama.cpp RPC)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this computer only)")
    p.add_argument("--port", type=whole(0, 65535), default=DEFAULT_PORT,
                   help=f"port (default {DEFAULT_PORT})")
    p.add_argument("--threads", type=whole(1), default=None, help="CPU threads (default: physical cores)")
    p.add_argument("--cache", default=None, metavar="DIR",
                   help="keep received tensors in DIR, so a model loads faster the next time")
    p.set_defaults(func=run)


def _port_free(host: str, port: int) -> str | None:
    """None if (host, port) can be bound now, else why not in words."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError as exc:
        if exc.errno in (98, 48, 10048):  # EADDRINUSE on Linux, macOS, Windows
            return f"port {port} on {host} is already in use (another worker?); choose another with --port"
        return f"cannot listen on {host}:{port} ({exc.strerror or exc})"
    return None


def run(args: argparse.Namespace) -> int:
    from localchat.engine.backend import physical_cores
    from localchat.engine.devices import RPC_MISSING, start_server, supports_rpc
    from localchat.engine.errors import EngineError

    if not 0 < args.port < 65536:
        return fail(f"the port {args.port} is out of range (1-65535)")
    if not supports_rpc():
        return fail(RPC_MISSING)
    problem = _port_free(args.host, args.port)
    if problem:
        return fail(problem)
    if args.host != "127.0.0.1":
        print(OPEN_NETWORK_WARNING.format(host=args.host), file=sys.stderr, flush=True)
    if args.cache:
        from pathlib import Path

        try:
            Path(args.cache).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return fail(f"cannot use the cache folder {args.cache} ({exc.strerror or exc})")
    threads = args.threads or physical_cores()
    version = ".".join(map(str, PROTOCOL_VERSION))
    print(f"localchat worker listening on {Endpoint(args.host, args.port)} "
          f"(RPC protocol {version}, {threads} threads); Ctrl+C stops it", flush=True)
    # The server loops in C: let Ctrl+C end the process instead of waiting for Python's handler.
    with contextlib.suppress(ValueError):  # not the main thread (tests calling run directly)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        start_server(args.host, args.port, threads, args.cache)
    except EngineError as exc:
        return fail(str(exc))
    return fail(f"the worker stopped: it could not listen on {Endpoint(args.host, args.port)}")
