"""McpService: the tool servers for the window, over the GUI-free ``toolservers`` package.

It owns mcp.json (read at start, read again when it changed on disk, written by Settings → Tools) and
the ``ToolHub``, whose reports come back to the GUI thread through ``on_main`` (the hub runs its
own asyncio loop in a thread: the GUI thread never waits on a server). Servers start when a message
first needs them (``prepare``) or when Settings → Tools asks for their tools, and ``close`` stops
them all when the app quits.

Signals (GUI thread)::

    servers_changed()               a server started, failed or stopped, or the list changed
    tools_ready(int, ToolOffer)     the answer to ``prepare(ticket)``: the tools to offer, and the
                                    sentences about servers that failed and tools left out
    call_finished(CallOutcome)      a call's result, or why there is none
    notice(str)                     a sentence for the window (mcp.json set aside, not saved)
"""

from __future__ import annotations

import itertools
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from localchat.services.main_thread import on_main
from localchat.services.qt_signals import emit
from localchat.toolservers import imports
from localchat.toolservers.config import ServerConfig, ToolsConfig, ToolsFile
from localchat.toolservers.hub import CallOutcome, Phase, Ready, Report, ServerState, ToolHub
from localchat.toolservers.tools import ToolSpec

log = logging.getLogger(__name__)

SECURITY = ("Tool servers run on this computer with your rights: a server can read and change what you "
            "can. Add only servers you trust; localchat asks before each call unless you chose "
            "“Always” for that tool.")


@dataclass(frozen=True)
class OfferedTool:
    name: str  # what the model calls it (the tool's own name, unless two servers share it)
    spec: ToolSpec


@dataclass(frozen=True)
class ToolOffer:
    """The tools one message offers, and the sentences about what could not be offered."""

    tools: tuple[OfferedTool, ...] = ()
    notes: tuple[str, ...] = ()

    def find(self, name: str) -> OfferedTool | None:
        return next((t for t in self.tools if t.name == name), None)


@dataclass(frozen=True)
class ServerView:
    """One server as Settings → Tools shows it."""

    status: str  # "not started", "starting…", "running, 3 tools", "failed", "off"
    tools: tuple[ToolSpec, ...] = ()
    notes: tuple[str, ...] = ()  # why it failed, and the tools left out
    log_path: str = ""
    starting: bool = False
    running: bool = False


def offer_from(states: tuple[ServerState, ...]) -> ToolOffer:
    """The tools of the running servers, each under a name no other offered tool has."""
    tools: list[OfferedTool] = []
    notes: list[str] = []
    taken: set[str] = set()
    for state in states:
        if state.phase is not Phase.RUNNING:
            notes.append(state.problem or f"The tool server '{state.name}' is not running.")
            continue
        notes += state.left_out
        for spec in state.tools:
            name = spec.name
            if name in taken:  # two servers with one name: the later one is known by both names
                name = re.sub(r"[^A-Za-z0-9_-]+", "_", f"{state.name}_{spec.name}")[:64]
            if name in taken:
                notes.append(f"The tool '{spec.name}' of '{state.name}' was left out: another tool has "
                             "its name.")
                continue
            taken.add(name)
            tools.append(OfferedTool(name, spec))
    return ToolOffer(tuple(tools), tuple(notes))


class McpService(QObject):
    servers_changed = Signal()
    tools_ready = Signal(int, object)
    call_finished = Signal(object)
    notice = Signal(str)

    def __init__(self, path: Path, log_dir: Path | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.file = ToolsFile(path)
        result = self.file.load()
        self.config = result.config
        self.load_messages: list[str] = list(result.messages)
        self.states: dict[str, ServerState] = {}
        self._starting: set[str] = set()
        self._tickets = itertools.count(1)
        self._hub = ToolHub(on_main(self._on_hub_report), log_dir=log_dir)
        self._timeout_s = 60.0

    # -- the list of servers -------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self.file.path

    @property
    def enabled(self) -> tuple[ServerConfig, ...]:
        return self.config.enabled

    def reload_if_changed(self) -> None:
        """Read mcp.json again if it was edited since it was last read or written (as a file)."""
        if not self.file.changed_on_disk():
            return
        result = self.file.load()
        self.config = result.config
        for message in result.messages:
            emit(self.notice, message)
        emit(self.servers_changed)

    def save(self, config: ToolsConfig) -> str:
        """Keep ``config`` in mcp.json; "" when saved, else the sentence saying why not."""
        try:
            self.file.save(config)
        except OSError as exc:
            sentence = f"The tool servers could not be saved to {self.file.path} ({exc.strerror or exc})."
            log.warning(sentence)
            return sentence
        self.config = config
        stale = [name for name in self.states if self.config.server(name) is None]
        for name in stale:
            del self.states[name]
        emit(self.servers_changed)
        return ""

    def import_from(self, source: str, into: ToolsConfig) -> tuple[ToolsConfig, str]:
        """``into`` with another app's servers added (not saved), and the sentence saying what changed."""
        return imports.import_into(into, imports.find(source))

    def always_allowed(self, server: str, tool: str) -> bool:
        entry = self.config.server(server)
        return entry is not None and tool in entry.always_allowed

    def allow_always(self, server: str, tool: str) -> str:
        """Let ``tool`` of ``server`` run without asking from now on (kept in mcp.json's autoApprove)."""
        entry = self.config.server(server)
        if entry is None:
            return ""
        self.reload_if_changed()
        entry = self.config.server(server) or entry
        return self.save(self.config.with_server(entry.allowing(tool)))

    # -- servers and calls ---------------------------------------------------------------------

    def prepare(self) -> int:
        """Start the switched-on servers that are not running (stop the others); ``tools_ready`` answers
        with this ticket once each has started or failed."""
        self.reload_if_changed()
        ticket = next(self._tickets)
        self._starting = {s.name for s in self.config.enabled
                          if s.name not in self.states or self.states[s.name].phase is not Phase.RUNNING}
        self._hub.ensure(self.config.enabled, ticket)
        if self._starting:
            emit(self.servers_changed)
        return ticket

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    @timeout_s.setter
    def timeout_s(self, seconds: float) -> None:
        """How long a call may take, and a server may take to start (the tool_timeout_s setting)."""
        self._timeout_s = seconds
        self._hub.start_timeout_s = seconds

    def view(self, server: ServerConfig) -> ServerView:
        """What Settings → Tools says about ``server`` now."""
        if server.problem:
            return ServerView("cannot start", notes=(server.problem,))
        state = self.states.get(server.name)
        if server.name in self._starting:
            return ServerView("starting…", starting=True)
        if state is None or state.phase is Phase.STOPPED:
            return ServerView("not started" if server.enabled else "off")
        if state.phase is Phase.FAILED:
            return ServerView("failed", notes=(state.problem,), log_path=state.log_path)
        count = f"{len(state.tools)} tool{'s' if len(state.tools) != 1 else ''}"
        return ServerView(f"running, {count}", state.tools, state.left_out, state.log_path,
                          running=state.phase is Phase.RUNNING)

    def all_running(self) -> bool:
        """Whether every switched-on server is up already (a message need not wait to start them)."""
        return all(self.states.get(s.name, None) is not None and self.states[s.name].phase is Phase.RUNNING
                   for s in self.config.enabled)

    def call(self, call_id: str, server: str, tool: str, arguments: dict[str, Any], max_chars: int) -> None:
        self._hub.call(call_id, server, tool, arguments, timeout_s=self.timeout_s, max_chars=max_chars)

    def cancel(self, call_id: str) -> None:
        self._hub.cancel(call_id)

    def close(self) -> None:
        """Stop every server (the app is quitting); waits a few seconds at most."""
        self._hub.close()

    def _on_hub_report(self, report: Report) -> None:
        if isinstance(report, ServerState):
            self.states[report.name] = report
            self._starting.discard(report.name)
            emit(self.servers_changed)
        elif isinstance(report, Ready):
            for state in report.states:
                self.states[state.name] = state
                self._starting.discard(state.name)
            emit(self.servers_changed)
            emit(self.tools_ready, report.ticket, offer_from(report.states))
        elif isinstance(report, CallOutcome):
            emit(self.call_finished, report)
