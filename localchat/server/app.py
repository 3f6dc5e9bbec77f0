"""The ASGI app: the guard in front of every route, what every API surface shares, and the app.

``Api`` holds what the surfaces share: the engine's supervisor, the served
model's name and limits, reading a JSON body, checking the model and that it is
loaded, and running a request as one job (``answer``). Each API surface is one
module of routes over it that maps its own shapes to one GenerationRequest and
back: openai_api.py (OpenAI's chat and completions, llama.cpp's native routes),
responses_api.py (OpenAI's Responses), anthropic_api.py (Anthropic's Messages)
and ollama_api.py (Ollama's /api). Engine failures are answered from their kind
(errors.FAILURE_STATUS), each in its surface's error shape (errors.error_body);
a job's source names the surface (host/sources.py), so the window's status bar
says which API a request came through.

The guard refuses, before any route runs: a Host header that is not this
server's (DNS rebinding), a request from a web page whose Origin is not allowed
(a page must never make the engine write, nor start a tool: the allow-list is
empty by default, as Ollama's origins setting), a missing or wrong API key
(``Authorization: Bearer KEY`` or Anthropic's ``x-api-key``), and a body larger
than the limit (413).

A request may name another local model (server/model_shelf.py): when loads on request are allowed,
it is loaded (a load job in the engine's queue, after the running job: a reply streaming in the window
is never cut), then the request is read against it and runs on it (its job names its model, so a load
in between cannot make it answer from another). Not allowed: 403 naming the model and the setting. A
name no local model has stays 404. A model that fails to load is a 500 naming it, and the model
loaded before is loaded again. The request waits for the load after its headers and body arrived, so
neither time-out applies, and a client that leaves while it waits withdraws its load.

A streamed reply sends its headers only once the job's first event arrives:
a request that fails before any token (a prompt longer than the context, a
model that is restarting and fails to load) still gets its real status code
and its surface's error shape.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from localchat.catalog.names import file_name, file_stem, shipped_served_id
from localchat.engine.types import EngineConfig, EngineInfo, GenerationRequest, GenerationResult
from localchat.host.events import Failed, Failure, FailureKind, Finished, JobEvent, Phase, Tokens
from localchat.host.failure_words import Audience, sentence
from localchat.host.sources import Surface, job_source
from localchat.host.supervisor import EngineSupervisor, EngineUnavailable
from localchat.server import shapes
from localchat.server.anthropic_api import AnthropicRoutes
from localchat.server.body import BODY_TIMEOUT_S, ClientGone, json_object, read_body
from localchat.server.connections import HEADER_TIMEOUT_S, ConnectionLimits
from localchat.server.errors import (
    RETRY_AFTER_S,
    ApiError,
    error_response,
    failure_error,
    server_error,
)
from localchat.server.metrics import Metrics
from localchat.server.model_shelf import ModelShelf, ShelfModel
from localchat.server.ollama_api import OllamaRoutes
from localchat.server.openai_api import OpenAIRoutes
from localchat.server.parsing import Limits, ParsedRequest
from localchat.server.responses_api import ResponsesRoutes
from localchat.server.streaming import DISCONNECT_CHECK_S, SSE, EventStream, JobStream

log = logging.getLogger(__name__)

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
PINNED = "localchat.model"  # the ASGI scope's key for the model a request's job must run on
PINNED_INFO = "localchat.model_info"  # and for what that model is (EngineInfo), to read the request by


@dataclass(frozen=True)
class ServerSettings:
    # What /v1/models lists and clients send as "model"; "" (the app's server): the loaded file's id
    # (catalog.names.served_id: its catalog id, else its name without ".gguf"), following the window.
    model_id: str = ""
    model_path: str = ""  # the file ``model_id`` names ("": whatever is loaded)
    host: str = "127.0.0.1"
    api_key: str | None = None
    # Web pages allowed to call the API (their Origin, e.g. "http://localhost:3000"; "*": any). A
    # request from any other page is refused, and CORS preflights are answered for these only.
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()  # more Host header names to accept (a reverse proxy's)
    max_body_bytes: int = 8 * 1024 * 1024
    max_tokens: int | None = None  # None: the loaded context length
    default_mode: str = "adaptive"
    # How long a request's body may take to arrive (408 after that; server/body.py), and its headers
    # (the connection is closed; server/connections.py).
    body_timeout_s: float = BODY_TIMEOUT_S
    header_timeout_s: float = HEADER_TIMEOUT_S
    max_connections: int | None = None  # open at once; None: what the open-file limit allows

    def connections(self) -> ConnectionLimits:
        """The bounds ``ServerThread`` keeps on connections."""
        return ConnectionLimits(self.max_connections, self.header_timeout_s)


def surface_for_path(path: str) -> Surface:
    """The API surface a path belongs to, for answering errors in its shape before any route runs."""
    if path == "/api" or path.startswith("/api/"):
        return Surface.OLLAMA
    if path.startswith("/v1/messages"):
        return Surface.ANTHROPIC
    if path.startswith("/v1/responses"):
        return Surface.RESPONSES
    return Surface.OPENAI


def normal_origin(origin: str) -> str:
    """An Origin as compared: "HTTP://Localhost:3000/" -> "http://localhost:3000"."""
    return origin.strip().rstrip("/").lower()


def host_name(header: str) -> str:
    """The name part of a Host header: "[::1]:8080" -> "::1", "localhost:11435" -> "localhost"."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class Guard:
    """ASGI middleware: the Host header check (against DNS rebinding), the Origin of web pages, the API
    key, the body size; each refusal in the error shape of the surface the path belongs to."""

    def __init__(self, app: ASGIApp, settings: ServerSettings) -> None:
        self.app = app
        self.settings = settings
        self.any_host = settings.host in WILDCARD_HOSTS
        self.hosts = LOOPBACK_NAMES | {settings.host.lower()} | {h.lower() for h in settings.allowed_hosts}
        self.origins = {normal_origin(o) for o in settings.cors_origins}

    def _problem(self, scope: Scope) -> ApiError | None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host")
        if host is not None and not self.any_host and host_name(host) not in self.hosts:
            # A page whose DNS name was rebound to 127.0.0.1 still sends its own name here.
            return ApiError(403, f"This server answers only requests addressed to "
                                 f"{self.settings.host} or localhost, not {host_name(host)!r}.",
                            code="host_not_allowed")
        origin = headers.get("origin")
        if origin is not None and "*" not in self.origins and normal_origin(origin) not in self.origins:
            # Browsers send Origin with every cross-site POST, "simple" text/plain ones included: a page
            # the user visits must not make the engine write (nor fill the shared queue, nor start a tool).
            return ApiError(403, f"Requests from web pages are refused, and this one came from {origin!r}. "
                                 "To let a browser app use the API, add its origin to the allowed origins "
                                 "(Settings → Server, or --cors-origin).", code="origin_not_allowed")
        key = self.settings.api_key
        if key and scope.get("path") != "/health" and scope.get("method") != "OPTIONS":
            auth = headers.get("authorization", "")
            given = auth[7:].strip() if auth.lower().startswith("bearer ") else headers.get("x-api-key", "")
            if not hmac.compare_digest(given.encode(), key.encode()):
                return ApiError(401, "A valid API key is required: send it as 'Authorization: Bearer KEY' "
                                     "(or as 'x-api-key: KEY').",
                                type="authentication_error", code="invalid_api_key")
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.settings.max_body_bytes:
            return ApiError(413, f"The request body is {int(length)} bytes; this server accepts at most "
                                 f"{self.settings.max_body_bytes}.", code="body_too_large")
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = self._problem(scope)
            if problem is not None:
                await error_response(problem, surface_for_path(scope.get("path", "")))(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Api:
    """The routes, over one engine supervisor; ``app`` is the Starlette application."""

    def __init__(self, supervisor: EngineSupervisor, settings: ServerSettings,
                 shelf: ModelShelf | None = None) -> None:
        """``shelf``: the local models listed beside the loaded one, loaded when a request names one
        (None: only the loaded model is served)."""
        self.supervisor = supervisor
        self.settings = settings
        self.shelf = shelf
        self.metrics = Metrics()
        self.started = int(time.time())
        routes = [
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/models", self.models, methods=["GET"]),
            Route("/health", self.health, methods=["GET"]),
            Route("/v1/health", self.health, methods=["GET"]),
            Route("/metrics", self.metrics_text, methods=["GET"]),
            *OpenAIRoutes(self).routes(),
            *ResponsesRoutes(self).routes(),
            *AnthropicRoutes(self).routes(),
            *OllamaRoutes(self).routes(),
        ]
        middleware = []
        if settings.cors_origins:
            middleware.append(Middleware(
                CORSMiddleware, allow_origins=list(settings.cors_origins),
                allow_methods=["GET", "POST", "DELETE", "HEAD"], allow_headers=["*"],
            ))
        middleware.append(Middleware(Guard, settings=settings))
        self.app = Starlette(
            routes=routes,
            middleware=middleware,
            exception_handlers={HTTPException: self._http_error, ClientGone: self._client_gone,
                                Exception: self._unexpected},
        )

    # -- helpers ----------------------------------------------------------------------
    async def _http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        surface = surface_for_path(request.url.path)
        if exc.status_code == 404 and surface is Surface.OLLAMA:
            message = (f"There is no {request.url.path} here; localchat answers Ollama's /api/chat, "
                       "/api/generate, /api/tags, /api/show, /api/ps and /api/version.")
        elif exc.status_code == 404:
            message = (f"There is no {request.url.path} here; the API is under /v1 (GET /v1/models), "
                       "and Ollama's under /api.")
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}."
        else:
            message = str(exc.detail)
        code = "not_found" if exc.status_code == 404 else None
        return error_response(ApiError(exc.status_code, message, code=code), surface)

    async def _client_gone(self, request: Request, exc: Exception) -> Response:
        return Response(status_code=499)  # nobody reads it: the client closed its connection

    async def _unexpected(self, request: Request, exc: Exception) -> Response:
        log.exception("unexpected error answering %s", request.url.path)
        error = server_error(f"The server failed while answering ({type(exc).__name__}); it keeps serving.",
                             "internal_error")
        return error_response(error, surface_for_path(request.url.path))

    @property
    def model_id(self) -> str:
        config = self.supervisor.state.config
        named = self.settings.model_path
        if self.settings.model_id and (not named or (config is not None and config.target_path == named)):
            return self.settings.model_id
        if config is None:
            return "none"
        if self.shelf is not None:
            return self.shelf.id_of(config.target_path)
        return shipped_served_id(config.target_path)

    def serves(self, name: str) -> bool:
        """Whether a request's "model" names the model loaded (or loading)."""
        wanted = name.strip().lower()
        if wanted == self.model_id.lower():
            return True
        config = self.supervisor.state.config
        if config is None:
            return False
        file = file_name(config.target_path).lower()
        names = {file, file_stem(file), shipped_served_id(file)}
        info = self.supervisor.state.info
        if info is not None:
            names.add(info.target.name.lower())
        return wanted in names

    async def select_model(self, request: Request, name: object, surface: Surface) -> None:
        """Load the local model a request names when another is loaded (and loads are allowed), and
        tie the request's job to its model; a name no local model has is left to ``check_model``."""
        shelf = self.shelf
        if shelf is None or not isinstance(name, str) or not name.strip():
            return
        if surface is Surface.OLLAMA:
            name = name.rsplit(":", 1)[0] if ":" in name else name
        config = self.supervisor.state.config
        if self.serves(name):
            if config is not None and shelf.loads_allowed:
                # It runs on this model even if another loads meanwhile, and is read by it.
                request.scope[PINNED] = config
                request.scope[PINNED_INFO] = self.supervisor.state.info
            return
        model = await asyncio.to_thread(shelf.find, name)
        if model is None:
            return
        if not shelf.loads_allowed:
            loaded = f"{self.model_id!r} is" if config is not None else "none is"
            raise ApiError(403, f"The model {model.id!r} is on this computer but not loaded ({loaded}), and "
                                "this server does not load models on request. Load it in localchat's window, "
                                "or allow it: Settings → Server → “Let API requests load other models” "
                                "(localchat serve: without --no-load-on-request).",
                           type="permission_error", param="model", code="model_load_not_allowed")
        wanted = await asyncio.to_thread(shelf.config_for, model)
        back = self.supervisor.state.ready  # a failed load brings this model back
        request.scope[PINNED_INFO] = await self._load(request, wanted, model, surface, back)
        request.scope[PINNED] = wanted

    async def _load(self, request: Request, config: EngineConfig, model: ShelfModel,
                    surface: Surface, back: bool) -> EngineInfo:
        """Queue the load of ``model`` and wait for it (the client's leaving withdraws it)."""
        loop, wake = asyncio.get_running_loop(), asyncio.Event()

        def woken(_event: JobEvent | None) -> None:
            loop.call_soon_threadsafe(wake.set)

        try:
            job = self.supervisor.submit_load(config, job_source(surface, "load"), woken)
        except EngineUnavailable as exc:
            raise failure_error(exc.failure) from exc
        log.info("loading %s for an %s request", model.path, surface.title)
        while not job.done:
            wake.clear()
            if job.done:
                break
            try:
                await asyncio.wait_for(wake.wait(), DISCONNECT_CHECK_S)
            except TimeoutError:
                if not job.done and await request.is_disconnected():
                    self.supervisor.cancel(job)
                    raise ClientGone() from None
        if job.loaded is not None:
            return job.loaded
        failure = Failure(FailureKind.LOAD_FAILED)
        assert job.events is not None
        while not job.events.empty():
            event = job.events.get_nowait()
            if isinstance(event, Failed):
                failure = event.failure
        if failure.kind is not FailureKind.LOAD_FAILED and failure.kind is not FailureKind.ENGINE_DIED:
            raise failure_error(failure)
        again = " The model loaded before it is loaded again." if back else ""
        raise ApiError(500, f"The model {model.id!r} could not be loaded: {sentence(failure, Audience.API)}"
                            f"{again}",
                       type="server_error", param="model", code="model_load_failed")

    def pinned(self, request: Request) -> EngineConfig | None:
        """The model a request's job must run on (``select_model``); None: whatever is loaded."""
        config = request.scope.get(PINNED)
        return config if isinstance(config, EngineConfig) else None

    def info_for(self, request: Request) -> EngineInfo | None:
        """What the request's model is (its template, its context): the one it named and loaded, else
        the one loaded now."""
        info = request.scope.get(PINNED_INFO)
        return info if isinstance(info, EngineInfo) else self.supervisor.state.info

    def model_for(self, request: Request) -> str:
        """The model id a reply names: the model the request runs on."""
        config = self.pinned(request)
        if config is None or self.shelf is None or self.supervisor.runs_on(config):
            return self.model_id
        return self.shelf.id_of(config.target_path)

    def limits(self, request: Request | None = None) -> Limits:
        state = self.supervisor.state
        info = self.info_for(request) if request is not None else state.info
        config = state.config
        ceiling = self.settings.max_tokens or (
            info.n_ctx if info is not None else config.n_ctx if config is not None else 4096
        )
        return Limits(max_tokens=ceiling, default_mode=self.settings.default_mode)

    async def read_json(self, request: Request) -> dict[str, Any]:
        """The body as a JSON object, within the size, time and nesting bounds of server/body.py."""
        raw = await read_body(request, self.settings.max_body_bytes, self.settings.body_timeout_s)
        return json_object(raw)

    def check_model(self, name: str | None, listed_at: str = "GET /v1/models",
                    request: Request | None = None) -> None:
        if name is None or self.serves(name) or (request is not None and self.pinned(request) is not None):
            return
        others = " and the other local models it can load" if self.shelf is not None else ""
        raise ApiError(404, f"The model {name!r} is not served here; this server serves "
                            f"{self.model_id!r} ({listed_at} lists it{others}).",
                       param="model", code="model_not_found")

    def check_ready(self) -> None:
        state = self.supervisor.state
        if state.config is None:
            raise failure_error(Failure(FailureKind.NO_MODEL))
        if state.ever_loaded:
            return  # after a crash the engine restarts behind the queue; requests wait for it
        if state.phase is Phase.FAILED and state.failure is not None:
            raise failure_error(state.failure)
        raise ApiError(503, "The model is still loading; try again in a few seconds.",
                       type="unavailable_error", code="model_loading",
                       headers={"Retry-After": str(RETRY_AFTER_S)})

    async def parsed(self, request: Request, parse: Callable[..., ParsedRequest],
                     surface: Surface = Surface.OPENAI, **kw: Any) -> ParsedRequest:
        body = await self.read_json(request)
        await self.select_model(request, body.get("model"), surface)
        self.check_ready()
        parsed = parse(body, self.info_for(request), self.limits(request), **kw)
        self.check_model(parsed.model, request=request)
        return parsed

    async def run_to_end(
        self, request: Request, job: JobStream, surface: Surface = Surface.OPENAI, record: bool = True
    ) -> GenerationResult | None:
        """Wait for the job's result (None: the client left, the job was cancelled); ``record``: count it
        in /metrics (a token count is no generation).

        The client's disconnect is watched the whole time (``http.disconnect`` from the server), not
        only when the engine pauses between tokens: a client that gives up cancels its job at once
        instead of leaving the engine writing a reply nobody reads."""
        gone = asyncio.Event()

        async def watch() -> None:
            try:
                while (await request.receive())["type"] != "http.disconnect":
                    pass
            except Exception:  # the connection's end is the server's to handle, not this watch's
                return
            gone.set()
            job.close()  # the engine stops at its next step

        async def left() -> bool:
            return gone.is_set()

        watcher = asyncio.ensure_future(watch())
        try:
            while True:
                event = await job.next(left)
                if event is None or gone.is_set():
                    return None
                if isinstance(event, Finished):
                    if record:
                        self.metrics.record(event.result.stats, surface.value)
                    return event.result
                if isinstance(event, Failed):
                    self.metrics.record_failure()
                    raise failure_error(event.failure)
        finally:
            watcher.cancel()
            job.close()

    async def first_event(self, request: Request, job: JobStream) -> JobEvent | None:
        try:
            event = await job.next(request.is_disconnected)
        except BaseException:
            job.close()
            raise
        if event is None:
            job.close()
        elif isinstance(event, Failed):
            self.metrics.record_failure()
            job.close()
            raise failure_error(event.failure)
        return event

    def stream(
        self, job: JobStream, first: JobEvent, render: Callable[[JobEvent], list[bytes]],
        surface: Surface = Surface.OPENAI, media_type: str = SSE,
    ) -> EventStream:
        async def chunks() -> AsyncIterator[bytes]:
            event: JobEvent | None = first
            while event is not None:
                if isinstance(event, Finished):
                    self.metrics.record(event.result.stats, surface.value)
                elif isinstance(event, Failed):
                    self.metrics.record_failure()
                for chunk in render(event):
                    yield chunk
                if not isinstance(event, Tokens):
                    return
                event = await job.next()

        return EventStream(chunks(), job.close, media_type)

    async def count_prompt(
        self, request: Request, generation: GenerationRequest, surface: Surface
    ) -> int | None:
        """The prompt's length in tokens as the model reads it (None: the client left first)."""
        job = JobStream(self.supervisor, replace(generation, count_only=True, max_tokens=1),
                        job_source(surface, generation.session), self.pinned(request))
        result = await self.run_to_end(request, job, surface, record=False)
        return None if result is None else result.stats.prompt_tokens

    # -- routes -----------------------------------------------------------------------
    async def shelf_models(self) -> list[ShelfModel]:
        """The local models a request may name besides the loaded one (the loaded one left out)."""
        if self.shelf is None:
            return []
        config = self.supervisor.state.config
        loaded = config.target_path if config is not None else None
        models = await asyncio.to_thread(self.shelf.models)
        return [m for m in models if m.path != loaded and not self.serves(m.id)]

    async def models(self, request: Request) -> Response:
        """The loaded model first (``"loaded": true``, its limits and capabilities), then the local
        models a request may name to load (``"loaded": false``), as LM Studio lists them."""
        state = self.supervisor.state
        info = state.info
        data: list[dict[str, Any]] = []
        if state.config is not None or self.shelf is None:
            entry: dict[str, Any] = {"id": self.model_id, "object": "model", "created": self.started,
                                     "owned_by": "localchat", "loaded": state.ready}
            if info is not None:
                entry["meta"] = {"n_ctx": info.n_ctx, "n_params": info.target.n_params,
                                 "draft": info.draft.name if info.draft is not None else None}
                entry["capabilities"] = shapes.capabilities(info)
            data.append(entry)
        for model in await self.shelf_models():
            data.append({"id": model.id, "object": "model", "created": self.started, "owned_by": "localchat",
                         "loaded": False, "name": model.name, "size": model.size})
        return JSONResponse({"object": "list", "data": data})

    async def health(self, request: Request) -> Response:
        state = self.supervisor.state
        if state.config is None:
            return failure_error(Failure(FailureKind.NO_MODEL)).response()
        if state.ready:
            return JSONResponse({"status": "ok"})
        if state.phase is Phase.FAILED and state.failure is not None:
            return failure_error(state.failure).response()
        return ApiError(503, "Loading model", type="unavailable_error", code="model_loading",
                        headers={"Retry-After": str(RETRY_AFTER_S)}).response()

    async def metrics_text(self, request: Request) -> Response:
        supervisor = self.supervisor
        busy = lambda: int(supervisor.running_source is not None)  # noqa: E731
        text = self.metrics.render(busy, lambda: supervisor.queued)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    async def answer(
        self,
        request: Request,
        parsed: ParsedRequest,
        whole: Callable[[GenerationResult], dict[str, Any]],
        render: Callable[[JobEvent], list[bytes]],
        surface: Surface = Surface.OPENAI,
        media_type: str = SSE,
    ) -> Response:
        """Run the request's job: ``whole(result)`` as one JSON body, or, when streaming, each event
        through ``render`` (499 when the client left first). The job's source names ``surface``."""
        job = JobStream(self.supervisor, parsed.request, job_source(surface, parsed.request.session),
                        self.pinned(request))
        if not parsed.stream:
            result = await self.run_to_end(request, job, surface)
            return Response(status_code=499) if result is None else JSONResponse(whole(result))
        first = await self.first_event(request, job)
        if first is None:
            return Response(status_code=499)
        return self.stream(job, first, render, surface, media_type)


def create_app(supervisor: EngineSupervisor, settings: ServerSettings,
               shelf: ModelShelf | None = None) -> Starlette:
    return Api(supervisor, settings, shelf).app

