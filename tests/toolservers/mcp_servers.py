"""Real MCP servers for the tests, written with the official SDK (its low-level Server, so a test can
list a tool with a broken schema). Run as a script::

    python tests/toolservers/mcp_servers.py calc            # stdio
    python tests/toolservers/mcp_servers.py files ROOT      # lists files under ROOT only
    python tests/toolservers/mcp_servers.py faulty          # hangs, crashes, fails, returns 50 MB
    python tests/toolservers/mcp_servers.py calc --http     # streamable HTTP on 127.0.0.1; prints "PORT n"

Kinds: ``calc`` (add, multiply), ``files`` (list_files, read_file, confined to ROOT), ``faulty``
(wait: never answers; crash: exits in the middle of the call; fail: an error result; big: 50 MB of
text; broken: a tool whose schema is not valid JSON Schema; echo).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server

NUMBERS = {
    "type": "object",
    "properties": {"a": {"type": "number", "description": "The first number"},
                   "b": {"type": "number", "description": "The second number"}},
    "required": ["a", "b"],
}
OBJECT: dict[str, Any] = {"type": "object", "properties": {}}
PATH = {"type": "object",
        "properties": {"path": {"type": "string", "description": "A folder, relative to the root"}}}

TOOLS = {
    "calc": [
        types.Tool(name="add", description="Add two numbers and return the sum.", input_schema=NUMBERS),
        types.Tool(name="multiply", description="Multiply two numbers and return the product.",
                   input_schema=NUMBERS),
    ],
    "files": [
        types.Tool(name="list_files", description="List the files in a folder of the user's project.",
                   input_schema=PATH),
    ],
    "faulty": [
        types.Tool(name="wait", description="Waits forever.", input_schema=OBJECT),
        types.Tool(name="crash", description="Exits in the middle of the call.", input_schema=OBJECT),
        types.Tool(name="fail", description="Always fails.", input_schema=OBJECT),
        types.Tool(name="big", description="Returns 50 MB of text.", input_schema=OBJECT),
        types.Tool(name="broken", description="Its schema is not JSON Schema.",
                   input_schema={"type": "object", "properties": {"x": {"type": "no-such-type"}}}),
        types.Tool(name="echo", description="Returns its text.",
                   input_schema={"type": "object", "properties": {"text": {"type": "string"}}}),
    ],
}


def text(value: str, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)], is_error=error)


def make_server(kind: str, root: Path | None) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS[kind])

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        name, args = params.name, params.arguments or {}
        if name in ("add", "multiply"):
            a, b = float(args["a"]), float(args["b"])
            value = a + b if name == "add" else a * b
            return text(str(int(value)) if value.is_integer() else repr(value))
        if name == "list_files":
            assert root is not None
            folder = (root / str(args.get("path", "."))).resolve()
            if folder != root and root not in folder.parents:
                return text(f"{args.get('path')} is outside the folder this server may show.", error=True)
            if not folder.is_dir():
                return text(f"{args.get('path')} is not a folder.", error=True)
            return text(json.dumps(sorted(p.name for p in folder.iterdir())))
        if name == "wait":
            await anyio.sleep(3600)
        if name == "crash":
            print("the crash tool was called: exiting with code 3", file=sys.stderr, flush=True)
            os._exit(3)
        if name == "fail":
            return text("The fail tool always fails: no such record.", error=True)
        if name == "big":
            return text("0123456789" * 5_000_000)
        if name == "echo":
            return text(str(args.get("text", "")))
        return text(f"unknown tool {name}", error=True)

    return Server(f"test-{kind}", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    print("test server started", file=sys.stderr, flush=True)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve_http(server: Server[Any]) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    # Listen before telling the port: a client that connects while uvicorn is still starting
    # waits in the backlog instead of being refused.
    sock.listen(128)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    app = server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


def main(argv: list[str]) -> None:
    kind = argv[0]
    root = Path(argv[1]).resolve() if kind == "files" else None
    server = make_server(kind, root)
    if "--http" in argv:
        serve_http(server)
    else:
        anyio.run(serve_stdio, server)


if __name__ == "__main__":
    main(sys.argv[1:])
