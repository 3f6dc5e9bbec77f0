"""OpenAI's chat and text completions, and llama.cpp's native /completion and /infill.

Each route parses its body (server/parsing.py) into one GenerationRequest, runs
it as a job through the shared ``Api`` and shapes what comes back
(server/shapes.py): one JSON body, or server-sent events as OpenAI and
llama-server send them.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from localchat.engine.types import GenerationResult
from localchat.host.events import Finished, JobEvent, Tokens
from localchat.server import shapes
from localchat.server.errors import ApiError, failure_error
from localchat.server.parsing import ParsedRequest, parse_chat, parse_completion
from localchat.server.streaming import sse

if TYPE_CHECKING:
    from localchat.server.app import Api


class OpenAIRoutes:
    def __init__(self, api: Api) -> None:
        self.api = api

    def routes(self) -> list[Route]:
        return [
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
            Route("/chat/completions", self.chat, methods=["POST"]),
            Route("/v1/completions", self.completions, methods=["POST"]),
            Route("/completion", self.native_completion, methods=["POST"]),
            Route("/completions", self.native_completion, methods=["POST"]),
            Route("/infill", self.infill, methods=["POST"]),
        ]

    async def chat(self, request: Request) -> Response:
        try:
            parsed = await self.api.parsed(request, parse_chat)
            return await self._chat(request, parsed)
        except ApiError as exc:
            return exc.response()

    async def _chat(self, request: Request, parsed: ParsedRequest) -> Response:
        rid, created, model = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time()), self.api.model_id
        opening = [sse(shapes.chat_chunk(rid, created, model, {"role": "assistant", "content": ""}))]

        def render(event: JobEvent) -> list[bytes]:
            out, opening[:] = list(opening), []
            if isinstance(event, Tokens):
                if event.event.text:
                    out.append(sse(shapes.chat_chunk(rid, created, model, {"content": event.event.text})))
            elif isinstance(event, Finished):
                result = event.result
                last = shapes.chat_chunk(rid, created, model, {}, shapes.finish_reason(result.finish_reason))
                last["timings"] = shapes.timings(result.stats)
                last.update(shapes.extras(result, parsed.mode, parsed.warning))
                out.append(sse(last))
                if parsed.include_usage:
                    tail = shapes.chat_chunk(rid, created, model, {})
                    tail["choices"] = []
                    tail["usage"] = shapes.usage(result.stats)
                    tail["timings"] = last["timings"]
                    out.append(sse(tail))
                out.append(b"data: [DONE]\n\n")
            else:
                out.append(sse(failure_error(event.failure).body()))
            return out

        def whole(result: GenerationResult) -> dict[str, Any]:
            return shapes.chat_completion(rid, created, model, result, parsed.mode, parsed.warning)

        return await self.api.answer(request, parsed, whole, render)

    async def completions(self, request: Request) -> Response:
        try:
            parsed = await self.api.parsed(request, parse_completion)
            return await self._completions(request, parsed)
        except ApiError as exc:
            return exc.response()

    async def _completions(self, request: Request, parsed: ParsedRequest) -> Response:
        rid, created, model = f"cmpl-{uuid.uuid4().hex[:24]}", int(time.time()), self.api.model_id

        def render(event: JobEvent) -> list[bytes]:
            if isinstance(event, Tokens):
                text = event.event.text
                return [sse(shapes.text_chunk(rid, created, model, text))] if text else []
            if isinstance(event, Finished):
                result = event.result
                last = shapes.text_chunk(rid, created, model, "", shapes.finish_reason(result.finish_reason))
                last["timings"] = shapes.timings(result.stats)
                last.update(shapes.extras(result, parsed.mode, parsed.warning))
                if parsed.include_usage:
                    last["usage"] = shapes.usage(result.stats)
                return [sse(last), b"data: [DONE]\n\n"]
            return [sse(failure_error(event.failure).body())]

        def whole(result: GenerationResult) -> dict[str, Any]:
            return shapes.text_completion(rid, created, model, result, parsed.mode, parsed.warning)

        return await self.api.answer(request, parsed, whole, render)

    async def native_completion(self, request: Request) -> Response:
        try:
            parsed = await self.api.parsed(request, parse_completion, native=True)
            return await self._native(request, parsed)
        except ApiError as exc:
            return exc.response()

    async def infill(self, request: Request) -> Response:
        try:
            parsed = await self.api.parsed(request, parse_completion, native=True, infill=True)
            return await self._native(request, parsed)
        except ApiError as exc:
            return exc.response()

    async def _native(self, request: Request, parsed: ParsedRequest) -> Response:
        model = self.api.model_id

        def render(event: JobEvent) -> list[bytes]:
            if isinstance(event, Tokens):
                text = event.event.text
                return [sse({"content": text, "stop": False})] if text else []
            if isinstance(event, Finished):
                return [sse(shapes.native_final(model, event.result, parsed.mode, parsed.warning, ""))]
            return [sse(failure_error(event.failure).body())]

        def whole(result: GenerationResult) -> dict[str, Any]:
            return shapes.native_final(model, result, parsed.mode, parsed.warning, result.text)

        return await self.api.answer(request, parsed, whole, render)
