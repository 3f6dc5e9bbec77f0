"""Ollama's API on the same server: ``/api/chat`` and ``/api/generate`` (NDJSON streams by default),
``/api/tags``, ``/api/show``, ``/api/ps`` and ``/api/version``, for the many apps that speak only
Ollama (Zed's and VS Code's Ollama providers, Open WebUI, aider's model lookup, Obsidian plugins).

Bodies become one GenerationRequest (ollama_shapes.py) run as a job of the "ollama" surface;
errors, the guard's included, are Ollama's ``{"error": "sentence"}``. What Ollama does and
localchat does otherwise (pulling, creating, copying, deleting models; embeddings) answers 501
with a sentence saying what to do instead. The model file's description (its GGUF header, its
chat template) is read once per served file, off the event loop.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from localchat.catalog.gguf import GgufMetadata, MetadataCache, read_chat_template, read_metadata
from localchat.engine.types import GenerationResult
from localchat.host.sources import Surface
from localchat.server import fields
from localchat.server.errors import ApiError, error_response
from localchat.server.ollama_shapes import (
    OLLAMA_VERSION,
    OllamaRequest,
    OllamaStream,
    base_name,
    loaded,
    ollama_name,
    parse_chat,
    parse_generate,
    show,
    tag,
)
from localchat.server.streaming import NDJSON

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from localchat.engine.types import EngineInfo
    from localchat.server.app import Api
    from localchat.server.parsing import Limits

# What localchat does instead of each model-management call Ollama has.
ELSEWHERE = {
    "pull": "localchat downloads models in its window (Models) or with `localchat pull MODEL`; this server "
    "serves the model loaded now.",
    "push": "localchat does not publish models; it serves the model loaded now.",
    "create": "localchat does not build models from a Modelfile: it loads GGUF files as they are (choose one "
    "in the window, or `localchat serve --model FILE`).",
    "copy": "localchat does not copy models; the served model answers to any tag of its name.",
    "delete": "localchat deletes models in its window (Models), not through the API.",
    "embed": "localchat does not compute embeddings; use an embedding server (Ollama, or llama-server "
    "--embedding) for them.",
    "blobs": "localchat does not take model files through the API; put GGUF files in its models folder.",
}


class OllamaRoutes:
    def __init__(self, api: Api) -> None:
        self.api = api
        self._described: dict[str, tuple[GgufMetadata, str]] = {}  # per served file: header, template

    def routes(self) -> list[Route]:
        refused = [
            Route(f"/api/{name}", self._elsewhere(what), methods=["POST", "DELETE", "HEAD", "GET"])
            for name, what in (
                ("pull", "pull"),
                ("push", "push"),
                ("create", "create"),
                ("copy", "copy"),
                ("delete", "delete"),
                ("embed", "embed"),
                ("embeddings", "embed"),
            )
        ]
        return [
            Route("/", self.root, methods=["GET", "HEAD"]),
            Route("/api/version", self.version, methods=["GET"]),
            Route("/api/tags", self.tags, methods=["GET"]),
            Route("/api/show", self.show, methods=["POST"]),
            Route("/api/ps", self.ps, methods=["GET"]),
            Route("/api/chat", self.chat, methods=["POST"]),
            Route("/api/generate", self.generate, methods=["POST"]),
            Route("/api/blobs/{digest}", self._elsewhere("blobs"), methods=["POST", "HEAD"]),
            *refused,
        ]

    def _elsewhere(self, what: str) -> Callable[[Request], Any]:
        async def answer(request: Request) -> Response:
            return error_response(ApiError(501, ELSEWHERE[what], code="not_supported"), Surface.OLLAMA)

        return answer

    @property
    def name(self) -> str:
        return ollama_name(self.api.model_id)

    async def _description(self) -> tuple[GgufMetadata, str] | None:
        info = self.api.supervisor.state.info
        if info is None:
            return None
        path = info.target.path
        if path not in self._described:
            meta = await asyncio.to_thread(read_metadata, path, MetadataCache(None))
            template = await asyncio.to_thread(read_chat_template, path)
            self._described = {path: (meta, template)}
        return self._described[path]

    async def _listed_not_loaded(self, name: str) -> bool:
        """Whether ``name`` is a local model /api/tags lists that is not the one loaded."""
        shelf = self.api.shelf
        if shelf is None or self.api.serves(name):
            return False
        return await asyncio.to_thread(shelf.find, name) is not None

    def _check_model(self, name: str | None, request: Request | None = None) -> None:
        if name is not None:
            self.api.check_model(base_name(name), listed_at="GET /api/tags", request=request)

    # -- routes -----------------------------------------------------------------------
    async def root(self, request: Request) -> Response:
        return PlainTextResponse(
            "localchat is running (Ollama's API is under /api, OpenAI's and Anthropic's under /v1)"
        )

    async def version(self, request: Request) -> Response:
        return JSONResponse({"version": OLLAMA_VERSION})

    async def tags(self, request: Request) -> Response:
        """The loaded model first, then the local models a request may name to load."""
        described = await self._description()
        models = [] if described is None else [tag(self.name, described[0])]
        models += [tag(ollama_name(m.id), m.metadata) for m in await self.api.shelf_models()
                   if m.metadata is not None]
        return JSONResponse({"models": models})

    async def ps(self, request: Request) -> Response:
        described, info = await self._description(), self.api.supervisor.state.info
        if described is None or info is None:
            return JSONResponse({"models": []})
        entry = tag(self.name, described[0])
        entry.update(
            expires_at="9999-12-31T23:59:59Z",
            size_vram=0 if info.backend == "CPU" or info.gpu_layers == 0 else entry["size"],
            context_length=info.n_ctx,
        )
        return JSONResponse({"models": [entry]})

    async def show(self, request: Request) -> Response:
        try:
            body = await self.api.read_json(request)
            name = body.get("model", body.get("name"))
            if name is None:
                raise ApiError(
                    400, "'model' is required: the name GET /api/tags lists.", code="missing_field"
                )
            wanted = base_name(fields.text(name, "model"))
            if await self._listed_not_loaded(wanted):
                raise ApiError(404, f"{wanted} is on this computer but not loaded, and /api/show describes "
                                    "the loaded model only (its template and capabilities are read when it "
                                    "loads): a request that names it (/api/chat, /api/generate) loads it.",
                               code="model_not_loaded")
            self._check_model(wanted)
            self.api.check_ready()
            described, info = await self._description(), self.api.supervisor.state.info
            if described is None or info is None:
                raise ApiError(503, "The model is still loading; try again in a few seconds.")
            return JSONResponse(show(described[0], info, described[1]))
        except ApiError as exc:
            return error_response(exc, Surface.OLLAMA)

    async def chat(self, request: Request) -> Response:
        return await self._generate(request, parse_chat, chat=True)

    async def generate(self, request: Request) -> Response:
        return await self._generate(request, parse_generate, chat=False)

    async def _generate(
        self,
        request: Request,
        parse: Callable[[Mapping[str, Any], EngineInfo | None, Limits], OllamaRequest],
        chat: bool,
    ) -> Response:
        try:
            body = await self.api.read_json(request)
            await self.api.select_model(request, body.get("model"), Surface.OLLAMA)
            self.api.check_ready()
            req = parse(body, self.api.info_for(request), self.api.limits(request))
            self._check_model(req.model, request)
            name = ollama_name(self.api.model_for(request))
            if req.parsed is None:
                return JSONResponse(loaded(name, chat))
            stream = OllamaStream(name, req.parsed, chat)

            def whole(result: GenerationResult) -> dict[str, Any]:
                return stream.whole(result)

            return await self.api.answer(request, req.parsed, whole, stream.render, Surface.OLLAMA, NDJSON)
        except ApiError as exc:
            return error_response(exc, Surface.OLLAMA)
