"""Errors of the HTTP API: one ``ApiError`` (status, sentence), answered in each surface's own shape.

Every failure a client can cause or meet (bad JSON, a wrong type, an unknown
model, a full queue, an engine that is loading or died) becomes an ``ApiError``
with its HTTP status and one sentence; the app turns it into JSON, so a client
never sees a traceback and the server keeps serving. OpenAI's shape
(``{"error": {"message", "type", "param", "code"}}``, also the Responses API's)
is ``ApiError.body``; Anthropic's (``{"type": "error", "error": {"type",
"message"}}``) and Ollama's (``{"error": "sentence"}``) are made from the same
error by ``error_body``. Engine failures get their status from ONE table
(``FAILURE_STATUS``) whatever the surface.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from localchat.host.events import Failure, FailureKind
from localchat.host.failure_words import Audience, sentence
from localchat.host.sources import Surface


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def bad_request(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def server_error(message: str, code: str = "engine_error") -> ApiError:
    return ApiError(500, message, type="server_error", code=code)


# How each Failure of the engine is answered: HTTP status, OpenAI error type, code. One table for the
# whole API: decisions read the kind, never the sentence.
FAILURE_STATUS: dict[FailureKind, tuple[int, str, str]] = {
    FailureKind.CONTEXT_EXCEEDED: (400, "invalid_request_error", "context_length_exceeded"),
    FailureKind.INVALID_REQUEST: (400, "invalid_request_error", "invalid_request"),
    FailureKind.QUEUE_FULL: (429, "rate_limit_error", "queue_full"),
    FailureKind.NO_MODEL: (503, "unavailable_error", "no_model"),
    FailureKind.LOAD_FAILED: (503, "unavailable_error", "model_load_failed"),
    FailureKind.CLOSED: (503, "unavailable_error", "engine_unavailable"),
    FailureKind.CANCELLED: (503, "unavailable_error", "cancelled"),
    FailureKind.ENGINE_DIED: (500, "server_error", "engine_died"),
    FailureKind.HUNG: (500, "server_error", "engine_died"),
    FailureKind.WORKER_LOST: (500, "server_error", "engine_died"),
    FailureKind.ENGINE_ERROR: (500, "server_error", "engine_error"),
    FailureKind.INTERNAL: (500, "server_error", "internal_error"),
}
RETRY_AFTER_S = 5  # what a client is told to wait while the engine loads or restarts


def failure_error(failure: Failure) -> ApiError:
    """The ApiError answering an engine ``Failure`` (status and code from FAILURE_STATUS)."""
    status, kind, code = FAILURE_STATUS[failure.kind]
    headers: dict[str, str] = {}
    if failure.kind is FailureKind.QUEUE_FULL:
        headers["Retry-After"] = str(failure.retry_after_s)
    elif status == 503:
        headers["Retry-After"] = str(RETRY_AFTER_S)
    param = "messages" if failure.kind is FailureKind.CONTEXT_EXCEEDED else None
    return ApiError(status, sentence(failure, Audience.API), type=kind, param=param, code=code,
                    headers=headers)


# Anthropic's error types, by HTTP status (docs.anthropic.com, "Errors"); the status itself comes from
# the error (FAILURE_STATUS for engine failures), so this only names it in Anthropic's words.
ANTHROPIC_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
}


def error_body(error: ApiError, surface: Surface) -> dict[str, Any]:
    """``error`` in ``surface``'s own shape."""
    if surface is Surface.ANTHROPIC:
        fallback = "invalid_request_error" if error.status < 500 else "api_error"
        kind = ANTHROPIC_ERROR_TYPES.get(error.status, fallback)
        return {"type": "error", "error": {"type": kind, "message": error.message}}
    if surface is Surface.OLLAMA:
        return {"error": error.message}
    return error.body()


def error_response(error: ApiError, surface: Surface) -> JSONResponse:
    return JSONResponse(error_body(error, surface), status_code=error.status, headers=error.headers)
