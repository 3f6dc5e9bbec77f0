"""The test suite's own MCP servers (tests/toolservers/mcp_servers.py) as mcp.json entries, and one
served over streamable HTTP on 127.0.0.1 for the module that asks for it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from localchat.toolservers.config import ServerConfig

SCRIPT = str(Path(__file__).with_name("mcp_servers.py"))


def stdio_server(name: str, kind: str, *extra: str) -> ServerConfig:
    return ServerConfig(name, sys.executable, (SCRIPT, kind, *extra))


class HttpServer:
    def __init__(self, kind: str, *extra: str) -> None:
        self.process = subprocess.Popen([sys.executable, SCRIPT, kind, *extra, "--http"],
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith("PORT "), line
        self.url = f"http://127.0.0.1:{int(line.split()[1])}/mcp"

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(10)


@pytest.fixture
def http_faulty() -> Iterator[HttpServer]:
    server = HttpServer("faulty")
    yield server
    server.stop()
