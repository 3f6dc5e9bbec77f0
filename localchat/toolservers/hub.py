"""ToolHub: the connections to the tool servers, on an asyncio loop of their own in one thread.

The MCP SDK is asynchronous (anyio); the app's GUI thread must never wait on a server. So the hub
runs one event loop in a daemon thread, started the first time a server is needed, and every
command (``ensure``, ``call``, ``cancel``, ``close``) is handed to it. What happens is told through
``notify``, from the hub's thread, as frozen values: a ``ServerState`` each time a server starts,
fails or stops, and a ``CallOutcome`` for each call. (The GUI's McpService hands them to the GUI
thread with ``on_main``.)

Each server is one task that holds its ``mcp.Client`` open: the SDK's contexts must be entered and
left in the same task. A stdio server is a child process (``stdio_pipe``) whose stderr goes to a file
of its own in the log folder; an HTTP server is reached with the SDK's streamable HTTP transport and
the entry's headers. A server starts when ``ensure`` first names it and stays up for later messages;
a server that failed, or whose process ended, is started again the next time it is needed; a server
no longer named (switched off, removed, changed) is stopped; ``close`` stops them all, and every
stdio server's whole process tree ends with it.

Every fault is a sentence in the state or the outcome: a command that is not there, a server that
exits or stops answering while it starts (``start_timeout_s``), one that stops in the middle of a
call (with its exit code and the last line it wrote to stderr), a call that takes longer than its
time-out (cancelled, and the server told so), an error result, and a result longer than the call's
``max_chars`` (cut, and how long it was said).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from localchat.catalog.sizes import format_bytes
from localchat.toolservers.config import ServerConfig
from localchat.toolservers.stdio_pipe import CUT_KEY, PipeWatch, stdio_pipe
from localchat.toolservers.tools import ToolSpec, capped, left_out_sentence, result_text, schema_problem

log = logging.getLogger(__name__)

START_TIMEOUT_S = 30.0
LIST_PAGES_MAX = 20


class Phase(enum.Enum):
    STOPPED = "stopped"
    STARTING = "starting"
    RUNNING = "running"
    FAILED = "failed"


@dataclass(frozen=True)
class ServerState:
    """What is known of one server now."""

    name: str
    phase: Phase
    tools: tuple[ToolSpec, ...] = ()
    left_out: tuple[str, ...] = ()  # a sentence for each tool that could not be offered
    problem: str = ""  # FAILED: why, in words
    log_path: str = ""  # where a stdio server's stderr goes
    pid: int | None = None  # a stdio server's process while it runs


class CallStatus(enum.Enum):
    DONE = "done"
    ERROR = "error"  # the tool answered with an error result
    FAILED = "failed"  # no result: the server refused the call, stopped, or could not be reached
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class CallOutcome:
    call_id: str
    server: str
    tool: str
    status: CallStatus
    text: str = ""  # what goes back to the model (at most the call's max_chars)
    note: str = ""  # a sentence for the user ("" when the call simply worked)
    seconds: float = 0.0
    size: int = 0  # length of the whole result in characters (in bytes when the transport cut it)


@dataclass(frozen=True)
class Ready:
    """The servers one ``ensure`` named, each running or failed (in the order they were named)."""

    ticket: int
    states: tuple[ServerState, ...]


Report = ServerState | CallOutcome | Ready
Notify = Callable[[Report], None]


@dataclass(eq=False)
class _Connection:
    config: ServerConfig
    stop: asyncio.Event
    phase: Phase = Phase.STARTING
    client: Any = None
    task: asyncio.Task[None] | None = None
    watch: PipeWatch | None = None
    log_path: Path | None = None
    timed_out: bool = False
    tools: tuple[ToolSpec, ...] = ()
    left_out: tuple[str, ...] = ()
    problem: str = ""
    calls: dict[str, asyncio.Task[None]] = field(default_factory=dict)


class ToolHub:
    def __init__(self, notify: Notify, *, log_dir: Path | None = None,
                 start_timeout_s: float = START_TIMEOUT_S) -> None:
        self._notify = notify
        self._log_dir = log_dir
        self.start_timeout_s = start_timeout_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._connections: dict[str, _Connection] = {}  # touched on the hub's thread only
        self._waiting: dict[int, list[tuple[_Connection, ServerState | None]]] = {}  # ensure's tickets
        self._closed = False

    # -- commands, from any thread ---------------------------------------------------------

    def ensure(self, servers: Sequence[ServerConfig], ticket: int = 0) -> None:
        """Have exactly these servers running: start the ones not up, stop the others. Once each named
        server is running or has failed, ``Ready(ticket, states)`` is told."""
        self._post(self._ensure, tuple(servers), ticket)

    def call(self, call_id: str, server: str, tool: str, arguments: dict[str, Any], *,
             timeout_s: float, max_chars: int) -> None:
        self._post(self._start_call, call_id, server, tool, arguments, timeout_s, max_chars)

    def cancel(self, call_id: str) -> None:
        """End a call; its outcome says CANCELLED (nothing when it had ended already)."""
        if self._loop is not None:
            self._post(self._cancel, call_id)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop every server and the hub's thread; waits at most ``timeout_s`` (the app is quitting)."""
        with self._lock:
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._close_all(), loop)
        try:
            future.result(timeout_s)
        except Exception:  # a server that would not stop: its process group is ended with the app
            log.warning("tool servers did not all stop within %.0f s", timeout_s, exc_info=True)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout_s)

    def _post(self, method: Callable[..., Any], *args: Any) -> None:
        with self._lock:
            if self._closed:
                return
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._run_loop, name="tool-servers", daemon=True)
                self._thread.start()
            loop = self._loop
        loop.call_soon_threadsafe(method, *args)

    def _run_loop(self) -> None:
        assert self._loop is not None
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    # -- on the hub's thread -----------------------------------------------------------------

    def _tell(self, item: Report) -> None:
        try:
            self._notify(item)
        except Exception:
            log.exception("a tool hub listener failed")

    def _state(self, conn: _Connection) -> ServerState:
        pid = conn.watch.pid if conn.watch is not None and conn.phase is Phase.RUNNING else None
        return ServerState(conn.config.name, conn.phase, conn.tools, conn.left_out, conn.problem,
                           str(conn.log_path) if conn.log_path else "", pid)

    def _ensure(self, servers: tuple[ServerConfig, ...], ticket: int) -> None:
        wanted = {s.name: s for s in servers}
        for name, old in list(self._connections.items()):
            if wanted.get(name) != old.config:
                self._retire(old)
        waiting: list[tuple[_Connection, ServerState | None]] = []
        for server in servers:
            conn = self._connections.get(server.name)
            if conn is not None and (conn.phase in (Phase.FAILED, Phase.STOPPED) or (
                    conn.watch is not None and conn.watch.ended)):
                self._retire(conn)
                conn = None
            if conn is None:
                conn = self._start(server)
            waiting.append((conn, self._state(conn) if conn.phase is Phase.RUNNING else None))
        self._waiting[ticket] = waiting
        self._answer()

    def _answer(self) -> None:
        """Tell each ensure whose servers have all settled."""
        for ticket, waiting in list(self._waiting.items()):
            if all(state is not None for _, state in waiting):
                del self._waiting[ticket]
                self._tell(Ready(ticket, tuple(state for _, state in waiting if state is not None)))

    def _settled(self, conn: _Connection) -> None:
        state = self._state(conn)
        self._tell(state)
        for waiting in self._waiting.values():
            for i, (waited, known) in enumerate(waiting):
                if waited is conn and known is None:
                    waiting[i] = (conn, state)
        self._answer()

    def _retire(self, conn: _Connection) -> None:
        if self._connections.get(conn.config.name) is conn:
            del self._connections[conn.config.name]
        conn.stop.set()

    def _start(self, server: ServerConfig) -> _Connection:
        assert self._loop is not None
        conn = _Connection(server, asyncio.Event())
        self._connections[server.name] = conn
        conn.task = self._loop.create_task(self._serve(conn))
        self._loop.call_later(self.start_timeout_s, self._start_timed_out, conn)
        return conn

    def _start_timed_out(self, conn: _Connection) -> None:
        if conn.phase is Phase.STARTING and conn.task is not None:
            conn.timed_out = True
            conn.task.cancel()

    async def _serve(self, conn: _Connection) -> None:
        from mcp import Client
        from mcp_types import Implementation

        server = conn.config
        try:
            async with AsyncExitStack() as stack:
                transport = self._transport(conn, stack)
                client = Client(transport, client_info=Implementation(name="localchat", version="0.1"))
                await stack.enter_async_context(client)
                conn.tools, conn.left_out = await self._list(server.name, client)
                conn.client, conn.phase = client, Phase.RUNNING
                log.info("tool server %s is running with %d tools", server.name, len(conn.tools))
                self._settled(conn)
                await conn.stop.wait()
                if conn.problem and conn.calls:  # the process ended: its calls fail by themselves
                    await asyncio.wait(list(conn.calls.values()), timeout=2.0)
                for task in list(conn.calls.values()):
                    task.cancel()
                conn.client = None
        except asyncio.CancelledError:
            conn.problem = (
                f"The tool server '{server.name}' did not answer within {self.start_timeout_s:.0f} s of "
                "starting, so it was stopped." if conn.timed_out else
                f"The tool server '{server.name}' was stopped.")
            conn.phase = Phase.FAILED if conn.timed_out else Phase.STOPPED
        except BaseException as exc:  # ExceptionGroups from the SDK's task groups included
            if not isinstance(exc, Exception):
                raise
            if conn.phase is Phase.RUNNING:
                leaf = _leaf(exc)
                reason = _http_reason(leaf) if server.kind == "http" else _reason(leaf)
                ended = f"The connection to the tool server '{server.name}' ended: {reason}."
                conn.problem = conn.problem or ended
            else:
                conn.problem = self._start_problem(conn, exc)
            conn.phase = Phase.FAILED
            expected = isinstance(_leaf(exc), OSError)
            log.warning("tool server %s: %s", server.name, conn.problem, exc_info=not expected)
        else:
            conn.phase = Phase.FAILED if conn.problem else Phase.STOPPED
        finally:
            conn.client = None
        if self._connections.get(server.name) is conn and conn.phase is Phase.STOPPED:
            del self._connections[server.name]
        self._settled(conn)

    def _transport(self, conn: _Connection, stack: AsyncExitStack) -> Any:
        server = conn.config
        if server.kind == "http":
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            # The SDK's own client and defaults (30 s to connect and send, 5 min to read: a stream may
            # stay open), so the HTTP library the SDK bundles is never imported here by name.
            http = create_mcp_http_client(headers=dict(server.headers))
            stack.push_async_callback(http.aclose)
            return streamable_http_client(server.url, http_client=http)
        errlog = self._open_log(conn)
        stack.callback(errlog.close)
        conn.watch = PipeWatch()
        loop = asyncio.get_running_loop()
        watch = conn.watch

        def ended() -> None:  # the process ended while the server was up: tear the connection down
            if conn.phase is Phase.RUNNING and not conn.stop.is_set():
                conn.problem = self._ended(conn)
                conn.stop.set()

        def on_end() -> None:
            loop.call_soon(ended)

        watch.on_end = on_end
        return stdio_pipe(server.command, list(server.args), server.env, errlog, watch)

    def _open_log(self, conn: _Connection) -> TextIO:
        if self._log_dir is None:
            return open(os.devnull, "w")
        folder = self._log_dir / "tool-servers"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            conn.log_path = folder / (re.sub(r"[^A-Za-z0-9_.-]+", "_", conn.config.name) + ".log")
            handle = open(conn.log_path, "a", encoding="utf-8")  # noqa: SIM115
        except OSError:
            log.warning("cannot write the tool server log in %s", folder, exc_info=True)
            conn.log_path = None
            return open(os.devnull, "w")
        handle.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {conn.config.where}\n")
        handle.flush()
        return handle

    async def _list(self, server: str, client: Any) -> tuple[tuple[ToolSpec, ...], tuple[str, ...]]:
        tools: list[ToolSpec] = []
        left_out: list[str] = []
        cursor: str | None = None
        for _ in range(LIST_PAGES_MAX):
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                problem = schema_problem(tool.name, tool.input_schema)
                if problem:
                    left_out.append(left_out_sentence(server, tool.name, problem))
                    continue
                description = (tool.description or tool.title or "").strip()
                tools.append(ToolSpec(server, tool.name, description, json.dumps(tool.input_schema)))
            cursor = page.next_cursor
            if not cursor:
                break
        return tuple(tools), tuple(left_out)

    # -- words ---------------------------------------------------------------------------------

    def _last_words(self, conn: _Connection) -> str:
        """The last line the server wrote to stderr, and where the rest is."""
        if conn.log_path is None:
            return ""
        try:
            with open(conn.log_path, "rb") as handle:
                handle.seek(max(0, handle.seek(0, os.SEEK_END) - 4096))
                lines = [ln.strip() for ln in handle.read().decode("utf-8", "replace").splitlines()]
        except OSError:
            return ""
        said = [ln for ln in lines if ln and not ln.startswith("--- ")]
        last = f" It last wrote: “{said[-1][:200]}”." if said else ""
        return f"{last} Its messages are in {conn.log_path}."

    def _ended(self, conn: _Connection) -> str:
        code = conn.watch.returncode if conn.watch is not None else None
        how = f" (exit code {code})" if code is not None else ""
        return f"The tool server '{conn.config.name}' stopped{how}.{self._last_words(conn)}"

    def _start_problem(self, conn: _Connection, exc: BaseException) -> str:
        server = conn.config
        leaf = _leaf(exc)
        name = server.name
        if isinstance(leaf, FileNotFoundError) and server.kind == "stdio":
            return (f"The tool server '{name}' could not start: the command '{server.command}' was not "
                    "found. Check its command in Settings → Tools.")
        if isinstance(leaf, PermissionError) and server.kind == "stdio":
            return f"The tool server '{name}' could not start: '{server.command}' may not be run by you."
        if conn.watch is not None and conn.watch.ended:
            code = conn.watch.returncode
            how = f" (exit code {code})" if code is not None else ""
            return f"The tool server '{name}' stopped while starting{how}.{self._last_words(conn)}"
        if server.kind == "http":
            return f"The tool server '{name}' at {server.url} could not be reached: {_http_reason(leaf)}."
        return f"The tool server '{name}' could not start: {_reason(leaf)}.{self._last_words(conn)}"

    # -- calls -----------------------------------------------------------------------------------

    def _start_call(self, call_id: str, server: str, tool: str, arguments: dict[str, Any],
                    timeout_s: float, max_chars: int) -> None:
        conn = self._connections.get(server)
        if conn is None or conn.phase is not Phase.RUNNING or conn.client is None:
            why = conn.problem if conn is not None and conn.problem else (
                f"The tool server '{server}' is not running.")
            self._tell(CallOutcome(call_id, server, tool, CallStatus.FAILED, note=why))
            return
        assert self._loop is not None
        task = self._loop.create_task(self._call(conn, call_id, tool, arguments, timeout_s, max_chars))
        conn.calls[call_id] = task

    def _cancel(self, call_id: str) -> None:
        for conn in self._connections.values():
            task = conn.calls.get(call_id)
            if task is not None:
                task.cancel()

    async def _call(self, conn: _Connection, call_id: str, tool: str, arguments: dict[str, Any],
                    timeout_s: float, max_chars: int) -> None:
        started = time.monotonic()
        try:
            done = await self._outcome(conn, call_id, tool, arguments, timeout_s, max_chars)
        except asyncio.CancelledError:
            note = f"Stopped before '{tool}' answered."
            if conn.problem:  # the server went away under the call
                note = conn.problem.replace("stopped", f"stopped while running '{tool}'", 1)
            status = CallStatus.FAILED if conn.problem else CallStatus.CANCELLED
            done = CallOutcome(call_id, conn.config.name, tool, status, note=note,
                               seconds=time.monotonic() - started)
        finally:
            conn.calls.pop(call_id, None)
        self._tell(done)

    async def _outcome(self, conn: _Connection, call_id: str, tool: str, arguments: dict[str, Any],
                       timeout_s: float, max_chars: int) -> CallOutcome:
        import anyio
        from mcp import MCPError

        server = conn.config.name
        started = time.monotonic()

        def outcome(status: CallStatus, text: str = "", note: str = "", size: int = 0) -> CallOutcome:
            return CallOutcome(call_id, server, tool, status, text, note, time.monotonic() - started, size)

        try:
            with anyio.fail_after(timeout_s):
                result = await conn.client.call_tool(tool, arguments)
        except TimeoutError:
            return outcome(CallStatus.TIMED_OUT, note=(
                f"'{tool}' did not answer within {timeout_s:.0f} s, so its call was cancelled "
                "(the time-out is in Settings → Tools)."))
        except MCPError as exc:
            if (conn.watch is not None and conn.watch.ended) or "closed" in exc.message.lower():
                await _settle(conn)
                return outcome(CallStatus.FAILED, note=self._ended(conn).replace(
                    "stopped", f"stopped while running '{tool}'", 1))
            return outcome(CallStatus.FAILED, text=f"Error: {exc.message}", note=(
                f"The tool server '{server}' refused the call of '{tool}': {exc.message}"))
        except Exception as exc:
            log.warning("tool call %s on %s failed", tool, server, exc_info=True)
            return outcome(CallStatus.FAILED,
                           note=f"The call of '{tool}' on '{server}' failed: {_reason(_leaf(exc))}.")
        text = result_text(list(result.content), result.structured_content)
        cut_bytes = (result.meta or {}).get(CUT_KEY)
        size = int(cut_bytes) if isinstance(cut_bytes, int) else len(text)
        shown, cut = capped(text, max_chars)
        note = ""
        if cut or isinstance(cut_bytes, int):
            amount = format_bytes(size) if isinstance(cut_bytes, int) else f"{size:,} characters"
            note = f"'{tool}' returned {amount}; only the first {len(shown):,} characters went to the model."
        if result.is_error:
            first = text.strip().splitlines()[0][:200] if text.strip() else "no details"
            error_note = f"'{tool}' returned an error: {first}"
            return outcome(CallStatus.ERROR, shown, " ".join(n for n in (error_note, note) if n), size)
        return outcome(CallStatus.DONE, shown, note, size)

    async def _close_all(self) -> None:
        conns = list(self._connections.values())
        self._connections.clear()
        for conn in conns:
            conn.stop.set()
            if conn.phase is Phase.STARTING and conn.task is not None:
                conn.task.cancel()
        tasks = [c.task for c in conns if c.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=8.0)


async def _settle(conn: _Connection) -> None:
    """Give a process that closed its stdout a moment to be reaped, so its exit code is known."""
    for _ in range(50):
        if conn.watch is None or conn.watch.returncode is not None:
            return
        await asyncio.sleep(0.02)


def _leaf(exc: BaseException) -> BaseException:
    """The first plain exception inside the SDK's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(exc: BaseException) -> str:
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return text.rstrip(".")


def _http_reason(exc: BaseException) -> str:
    name = type(exc).__name__
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if status in (401, 403):
        return f"it refused localchat (HTTP {status}); check the server's headers, such as its access token"
    if status is not None:
        return f"it answered HTTP {status}"
    if "Connect" in name:
        return "nothing answers at that address"
    if "Timeout" in name:
        return "it did not answer in time"
    with contextlib.suppress(Exception):
        return _reason(exc)
    return name
