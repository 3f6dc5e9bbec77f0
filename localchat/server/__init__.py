"""The local HTTP API: an OpenAI-compatible (and llama.cpp-compatible) server that speculates.

- app.py: routes, the guard (Host header, API key, body size) and streamed replies;
- parsing.py: request bodies checked field by field into GenerationRequest;
- shapes.py: response bodies (OpenAI's and llama-server's field names);
- metrics.py: Prometheus counters named as llama-server names them;
- runner.py: binding the socket and running uvicorn in a thread;
- errors.py: the OpenAI error shape, and one table answering each engine Failure kind.

Why Starlette and uvicorn: a small, well-kept ASGI stack (Starlette is what
FastAPI is built on, uvicorn the server most Python APIs run on) with no
pydantic, which keeps the bundles smaller and their imports few; the request
shapes are checked by hand in parsing.py with a sentence per field instead.
Streaming is written directly against ASGI (app.EventStream), so sse-starlette
is not needed.

This layer imports neither Qt nor llama_cpp (an import-linter contract checks
it): it reaches the engine through localchat.host's EngineSupervisor; in the
app, the window's own, so both share one engine process and one model.
"""

from localchat.server.app import Api, ServerSettings, create_app
from localchat.server.runner import BindError, ServerThread, bind_socket, is_loopback

__all__ = ["Api", "BindError", "ServerSettings", "ServerThread", "bind_socket", "create_app", "is_loopback"]
