"""The real app on a fake engine with tool servers of the test suite's own (tests/toolservers), for the
tools-in-the-chat tests: mcp.json written before the app starts, a loaded model, helpers to wait."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from localchat.app import AppParts, build_main_window
from localchat.engine.types import GenerationRequest
from tests.toolservers.conftest import SCRIPT
from tests.ui.fakes import FakeEngine

WAIT_MS = 60_000


def server(kind: str, *extra: str, **entry: Any) -> dict[str, Any]:
    """An mcp.json entry that runs one of the test servers over stdio."""
    return {"command": sys.executable, "args": [SCRIPT, kind, *extra], **entry}


def write_mcp(config: Path, servers: dict[str, Any]) -> Path:
    config.mkdir(parents=True, exist_ok=True)
    path = config / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))
    return path


@contextmanager
def tools_app(qtbot: Any, tmp_path: Path, servers: dict[str, Any], *, tool_use: bool = True,
              load: bool = True) -> Iterator[AppParts]:
    write_mcp(tmp_path / "config", servers)
    engine = FakeEngine()
    engine.tool_use = tool_use
    parts = build_main_window(tmp_path / "config", tmp_path / "data", engine=engine, log_dir=tmp_path / "log")
    qtbot.addWidget(parts.window)
    if load:
        model = tmp_path / "model.gguf"
        model.write_bytes(b"GGUF")
        parts.window.load_model(str(model))
    try:
        yield parts
    finally:
        parts.window.session.cancel()
        assert parts.tools is not None
        parts.tools.close()


def fake(parts: AppParts) -> FakeEngine:
    assert isinstance(parts.engine, FakeEngine)
    return parts.engine


def request(qtbot: Any, parts: AppParts, count: int) -> GenerationRequest:
    """The engine's ``count``-th request, once it has been sent (servers start before the first)."""
    engine = fake(parts)
    qtbot.waitUntil(lambda: len(engine.requests) >= count, timeout=WAIT_MS)
    return engine.requests[count - 1]
