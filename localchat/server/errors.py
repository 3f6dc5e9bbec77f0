"""Errors of the HTTP API, answered in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``.

Every failure a client can cause or meet (bad JSON, a wrong type, an unknown
model, a full queue, an engine that is loading or died) becomes an ``ApiError``
with its HTTP status and one sentence; the app turns it into JSON, so a client
never sees a traceback and the server keeps serving.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse


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
