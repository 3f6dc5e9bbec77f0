"""OpenAI's Responses API: ``POST /v1/responses`` (one response, or its stream of events),
``GET /v1/responses/{id}`` and ``DELETE /v1/responses/{id}``, for Codex CLI, the OpenAI Agents SDK
and other Responses clients.

The body becomes one GenerationRequest (responses_shapes.py) run as a job of the "responses"
surface; errors keep OpenAI's shape. Answers made with ``store`` (the default) are kept in memory
(response_store.py) so that ``previous_response_id`` continues their conversation and GET finds
them; one that has gone is a 404 that says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from localchat.engine.types import ChatMessage, GenerationResult
from localchat.host.sources import Surface
from localchat.server.errors import ApiError, error_response
from localchat.server.response_store import ResponseStore, StoredResponse
from localchat.server.responses_shapes import (
    ResponseHead,
    ResponseStream,
    gone,
    new_id,
    output_items,
    parse_responses,
)

if TYPE_CHECKING:
    from localchat.server.app import Api


class ResponsesRoutes:
    def __init__(self, api: Api) -> None:
        self.api = api
        self.store = ResponseStore()

    def routes(self) -> list[Route]:
        return [
            Route("/v1/responses", self.create, methods=["POST"]),
            Route("/responses", self.create, methods=["POST"]),
            Route("/v1/responses/{rid}", self.get, methods=["GET"]),
            Route("/v1/responses/{rid}", self.delete, methods=["DELETE"]),
        ]

    def _history(self, rid: str) -> tuple[ChatMessage, ...]:
        stored = self.store.get(rid)
        if stored is None:
            raise gone(rid)
        return stored.conversation

    async def create(self, request: Request) -> Response:
        try:
            body = await self.api.read_json(request)
            await self.api.select_model(request, body.get("model"), Surface.RESPONSES)
            self.api.check_ready()
            req = parse_responses(body, self.api.info_for(request), self.api.limits(request), self._history)
            self.api.check_model(req.parsed.model, request=request)
            head = ResponseHead(new_id("resp"), self.api.model_for(request), req)

            def done(answer: dict[str, Any], result: GenerationResult) -> None:
                if req.store:
                    reply = ChatMessage(
                        "assistant", result.text, result.tool_calls, reasoning=result.reasoning
                    )
                    self.store.put(head.rid, StoredResponse(answer, (*req.conversation, reply)))

            def whole(result: GenerationResult) -> dict[str, Any]:
                answer = head.body("completed", output_items(result), result)
                done(answer, result)
                return answer

            stream = ResponseStream(head, done)
            return await self.api.answer(request, req.parsed, whole, stream.render, Surface.RESPONSES)
        except ApiError as exc:
            return error_response(exc, Surface.RESPONSES)

    async def get(self, request: Request) -> Response:
        rid = request.path_params["rid"]
        stored = self.store.get(rid)
        if stored is None:
            return error_response(
                ApiError(
                    404,
                    f"There is no stored response {rid!r} here (responses are kept "
                    "in memory, recent ones only).",
                    param="id",
                    code="response_not_found",
                ),
                Surface.RESPONSES,
            )
        return JSONResponse(stored.body)

    async def delete(self, request: Request) -> Response:
        rid = request.path_params["rid"]
        if not self.store.delete(rid):
            return error_response(
                ApiError(
                    404, f"There is no stored response {rid!r} here.", param="id", code="response_not_found"
                ),
                Surface.RESPONSES,
            )
        return JSONResponse({"id": rid, "object": "response.deleted", "deleted": True})
