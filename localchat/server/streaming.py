"""Jobs as the event loop sees them, and streamed responses.

``JobStream`` is one job on the engine's supervisor, awaited on the event loop:
the supervisor's thread hands events to the job's queue and wakes the loop
through ``loop.call_soon_threadsafe``, so no thread waits per request. A client
that disconnects, before or during the reply, cancels its job; the engine stops
at its next step. ``EventStream`` sends a response's chunks as they come
(server-sent events or NDJSON) and runs its ``on_close`` however it ends.
"""

from __future__ import annotations

import asyncio
import json
import queue
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from localchat.engine.types import EngineConfig, GenerationRequest
from localchat.host.events import JobEvent
from localchat.host.jobs import JobHandle
from localchat.host.supervisor import EngineSupervisor, EngineUnavailable
from localchat.server.errors import failure_error

DISCONNECT_CHECK_S = 0.5
SSE = "text/event-stream"  # OpenAI's and Anthropic's streams
NDJSON = "application/x-ndjson"  # Ollama's: one JSON object a line


class JobStream:
    """One job's events, awaited on the event loop (the supervisor's thread wakes it through ``notify``)."""

    def __init__(self, supervisor: EngineSupervisor, request: GenerationRequest, source: str,
                 model: EngineConfig | None = None) -> None:
        """``model``: the model the job must run on (loaded first if another is loaded by then)."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self.supervisor = supervisor
        try:
            self.handle: JobHandle = supervisor.submit(request, source=source, notify=self._notify,
                                                       model=model)
        except EngineUnavailable as exc:
            raise failure_error(exc.failure) from exc
        assert self.handle.events is not None
        self._events = self.handle.events

    def _notify(self, _event: JobEvent | None) -> None:
        self._loop.call_soon_threadsafe(self._wake.set)

    async def next(self, is_disconnected: Callable[[], Awaitable[bool]] | None = None) -> JobEvent | None:
        """The next event; None if ``is_disconnected`` says the client left while waiting."""
        while True:
            self._wake.clear()
            try:
                return self._events.get_nowait()
            except queue.Empty:
                pass
            if is_disconnected is None:
                await self._wake.wait()
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), DISCONNECT_CHECK_S)
            except TimeoutError:
                if await is_disconnected():
                    return None

    def close(self) -> None:
        """Cancel the job unless it has ended (the client left, or the response failed)."""
        if not self.handle.done:
            self.supervisor.cancel(self.handle)


class EventStream(Response):
    """Server-sent events from ``chunks``; ``on_close`` runs however it ends (done, failed, client gone)."""

    def __init__(self, chunks: AsyncIterator[bytes], on_close: Callable[[], None],
                 media_type: str = SSE) -> None:
        # Not Response.__init__: it would declare Content-Length 0 for the (empty) body.
        self.status_code = 200
        self.background = None
        self.raw_headers = [
            (b"content-type", f"{media_type}; charset=utf-8".encode()),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
        ]
        self.chunks = chunks
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async with anyio.create_task_group() as tg:

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tg.cancel_scope.cancel()

                async def pump() -> None:
                    async for chunk in self.chunks:
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
                tg.start_soon(pump)
        except OSError:
            pass  # the client went away mid-send
        finally:
            self.on_close()


def sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"


def sse_event(name: str, obj: Any) -> bytes:
    """A named server-sent event (``event: NAME``), as Anthropic's and the Responses API's streams send."""
    return f"event: {name}\n".encode() + sse(obj)


def ndjson(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
