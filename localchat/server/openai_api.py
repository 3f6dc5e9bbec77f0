"""OpenAI's chat and text completions, and llama.cpp's native /completion, /infill and /props.

Each route parses its body (server/parsing.py) into one GenerationRequest, runs
it as a job through the shared ``Api`` and shapes what comes back
(server/shapes.py): one JSON body, or server-sent events as OpenAI and
llama-server send them. Chat's tools and structured output are read by
server/chat_fields.py and its stream is server/chat_stream.py; when the engine
refuses a request's schema or grammar (it compiles them), the 400 names the field
the constraint came from (``refused_field``).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import time
import uuid
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from localchat.catalog.gguf import read_chat_template
from localchat.engine.types import GenerationResult, SamplingParams
from localchat.host.events import Finished, JobEvent, Tokens
from localchat.server import shapes
from localchat.server.chat_stream import ChatStream
from localchat.server.errors import RETRY_AFTER_S, ApiError, failure_error
from localchat.server.parsing import ParsedRequest, parse_chat, parse_completion
from localchat.server.streaming import sse

if TYPE_CHECKING:
    from localchat.server.app import Api


def package_version() -> str:
    try:
        return importlib.metadata.version("localchat")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown"


def refused_field(error: ApiError, parsed: ParsedRequest) -> ApiError:
    """An engine's refusal of a request (``invalid_request``: a schema or grammar that does not
    compile, or that no text matches; a tool's schema) with the field it came from named."""
    if error.code != "invalid_request" or error.param is not None:
        return error
    req = parsed.request
    field = parsed.constraint_field or ("tools" if req.tools else "")
    if not field:
        return error
    error.param = field
    error.message = f"{error.message.rstrip('.')} (in '{field}')."
    return error


class OpenAIRoutes:
    def __init__(self, api: Api) -> None:
        self.api = api
        self._template = ("", "")  # (model path, its chat template) for /props

    def routes(self) -> list[Route]:
        return [
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
            Route("/chat/completions", self.chat, methods=["POST"]),
            Route("/v1/completions", self.completions, methods=["POST"]),
            Route("/completion", self.native_completion, methods=["POST"]),
            Route("/completions", self.native_completion, methods=["POST"]),
            Route("/infill", self.infill, methods=["POST"]),
            Route("/props", self.props, methods=["GET"]),
            Route("/v1/props", self.props, methods=["GET"]),
        ]

    async def props(self, request: Request) -> Response:
        """llama-server's ``/props``: the served model, its chat template and default settings (web
        UIs and IDE plugins read ``n_ctx`` and the template from here)."""
        info = self.api.supervisor.state.info
        if info is None:
            try:
                self.api.check_ready()
            except ApiError as exc:
                return exc.response()
            return ApiError(503, "The model is still loading; try again in a few seconds.",
                            type="unavailable_error", code="model_loading",
                            headers={"Retry-After": str(RETRY_AFTER_S)}).response()
        path = info.target.path
        if self._template[0] != path:
            self._template = (path, await asyncio.to_thread(read_chat_template, path))
        defaults = SamplingParams()
        return JSONResponse({
            "default_generation_settings": {
                "n_ctx": info.n_ctx,
                "model": self.api.model_id,
                "speculative": info.draft is not None,
                "params": {
                    "n_predict": self.api.limits().max_tokens,
                    "temperature": defaults.temperature,
                    "top_k": defaults.top_k,
                    "top_p": defaults.top_p,
                    "min_p": defaults.min_p,
                    "repeat_penalty": defaults.repeat_penalty,
                    "repeat_last_n": defaults.repeat_last_n,
                    "speculative.mode": self.api.settings.default_mode,
                },
            },
            "total_slots": 1,
            "model_path": path,
            "model_alias": self.api.model_id,
            "modalities": {"vision": False, "audio": False},
            "chat_template": self._template[1],
            "capabilities": shapes.capabilities(info),
            "build_info": f"localchat {package_version()}",
        })

    async def chat(self, request: Request) -> Response:
        try:
            parsed = await self.api.parsed(request, parse_chat)
            return await self._chat(request, parsed)
        except ApiError as exc:
            return exc.response()

    async def _chat(self, request: Request, parsed: ParsedRequest) -> Response:
        rid, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())
        model = self.api.model_for(request)
        stream = ChatStream(rid, created, model, parsed)

        def whole(result: GenerationResult) -> dict[str, Any]:
            return shapes.chat_completion(rid, created, model, result, parsed.mode, parsed.warning)

        try:
            return await self.api.answer(request, parsed, whole, stream.render)
        except ApiError as exc:
            raise refused_field(exc, parsed) from None

    async def completions(self, request: Request) -> Response:
        try:
            parsed = await self.api.parsed(request, parse_completion)
            return await self._completions(request, parsed)
        except ApiError as exc:
            return exc.response()

    async def _completions(self, request: Request, parsed: ParsedRequest) -> Response:
        rid, created, model = f"cmpl-{uuid.uuid4().hex[:24]}", int(time.time()), self.api.model_for(request)

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
        model = self.api.model_for(request)

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
