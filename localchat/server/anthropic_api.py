"""Anthropic's Messages API: ``POST /v1/messages`` (one message, or its stream of events) and
``POST /v1/messages/count_tokens``, for Claude Code and other Anthropic clients.

The body becomes one GenerationRequest (anthropic_shapes.py) run as a job of the "anthropic"
surface; every error, the guard's included, is answered in Anthropic's shape
(``{"type": "error", "error": {"type", "message"}}``). The key may come as ``x-api-key`` (the
guard reads it); ``anthropic-version`` is accepted whatever its date, since the shapes answered
are those every version since 2023-06-01 shares. ``count_tokens`` renders the conversation with
the model's own template and tokenizer (a ``count_only`` job: no model pass), so the count is the
one the reply will read.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from localchat.engine.types import GenerationResult
from localchat.host.sources import Surface
from localchat.server.anthropic_shapes import MessageStream, message, parse_messages
from localchat.server.errors import ApiError, error_response

if TYPE_CHECKING:
    from localchat.server.app import Api


class AnthropicRoutes:
    def __init__(self, api: Api) -> None:
        self.api = api

    def routes(self) -> list[Route]:
        return [
            Route("/v1/messages", self.messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", self.count_tokens, methods=["POST"]),
        ]

    async def messages(self, request: Request) -> Response:
        try:
            parsed = await self.api.parsed(request, parse_messages, Surface.ANTHROPIC)
            mid, model = f"msg_{uuid.uuid4().hex[:24]}", self.api.model_for(request)
            stream = MessageStream(mid, model, parsed)

            def whole(result: GenerationResult) -> dict[str, Any]:
                return message(mid, model, result, parsed)

            return await self.api.answer(request, parsed, whole, stream.render, Surface.ANTHROPIC)
        except ApiError as exc:
            return error_response(exc, Surface.ANTHROPIC)

    async def count_tokens(self, request: Request) -> Response:
        try:
            parsed = await self.api.parsed(request, parse_messages, Surface.ANTHROPIC)
            tokens = await self.api.count_prompt(request, parsed.request, Surface.ANTHROPIC)
            if tokens is None:
                return Response(status_code=499)
            return JSONResponse({"input_tokens": tokens})
        except ApiError as exc:
            return error_response(exc, Surface.ANTHROPIC)
