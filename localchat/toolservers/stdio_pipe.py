"""The stdio transport: a tool server as a child process, JSON-RPC lines over its stdin and stdout.

It does what the SDK's ``stdio_client`` does (the same spawn in a process group of its own, or a Job
Object on Windows, from the SDK's mcp.os helpers; the same shutdown: close stdin, wait, then end the
whole process tree), with two differences that matter to a desktop app:

- stdout is split into lines in linear time, and a message longer than ``framing.MAX_MESSAGE_BYTES``
  is not read whole: the request it answers gets a result holding the start of its text, marked as
  cut (``CUT_KEY`` in its ``_meta``), so a tool that returns 50 MB costs a second, not minutes;
- ``PipeWatch`` tells the caller the process's id and, once stdout ends, its exit code, so a crash is
  a sentence with the code in it.

The server's stderr goes to ``errlog`` (a file in the log folder), never to the app's own stderr.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any, TextIO

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.os.win32.utilities import (
    close_process_job,
    create_windows_process,
    get_windows_executable_command,
    terminate_windows_process_tree,
)
from mcp.shared.message import SessionMessage

from localchat.toolservers.framing import MAX_MESSAGE_BYTES, LineFramer, Oversized, first_text, request_id

log = logging.getLogger(__name__)

CUT_KEY = "localchat/cut-bytes"  # in a result's _meta: the message was this long and was cut
EXIT_GRACE_S = 2.0  # after stdin closes, the time a server has to exit on its own
KILL_WAIT_S = 2.0


@dataclass
class PipeWatch:
    """What the transport saw of its process (written on the transport's loop, read after)."""

    pid: int | None = None
    returncode: int | None = None
    ended: bool = False  # stdout ended: the process exited or closed it
    on_end: Callable[[], None] | None = None  # called on the transport's loop once ``ended``


def cut_result(line: Oversized) -> SessionMessage | None:
    """The stand-in for a message too long to read: the start of its text as a tool result."""
    rid = request_id(line)
    if rid is None:
        log.warning("a tool server sent %d bytes in one message without an id; dropped", line.size)
        return None
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": first_text(line.head)}],
        "isError": False,
        "_meta": {CUT_KEY: line.size},
        "resultType": "complete",  # the 2026 revision's; dropped by the SDK on older sessions
    }
    message = {"jsonrpc": "2.0", "id": rid, "result": result}
    return SessionMessage(types.jsonrpc_message_adapter.validate_python(message, by_name=False))


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        log.warning("a tool server wrote a line that is not JSON-RPC: %.200r", line)
        return exc


async def _spawn(command: str, args: list[str], env: dict[str, str], errlog: TextIO) -> Any:
    if sys.platform == "win32":  # pragma: no cover - Windows
        command = await anyio.to_thread.run_sync(get_windows_executable_command, command)
        return await create_windows_process(command, args, env, errlog)
    return await anyio.open_process([command, *args], env=env, stderr=errlog, start_new_session=True)


async def _stop(process: Any) -> None:
    """Close stdin, give the server ``EXIT_GRACE_S`` to exit, then end its whole process tree."""
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    with anyio.move_on_after(EXIT_GRACE_S):
        while process.returncode is None:
            await anyio.sleep(0.02)
    if process.returncode is None:
        if sys.platform == "win32":  # pragma: no cover - Windows
            await terminate_windows_process_tree(process)
        else:
            await terminate_posix_process_tree(process, KILL_WAIT_S)
        with anyio.move_on_after(KILL_WAIT_S):
            while process.returncode is None:
                await anyio.sleep(0.02)
    close_process_job(process)
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()


@asynccontextmanager
async def stdio_pipe(
    command: str, args: list[str], env: Mapping[str, str], errlog: TextIO, watch: PipeWatch,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
) -> AsyncIterator[tuple[Any, Any]]:
    """Start ``command`` and yield the session's read and write streams; OSError when it cannot start."""
    process = await _spawn(command, args, get_default_environment() | dict(env), errlog)
    watch.pid = process.pid
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        framer = LineFramer(max_message_bytes)
        try:
            async with read_writer:
                try:
                    async for chunk in process.stdout:
                        for line in framer.feed(chunk):
                            message = cut_result(line) if isinstance(line, Oversized) else (
                                _parse(line) if line.strip() else None)
                            if message is not None:
                                await read_writer.send(message)
                finally:
                    # The exit code (when the process is gone with its stdout) and the end are noted
                    # before the session sees its stream close: whoever reads the end reads the code.
                    with anyio.move_on_after(0.5):
                        while process.returncode is None:
                            await anyio.sleep(0.02)
                    watch.returncode = process.returncode
                    watch.ended = True
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            pass
        finally:
            watch.ended = True
            if watch.on_end is not None:
                watch.on_end()

    async def writer() -> None:
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the session sees the end instead of waiting for an answer

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                await _stop(process)
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
                await anyio.lowlevel.checkpoint()
            tg.cancel_scope.cancel()
