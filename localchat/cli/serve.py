"""``localchat serve``: the local OpenAI-compatible API on the engine process, headless.

``--model`` takes a GGUF path, a catalog id (see ``localchat models``) or the
id of a model in the app's folders, and the model is served under the id the
app's server gives the same file (catalog.names.served_id); the
drafter is paired as in the app (the catalog's drafter, else a same-vocabulary
local model, else n-gram lookup), and ``--draft`` overrides it. The other models
of the app's folders are listed too, and a request that names one loads it in
place of the served one (paired the same way, with the same --ctx and placement)
unless ``--no-load-on-request``. Once the model
is loaded, one line with the URL goes to stdout; everything else goes to stderr.

The default port, 11435, is taken by none of the local model servers
clients already know (LM Studio 1234, Ollama 11434, Jan 1337, llama-server
8080) nor by the usual development ports (3000, 5000, 8000, 8080, 8888).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from localchat.cli.common import add_placement_options, fail, number, whole, worker_options

DEFAULT_PORT = 11435


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="serve the model over a local OpenAI-compatible API (headless)")
    p.add_argument("--model", required=True,
                   help="target GGUF file, a catalog id (localchat models), or the id of a model in the "
                        "models folder")
    p.add_argument("--draft", help="draft model GGUF (default: paired as in the app)")
    p.add_argument("--no-spec", action="store_true",
                   help="speculation off unless a request asks for it (no drafter is paired)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; any other needs --api-key)")
    p.add_argument("--port", type=whole(0, 65535), default=DEFAULT_PORT,
                   help=f"port (default {DEFAULT_PORT}; 0: any free)")
    p.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' on every request")
    p.add_argument("--cors-origin", action="append", default=[],
                   help="let web pages from this origin use the API (repeatable; default: none, and "
                        "requests from any web page are refused)")
    p.add_argument("--allowed-host", action="append", default=[],
                   help="another Host header name to accept (e.g. behind a reverse proxy)")
    p.add_argument("--ctx", type=whole(256), default=8192, help="context length in tokens (default 8192)")
    add_placement_options(p)
    p.add_argument("--max-tokens", type=whole(1), default=None,
                   help="most tokens one reply may ask for (default: the context length)")
    p.add_argument("--queue-size", type=whole(1), default=16,
                   help="requests that may wait for the engine before 429 (default 16)")
    p.add_argument("--max-body-mb", type=number(0.0, above=True), default=8.0,
                   help="largest request body in MB (default 8)")
    p.add_argument("--no-load-on-request", action="store_true",
                   help="answer a request that names another local model with an error (403) instead of "
                        "loading it in place of the served one (default: it is loaded, as LM Studio and "
                        "Ollama do)")
    p.add_argument("--name", default=None,
                   help="model id clients see (default: the catalog id, else the file name without .gguf)")
    p.set_defaults(func=run)


def _catalog_entry(catalog: Any, spec: str) -> Any:
    """The catalog entry whose id is ``spec``, or the one entry whose id starts with ``spec-``."""
    if catalog is None:
        return None
    try:
        return catalog.get(spec)
    except KeyError:
        pass
    starts = [e for e in catalog.entries if e.id.lower().startswith(spec.lower() + "-")]
    return starts[0] if len(starts) == 1 else None


def resolve_model(spec: str, draft: str | None, no_spec: bool) -> tuple[str, str | None, str, str]:
    """(target path, draft path, model id, pairing sentence) for a path or a catalog id; ValueError.

    ``spec`` is a GGUF path, a catalog id (or the start of exactly one: "qwen2.5-coder-1.5b"), or the
    id or file name of a model in the app's folders; the model id is catalog.names.served_id's, the
    one the app's server gives the same file.
    """
    from localchat.catalog.drafters import load_catalog
    from localchat.catalog.library import pair_drafter
    from localchat.catalog.names import served_id
    from localchat.cli.models import user_library
    from localchat.settings.drafter_kind import DrafterKind

    library = user_library()  # the models folder setting and the other folders, as in the app
    catalog: Any = None
    try:
        catalog = load_catalog()
    except Exception as exc:  # a broken catalog must not keep a local file from being served
        logging.getLogger(__name__).warning("catalog: %s", exc)
    path = Path(spec).expanduser()
    if path.is_file():
        target = path
    else:
        entry = _catalog_entry(catalog, spec)
        if entry is not None:
            local = library.find_file(entry.default_quant.filename, entry.default_quant.repo)
            if local is None:
                raise ValueError(
                    f"{entry.display_name} is not downloaded yet: run `localchat pull {entry.id}` first.")
            target = local.path
        else:
            found = [m for m in library.models() if m.usable and spec.lower() in (
                m.name.lower(), served_id(str(m.path), catalog).lower())]
            if not found:
                raise ValueError(f"{spec} is neither a GGUF file, a catalog id nor a model in the models "
                                 "folder (`localchat models` lists them).")
            target = found[0].path
    model_id = served_id(str(target), catalog)
    if draft is not None:
        if not Path(draft).expanduser().is_file():
            raise ValueError(f"The draft model {draft} does not exist.")
        return str(target), str(Path(draft).expanduser()), model_id, f"{Path(draft).name} drafts (--draft)."
    if no_spec or catalog is None:
        return str(target), None, model_id, "Speculation is off unless a request asks for it."
    pairing = pair_drafter(target, catalog, library)
    draft_path = str(pairing.draft_path) if pairing.kind == DrafterKind.MODEL and pairing.draft_path else None
    return str(target), draft_path, model_id, pairing.reason


def _user_library() -> Any:
    from localchat.cli.models import user_library

    return user_library()


def _catalog() -> Any:
    from localchat.catalog.drafters import load_catalog

    try:
        return load_catalog()
    except Exception:  # a broken catalog must not keep the local models from being listed
        return None


def run(args: argparse.Namespace) -> int:
    from localchat.engine.types import EngineConfig
    from localchat.host.supervisor import EngineSupervisor, EngineUnavailable
    from localchat.server import BindError, ServerSettings, ServerThread, bind_socket, create_app, is_loopback
    from localchat.server.model_shelf import ModelShelf

    logging.basicConfig(level=logging.WARNING, format="localchat: %(levelname)s %(name)s: %(message)s")
    if not is_loopback(args.host) and not args.api_key:
        return fail(f"Listening on {args.host} lets other computers reach the model, so it needs an API key: "
                    "add --api-key KEY (clients send it as 'Authorization: Bearer KEY').")
    if args.queue_size < 1 or args.ctx < 256 or (args.max_tokens is not None and args.max_tokens < 1):
        return fail("--queue-size and --max-tokens must be at least 1, and --ctx at least 256.")
    try:
        target, draft, model_id, pairing = resolve_model(args.model, args.draft, args.no_spec)
        sock = bind_socket(args.host, args.port)
    except (ValueError, BindError) as exc:
        return fail(str(exc))
    print(f"localchat: loading {Path(target).name}; {pairing}", file=sys.stderr)
    try:
        workers, split = worker_options(args)
    except ValueError as exc:
        return fail(str(exc))
    config = EngineConfig(target_path=target, draft_path=draft, n_ctx=args.ctx, n_threads=args.threads,
                          gpu_layers=args.gpu_layers, rpc_servers=workers, tensor_split=split,
                          exact=args.exact)
    supervisor = EngineSupervisor(config, max_queue=args.queue_size)

    def configure(path: str, paired: str | None) -> EngineConfig:
        """Another model a request named: the command's context and placement, paired as above."""
        return EngineConfig(target_path=path, draft_path=None if args.no_spec else paired, n_ctx=args.ctx,
                            n_threads=args.threads, gpu_layers=args.gpu_layers, rpc_servers=workers,
                            tensor_split=split, exact=args.exact)

    def library() -> Any:
        """The app's folders, and the served file wherever it is (so a request can name it again)."""
        from localchat.catalog.library import Library

        folders = _user_library()
        return Library(folders.models_dirs, [target], read_only_dirs=folders.read_only_dirs)

    shelf = ModelShelf(library, _catalog, configure, lambda: not args.no_load_on_request,
                       aliases={target: args.name} if args.name else None)
    settings = ServerSettings(
        model_id=args.name or model_id, model_path=target, host=args.host, api_key=args.api_key,
        cors_origins=tuple(args.cors_origin), allowed_hosts=tuple(args.allowed_host),
        max_body_bytes=int(args.max_body_mb * 1024 * 1024), max_tokens=args.max_tokens,
        default_mode="off" if args.no_spec else "adaptive",
    )
    server = ServerThread(create_app(supervisor, settings, shelf), sock, settings.connections())
    supervisor.start()
    try:
        server.start()  # /health answers 503 while the model loads
        try:
            info = supervisor.wait_ready()
        except EngineUnavailable as exc:
            return fail(str(exc))
        spec = info.speculation.drafter if info.speculation.active else "off"
        print(f"localchat serving {settings.model_id} at {server.url}/v1 (speculation: {spec})", flush=True)
        while server.is_alive():
            server.join(0.5)
        return 0
    except KeyboardInterrupt:
        # A second Ctrl+C must not cut the shutdown short (a traceback, an engine process left over).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("localchat: stopping", file=sys.stderr)
        return 0
    finally:
        # The engine first: its running job ends (cancelled), so a client's stream ends and the server
        # stops at once instead of cutting the connection after its grace time.
        supervisor.close()
        server.stop()
