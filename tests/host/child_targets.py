"""Entry points for the child-process layer's tests (imported by name in the spawned child)."""

from __future__ import annotations

import os
import sys
import time
from multiprocessing.connection import Connection

from localchat.host.child import ParentLink, configure_logging


def echo(conn: Connection, prefix: str) -> None:
    """Answers every message with (prefix, message); "exit N" exits with code N; "hang" ignores
    everything after it; EOF ends the loop."""
    hung = False
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if hung:
            continue
        if isinstance(message, str) and message.startswith("exit "):
            os._exit(int(message.split()[1]))
        if message == "hang":
            hung = True
            continue
        conn.send((prefix, message))


def watch_parent(conn: Connection, marker: str, log_path: str) -> None:
    """Writes ``marker`` once the app's end of the pipe closes (ParentLink's on_gone), then leaves."""
    configure_logging(log_path, "test-child")
    import logging

    logging.getLogger("child-test").info("watching the parent")
    link = ParentLink(conn, lambda message: link.send(("got", message)), lambda: None, name="test")
    link.start()
    link.send("ready")
    if not link.gone.wait(30):
        sys.exit(3)
    with open(marker, "w", encoding="utf-8") as fh:
        fh.write("parent gone")
    time.sleep(0.05)
