"""A real API server on 127.0.0.1 (an ephemeral port) over a real engine process, for the server tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import openai

from localchat.engine.types import EngineConfig
from localchat.host.events import Event
from localchat.host.supervisor import EngineSupervisor
from localchat.server import ServerSettings, ServerThread, bind_socket, create_app
from localchat.server.model_shelf import ModelShelf

API_KEY = "test-key"


@dataclass
class Served:
    url: str  # http://127.0.0.1:PORT
    supervisor: EngineSupervisor
    settings: ServerSettings
    events: list[Event]  # what the supervisor told: state snapshots and every job's events

    def client(self, **kw: object) -> openai.OpenAI:
        kw.setdefault("max_retries", 0)
        return openai.OpenAI(base_url=self.url + "/v1", api_key=self.settings.api_key or "none", **kw)

    def http(self, **kw: object) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.settings.api_key}"} if self.settings.api_key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=120, **kw)


@contextlib.contextmanager
def serve(
    target: Path | None,
    draft: Path | None = None,
    *,
    ctx: int = 1024,
    queue: int = 4,
    start: bool = True,
    shelf: ModelShelf | None = None,
    **settings: object,
) -> Iterator[Served]:
    config = EngineConfig(str(target or "never-loaded.gguf"), str(draft) if draft else None, n_ctx=ctx)
    events: list[Event] = []
    supervisor = EngineSupervisor(config, max_queue=queue, listener=events.append)
    base = ServerSettings(model_id="test-model", api_key=API_KEY, max_body_bytes=1024 * 1024, max_tokens=512)
    settings_obj = replace(base, **settings)  # type: ignore[arg-type]
    thread = ServerThread(create_app(supervisor, settings_obj, shelf), bind_socket("127.0.0.1", 0),
                          settings_obj.connections())
    if start:
        supervisor.start()
    thread.start()
    try:
        if start:
            supervisor.wait_ready(180)
        yield Served(thread.url, supervisor, settings_obj, events)
    finally:
        thread.stop()
        supervisor.close()
