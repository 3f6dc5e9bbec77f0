"""The local HTTP API: one server that speaks OpenAI's, Anthropic's and Ollama's APIs, and speculates.

- app.py: what every surface shares (``Api``: bodies, model checks, a request run as one job) and
  the guard (Host header, web pages' Origin, API key, body size);
- one module of routes per API surface: openai_api.py (chat, completions, llama.cpp's native
  routes), responses_api.py (OpenAI's Responses), anthropic_api.py (Anthropic's Messages),
  ollama_api.py (Ollama's /api), each with its shapes module where they are large;
- parsing.py and fields.py: request fields checked one by one, each problem a sentence;
- shapes.py: OpenAI's and llama-server's response fields (``timings``, ``usage``, ``speculative``);
- streaming.py: jobs awaited on the event loop, streamed responses (server-sent events, NDJSON);
- metrics.py: Prometheus counters named as llama-server names them, and requests by surface;
- body.py: a request's JSON body within bounds (size, time, nesting depth);
- connections.py: open connections bounded, and the time a request's headers may take;
- runner.py: binding the socket and running uvicorn in a thread;
- errors.py: one error, each surface's shape of it, and one table answering each engine Failure kind.

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
