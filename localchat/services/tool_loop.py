"""ToolLoop: the calls of one round of a reply, asked about, run, and their results collected.

The model's reply ended in tool calls (``FinishReason.TOOL_CALLS``). For each call, in order:

- a call of a tool that was not offered, or with arguments that are not a JSON object, gets an
  error result at once (the model reads it and can try again);
- a call of a tool the user let run "always" starts at once;
- any other waits for the user: ``ask(ToolAsk)``, one call at a time; ``answer`` runs it once, runs it
  and remembers "always" for that tool (mcp.json's autoApprove), or declines it (the model is told
  the user declined).

Approved calls run while the next is asked about. When every call of the round has a result,
``round_done`` gives them (``ToolCallRecord``s, with exactly what goes back to the model), and the
session's ChatTools sends the next round. ``cancel`` (Stop) withdraws the question and cancels running calls
(each server is told); ``calls_changed`` tells the window each step, for the folded blocks.
"""

from __future__ import annotations

import enum
import json
import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from localchat.chat.rounds import ToolCallRecord
from localchat.engine.types import ToolCall
from localchat.services.main_thread import on_main
from localchat.services.qt_signals import emit
from localchat.toolservers.hub import CallOutcome, CallStatus

if TYPE_CHECKING:
    from localchat.services.mcp_service import McpService, ToolOffer

log = logging.getLogger(__name__)

ASKING = "asking"  # shown while the user is asked (never stored)
WAITING = "waiting"  # waits for the question before it (never stored)
RUNNING = "running"  # running (never stored)

DECLINED = "The user declined to run this tool."
STOPPED = "The user stopped this call before it answered."


class ToolAnswer(enum.Enum):
    ONCE = "once"
    ALWAYS = "always"
    DENY = "deny"


@dataclass(frozen=True)
class ToolAsk:
    """What the confirmation shows: which tool, of which server, with which arguments."""

    call_id: str
    tool: str
    server: str
    where: str  # the server's command line or address
    description: str
    arguments: str  # the arguments, laid out as JSON


_STATUS_OF = {
    CallStatus.DONE: "done", CallStatus.ERROR: "error", CallStatus.FAILED: "failed",
    CallStatus.TIMED_OUT: "timed_out", CallStatus.CANCELLED: "cancelled",
}


def _for_model(outcome: CallOutcome) -> str:
    """What the model reads back for a call: the result, or why there is none."""
    if outcome.status in (CallStatus.DONE, CallStatus.ERROR):
        return outcome.text
    if outcome.status is CallStatus.CANCELLED:
        return STOPPED
    if outcome.status is CallStatus.TIMED_OUT:
        return "Error: the tool did not answer in time, so its call was cancelled."
    return f"Error: {outcome.note or 'the call failed'}"


class ToolLoop(QObject):
    ask = Signal(object)  # ToolAsk: the user is asked about a call (answer with ``answer``)
    ask_withdrawn = Signal()  # the question is no longer asked (Stop)
    activity = Signal(str)  # what the tools are doing, for the status bar ("" when nothing)
    calls_changed = Signal(object)  # tuple[ToolCallRecord, ...]: the round's calls as they stand
    round_done = Signal(object)  # tuple[ToolCallRecord, ...]: every call of the round has its result

    def __init__(self, mcp: McpService, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._mcp = mcp
        self._records: list[ToolCallRecord] = []
        self._arguments: dict[str, dict[str, Any]] = {}
        self._offer: ToolOffer | None = None
        self._max_chars = 6000
        self._asking: str | None = None
        # A round never ends inside the call that started it: the engine's Finished event reaches
        # every listener (the status bar's too) before the next round is sent.
        self._advance_later = on_main(self._advance)
        self._mcp.call_finished.connect(self._on_mcp_call_finished)

    @property
    def busy(self) -> bool:
        return any(r.status in (ASKING, WAITING, RUNNING) for r in self._records)

    @property
    def records(self) -> tuple[ToolCallRecord, ...]:
        return tuple(self._records)

    def run(self, calls: tuple[ToolCall, ...], offer: ToolOffer, max_chars: int) -> None:
        """Take a round's calls; ``round_done`` answers (at once when none needs the user or a server)."""
        self._offer, self._max_chars = offer, max_chars
        self._records, self._arguments, self._asking = [], {}, None
        for call in calls:
            self._records.append(self._resolve(call, offer))
        self._advance_later()

    def _resolve(self, call: ToolCall, offer: ToolOffer) -> ToolCallRecord:
        offered = offer.find(call.name)
        record = ToolCallRecord(call.id, call.name, call.arguments)
        if offered is None:
            known = ", ".join(t.name for t in offer.tools) or "none"
            return replace(record, status="failed", result=f"Error: there is no tool called '{call.name}' "
                           f"(the tools are: {known}).", note=f"The model called '{call.name}', which is not "
                           "one of the tools offered.")
        record = replace(record, server=offered.spec.server)
        try:
            arguments = json.loads(call.arguments) if call.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return replace(record, status="failed",
                           result=f"Error: the arguments are not valid JSON ({exc.msg}).",
                           note=f"The model's arguments for '{call.name}' were not valid JSON, so it was "
                           "not run.")
        if not isinstance(arguments, dict):
            return replace(record, status="failed", result="Error: the arguments must be a JSON object.",
                           note=f"The model's arguments for '{call.name}' were not an object, so it was "
                           "not run.")
        self._arguments[call.id] = arguments
        return replace(record, status=WAITING)

    def _advance(self) -> None:
        """Start what may start, ask about the next call, or finish the round."""
        for i, record in enumerate(self._records):
            if record.status == WAITING and self._mcp.always_allowed(record.server, self._spec_name(record)):
                self._start(i)
        if self._asking is None:
            waiting = next((i for i, r in enumerate(self._records) if r.status == WAITING), None)
            if waiting is not None:
                self._ask(waiting)
        emit(self.calls_changed, self.records)
        self._say()
        if not self.busy and self._records:
            records, self._records = tuple(self._records), []
            emit(self.round_done, records)

    def _spec_name(self, record: ToolCallRecord) -> str:
        """The tool's own name on its server (the model's name differs when two servers share one)."""
        offered = self._offer.find(record.name) if self._offer is not None else None
        return offered.spec.name if offered is not None else record.name

    def _ask(self, index: int) -> None:
        record = self._records[index]
        self._records[index] = replace(record, status=ASKING)
        self._asking = record.id
        offered = self._offer.find(record.name) if self._offer is not None else None
        entry = self._mcp.config.server(record.server)
        emit(self.ask, ToolAsk(
            record.id, record.name, record.server, entry.where if entry is not None else "",
            offered.spec.description if offered is not None else "",
            json.dumps(self._arguments.get(record.id, {}), indent=2, ensure_ascii=False),
        ))

    def answer(self, call_id: str, answer: ToolAnswer) -> None:
        """The user's answer about the call asked (an answer about another call is ignored)."""
        if call_id != self._asking:
            return
        self._asking = None
        index = next(i for i, r in enumerate(self._records) if r.id == call_id)
        record = self._records[index]
        if answer is ToolAnswer.DENY:
            log.info("tool call %s declined", record.name)
            self._records[index] = replace(record, status="denied", result=DECLINED,
                                           note=f"You declined to run '{record.name}'.")
        else:
            if answer is ToolAnswer.ALWAYS:
                problem = self._mcp.allow_always(record.server, self._spec_name(record))
                if problem:
                    self._records[index] = record = replace(record, note=problem)
            self._start(index)
        self._advance()

    def _start(self, index: int) -> None:
        record = self._records[index]
        self._records[index] = replace(record, status=RUNNING)
        log.info("tool call %s on %s", record.name, record.server)
        self._mcp.call(record.id, record.server, self._spec_name(record), self._arguments.get(record.id, {}),
                       self._max_chars)

    def cancel(self) -> None:
        """Stop: the question is withdrawn, running calls are cancelled; the round ends with what it has."""
        if not self._records:
            return
        if self._asking is not None:
            self._asking = None
            emit(self.ask_withdrawn)
        for i, record in enumerate(self._records):
            if record.status in (ASKING, WAITING):
                self._records[i] = replace(record, status="cancelled", result=STOPPED,
                                           note=f"Stopped before '{record.name}' ran.")
            elif record.status == RUNNING:
                self._mcp.cancel(record.id)  # its outcome (cancelled) comes back from the hub
        self._advance()

    def _on_mcp_call_finished(self, outcome: CallOutcome) -> None:
        index = next((i for i, r in enumerate(self._records) if r.id == outcome.call_id), None)
        if index is None:
            return
        record = self._records[index]
        notes = " ".join(n for n in (record.note, outcome.note) if n)
        self._records[index] = replace(record, status=_STATUS_OF[outcome.status], result=_for_model(outcome),
                                       note=notes, seconds=outcome.seconds)
        self._advance()

    def _say(self) -> None:
        running = [r for r in self._records if r.status == RUNNING]
        asking = next((r for r in self._records if r.status == ASKING), None)
        if asking is not None:
            text = f"Waiting for your answer: run {asking.name} ({asking.server})?"
        elif len(running) == 1:
            text = f"Running {running[0].name} ({running[0].server})…"
        elif running:
            text = f"Running {len(running)} tools: {', '.join(r.name for r in running)}…"
        else:
            text = ""
        emit(self.activity, text)
