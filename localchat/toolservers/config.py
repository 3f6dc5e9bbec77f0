"""mcp.json: the tool servers the user listed, in the format LM Studio, Claude Desktop and Cursor share.

::

    {"mcpServers": {
        "files": {"command": "uvx", "args": ["mcp-server-files", "~/notes"], "env": {"KEY": "…"}},
        "hub":   {"url": "https://huggingface.co/mcp", "headers": {"Authorization": "Bearer …"}}
    }}

A server with ``command`` runs as a child process over stdio; one with ``url`` is reached over
streamable HTTP. Two keys other apps write too are read and kept: ``"disabled": true`` (Cline's
spelling) switches a server off, and ``"autoApprove": ["tool", …]`` lists the tools the user let run
without asking ("Always for this tool"). Every other key, at the top and in each server, is kept as
written, so the file stays usable by the apps it was copied from.

Reading never stops the app: a file that is not JSON (or not an object of servers) is moved aside to
``mcp.json.bad`` (``-2``, ``-3``… beside an earlier one), as settings.toml is, and the app starts with
no servers; one server entry that is wrong is kept, marked with the sentence that says why, and never
started. The file is written whole to a temporary file and renamed over the old one, readable by its
owner only (it may hold access tokens).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from localchat.settings import folders

log = logging.getLogger(__name__)

FILE_NAME = "mcp.json"
SERVERS_KEY = "mcpServers"
STDIO = "stdio"
HTTP = "http"
_KNOWN_KEYS = ("type", "command", "args", "env", "url", "headers", "disabled", "autoApprove")
_HTTP_TYPES = ("http", "streamable-http", "streamable_http", "streamableHttp")


@dataclass(frozen=True)
class ServerConfig:
    """One entry of mcpServers. ``problem`` is why it cannot be started ("" when it can)."""

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    enabled: bool = True
    always_allowed: tuple[str, ...] = ()  # tools that run without asking ("autoApprove")
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys other apps wrote, kept as they were
    problem: str = ""
    raw: Any = None  # an entry with a problem: as the file held it, written back as it was

    @property
    def kind(self) -> str:
        return HTTP if self.url and not self.command else STDIO

    @property
    def where(self) -> str:
        """What the server is, in one line: its command line or its address."""
        if self.kind == HTTP:
            return self.url
        return " ".join([self.command, *self.args])

    def allowing(self, tool: str, allowed: bool = True) -> ServerConfig:
        """The same server with ``tool`` added to (or taken off) the tools that run without asking."""
        kept = tuple(t for t in self.always_allowed if t != tool)
        return replace(self, always_allowed=(*kept, tool) if allowed else kept)

    def to_json(self) -> Any:
        """The entry as mcp.json holds it: the user's own keys first, in their order, then ours."""
        if self.problem and self.raw is not None:
            if not isinstance(self.raw, dict):
                return self.raw
            kept = {k: v for k, v in self.raw.items() if k != "disabled"}
            return kept if self.enabled else {**kept, "disabled": True}
        entry: dict[str, Any] = dict(self.extra)
        if self.kind == HTTP:
            entry["url"] = self.url
            if self.headers:
                entry["headers"] = dict(self.headers)
        else:
            entry["command"] = self.command
            entry["args"] = list(self.args)
            if self.env:
                entry["env"] = dict(self.env)
        if not self.enabled:
            entry["disabled"] = True
        if self.always_allowed:
            entry["autoApprove"] = list(self.always_allowed)
        return entry


@dataclass(frozen=True)
class ToolsConfig:
    """Every server of mcp.json in the file's order, and the file's other top-level keys."""

    servers: tuple[ServerConfig, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def server(self, name: str) -> ServerConfig | None:
        return next((s for s in self.servers if s.name == name), None)

    @property
    def enabled(self) -> tuple[ServerConfig, ...]:
        """The servers switched on that can be started."""
        return tuple(s for s in self.servers if s.enabled and not s.problem)

    def with_server(self, server: ServerConfig, replacing: str | None = None) -> ToolsConfig:
        """This config with ``server`` added, or put in the place of the one called ``replacing``."""
        old = replacing if replacing is not None else server.name
        if any(s.name == old for s in self.servers):
            servers = tuple(server if s.name == old else s for s in self.servers)
        else:
            servers = (*self.servers, server)
        return replace(self, servers=servers)

    def without(self, name: str) -> ToolsConfig:
        return replace(self, servers=tuple(s for s in self.servers if s.name != name))

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {k: v for k, v in self.extra.items() if k != SERVERS_KEY}
        document[SERVERS_KEY] = {s.name: s.to_json() for s in self.servers}
        return document


@dataclass(frozen=True)
class LoadResult:
    config: ToolsConfig
    messages: tuple[str, ...] = ()  # sentences for the user (the file set aside), possibly none


def default_path() -> Path:
    """localchat's own mcp.json, in its config folder beside settings.toml."""
    return folders.config_dir() / FILE_NAME


def parse_server(name: str, raw: object) -> ServerConfig:
    """One mcpServers entry; a wrong one comes back with ``problem`` saying what is wrong with it."""
    server = _parse_server(name, raw)
    return replace(server, raw=raw) if server.problem else server


def _parse_server(name: str, raw: object) -> ServerConfig:
    if not isinstance(raw, dict):
        return ServerConfig(name, problem=f"The entry of tool server '{name}' is not an object.")
    extra = {k: v for k, v in raw.items() if k not in _KNOWN_KEYS}
    enabled = raw.get("disabled") is not True
    allowed = raw.get("autoApprove", [])
    always = tuple(a for a in allowed if isinstance(a, str)) if isinstance(allowed, list) else ()
    base = ServerConfig(name, enabled=enabled, always_allowed=always, extra=extra)
    kind = raw.get("type")
    if kind is not None and not isinstance(kind, str):
        return replace(base, problem=f"Tool server '{name}': \"type\" must be text.")
    if kind is not None:
        extra["type"] = kind  # written back as it was
    url, command = raw.get("url"), raw.get("command")
    if kind == "sse":
        return replace(base, url=url if isinstance(url, str) else "", problem=(
            f"Tool server '{name}' uses the older SSE transport, which localchat does not speak; "
            "give the server's streamable HTTP address instead (it usually ends in /mcp)."))
    if isinstance(url, str) and url.strip() and not isinstance(command, str):
        headers, bad = _strings(raw.get("headers", {}))
        problem = "" if not bad else f"Tool server '{name}': every header must be text ({bad})."
        if not url.strip().lower().startswith(("http://", "https://")):
            problem = f"Tool server '{name}': the address must start with http:// or https:// ({url})."
        return replace(base, url=url.strip(), headers=headers, problem=problem)
    if kind in _HTTP_TYPES:
        return replace(base, problem=f"Tool server '{name}' needs a \"url\".")
    if not isinstance(command, str) or not command.strip():
        return replace(base, problem=f"Tool server '{name}' needs a \"command\" to run or a \"url\".")
    args = raw.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str | int | float) for a in args):
        problem = f"Tool server '{name}': \"args\" must be a list of text."
        return replace(base, command=command, problem=problem)
    env, bad = _strings(raw.get("env", {}))
    problem = "" if not bad else f"Tool server '{name}': every environment value must be text ({bad})."
    return replace(base, command=command.strip(), args=tuple(str(a) for a in args), env=env, problem=problem)


def _strings(raw: object) -> tuple[dict[str, str], str]:
    """A JSON object of text values; numbers and booleans are taken as their text. The second item
    names the first key whose value is neither (empty when every value is usable)."""
    if not isinstance(raw, dict):
        return {}, "not an object"
    values: dict[str, str] = {}
    for key, value in raw.items():
        if isinstance(value, bool):
            values[str(key)] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            values[str(key)] = str(value)
        else:
            return values, str(key)
    return values, ""


def parse_document(document: object) -> ToolsConfig:
    """A parsed mcp.json; ValueError (a sentence's worth) when it is not an object of servers."""
    if not isinstance(document, dict):
        raise ValueError("it is not a JSON object")
    servers = document.get(SERVERS_KEY, {})
    if not isinstance(servers, dict):
        raise ValueError(f"\"{SERVERS_KEY}\" is not an object of servers")
    extra = {k: v for k, v in document.items() if k != SERVERS_KEY}
    return ToolsConfig(tuple(parse_server(str(n), raw) for n, raw in servers.items()), extra)


def read_servers(path: Path) -> ToolsConfig:
    """Another app's file (LM Studio's, Claude Desktop's), read only; ValueError with the reason."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(getattr(exc, "strerror", None) or str(exc)) from exc
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"it is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return parse_document(document)


class ToolsFile:
    """mcp.json at ``path`` (localchat's config folder by default)."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self.bad_path: Path | None = None  # where a malformed file was moved, once one was
        self._seen: tuple[int, int] | None = None  # (mtime_ns, size) of the file last read

    def load(self) -> LoadResult:
        """Read the file; none means no servers, without a message."""
        try:
            stat = self.path.stat()
            data = self.path.read_bytes()
        except FileNotFoundError:
            self._seen = None
            return LoadResult(ToolsConfig())
        except OSError as exc:
            message = (f"The tool servers file {self.path} could not be read ({exc.strerror}); "
                       "no tools are offered.")
            log.warning(message)
            return LoadResult(ToolsConfig(), (message,))
        self._seen = (stat.st_mtime_ns, stat.st_size)
        try:
            config = parse_document(json.loads(data.decode("utf-8")))
        except UnicodeDecodeError:
            return LoadResult(ToolsConfig(), (self._set_aside("it is not UTF-8 text"),))
        except json.JSONDecodeError as exc:
            return LoadResult(ToolsConfig(), (self._set_aside(f"{exc.msg} at line {exc.lineno}"),))
        except ValueError as exc:
            return LoadResult(ToolsConfig(), (self._set_aside(str(exc)),))
        for server in config.servers:
            if server.problem:
                log.warning("mcp.json: %s", server.problem)
        return LoadResult(config)

    def changed_on_disk(self) -> bool:
        """Whether the file differs from the one last read or written (edited by hand meanwhile)."""
        try:
            stat = self.path.stat()
        except OSError:
            return self._seen is not None
        return (stat.st_mtime_ns, stat.st_size) != self._seen

    def save(self, config: ToolsConfig) -> None:
        """Write the whole file at once (OSError when it cannot be written), readable by its owner only."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(config.to_json(), indent=2, ensure_ascii=False) + "\n"
        fd, tmp = tempfile.mkstemp(prefix=".mcp-", suffix=".json", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            if os.name == "posix":
                os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        stat = self.path.stat()
        self._seen = (stat.st_mtime_ns, stat.st_size)

    def _next_bad_path(self) -> Path:
        first = self.path.with_name(FILE_NAME + ".bad")
        if not first.exists():
            return first
        n = 2
        while self.path.with_name(f"{FILE_NAME}.bad-{n}").exists():
            n += 1
        return self.path.with_name(f"{FILE_NAME}.bad-{n}")

    def _set_aside(self, reason: str) -> str:
        bad = self._next_bad_path()
        try:
            os.replace(self.path, bad)
        except OSError as exc:
            message = (f"The tool servers file {self.path} is not valid ({reason}) and could not be moved "
                       f"aside ({exc.strerror}); no tools are offered until it is fixed.")
        else:
            self.bad_path = bad
            self._seen = None
            message = (f"The tool servers file {self.path} is not valid ({reason}); it was saved as "
                       f"{bad.name} and localchat started without tool servers.")
        log.warning(message)
        return message


def merge(into: ToolsConfig, incoming: Sequence[ServerConfig], source: str) -> tuple[ToolsConfig, str]:
    """``into`` with the servers of another app added, and a sentence saying what changed.

    A server already listed with the same definition (under any name: an earlier import renamed it)
    is skipped; one whose name is taken by another definition is added as "NAME (SOURCE)".
    """
    added: list[str] = []
    same = 0
    config = into
    for server in incoming:
        current = config.server(server.name)
        if any(s.to_json() == server.to_json() for s in config.servers):
            same += 1
            continue
        name = server.name if current is None else f"{server.name} ({source})"
        n = 2
        while config.server(name) is not None:
            name = f"{server.name} ({source} {n})"
            n += 1
        config = config.with_server(replace(server, name=name))
        added.append(name)
    if not incoming:
        return config, f"{source} lists no tool servers."
    words = f"Added {len(added)} tool server{'s' if len(added) != 1 else ''} from {source}"
    words += f": {', '.join(added)}." if added else "."
    if same:
        words += f" {same} {'was' if same == 1 else 'were'} already listed."
    return config, words
