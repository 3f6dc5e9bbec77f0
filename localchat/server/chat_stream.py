"""A chat completion's job events as OpenAI's stream of ``chat.completion.chunk`` objects.

The deltas, as OpenAI sends them (and its client's stream helpers reassemble them):
- the first chunk opens the message: ``{"role": "assistant", "content": ""}``;
- thinking: ``{"reasoning_content": "..."}`` (llama-server's field), never in ``content``;
- text: ``{"content": "..."}``;
- a tool call opens with ``{"tool_calls": [{"index", "id", "type": "function", "function":
  {"name", "arguments": ""}}]}``, then its arguments come in fragments that carry only ``index``
  and ``function.arguments``;
- the last chunk has an empty delta and the ``finish_reason`` ("tool_calls" when the reply ends in
  calls), with ``timings`` and localchat's ``speculative``; ``usage`` follows in a chunk without
  choices when ``stream_options.include_usage`` asks; then ``data: [DONE]``.

The engine reads calls as the reply streams; the result's calls are the whole of them, so what a
call's streamed fragments lack (a call read only at the end, or its last characters) is sent
before the last chunk, and the stream adds up to the non-streamed answer.
"""

from __future__ import annotations

from typing import Any

from localchat.engine.types import GenerationResult, ToolCall
from localchat.host.events import Finished, JobEvent, Tokens
from localchat.server import shapes
from localchat.server.errors import failure_error
from localchat.server.parsing import ParsedRequest
from localchat.server.streaming import sse


class ChatStream:
    def __init__(self, rid: str, created: int, model: str, parsed: ParsedRequest) -> None:
        self.rid, self.created, self.model, self.parsed = rid, created, model, parsed
        self.opened = False
        self.calls: dict[int, list[str]] = {}  # call index -> [id, name, arguments sent so far]

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return shapes.chat_chunk(self.rid, self.created, self.model, delta, finish)

    def _call(self, index: int, call_id: str, name: str) -> bytes:
        self.calls[index] = [call_id, name, ""]
        opening = {"index": index, "id": call_id, "type": "function",
                   "function": {"name": name, "arguments": ""}}
        return sse(self.chunk({"tool_calls": [opening]}))

    def _arguments(self, index: int, fragment: str) -> bytes:
        self.calls[index][2] += fragment
        return sse(self.chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}))

    def _rest_of_calls(self, calls: tuple[ToolCall, ...]) -> list[bytes]:
        """What the streamed deltas lack of the result's calls (whole calls, or their last fragment)."""
        out = []
        for index, call in enumerate(calls):
            if index not in self.calls:
                out.append(self._call(index, call.id, call.name))
            sent = self.calls[index][2]
            if call.arguments.startswith(sent) and len(call.arguments) > len(sent):
                out.append(self._arguments(index, call.arguments[len(sent):]))
        return out

    def _finish(self, result: GenerationResult) -> list[bytes]:
        out = self._rest_of_calls(result.tool_calls)
        last = self.chunk({}, shapes.finish_reason(result.finish_reason))
        last["timings"] = shapes.timings(result.stats)
        last.update(shapes.extras(result, self.parsed.mode, self.parsed.warning))
        out.append(sse(last))
        if self.parsed.include_usage:
            tail = self.chunk({})
            tail["choices"] = []
            tail["usage"] = shapes.usage(result.stats)
            tail["timings"] = last["timings"]
            out.append(sse(tail))
        out.append(b"data: [DONE]\n\n")
        return out

    def render(self, event: JobEvent) -> list[bytes]:
        out = []
        if not self.opened:
            self.opened = True
            out.append(sse(self.chunk({"role": "assistant", "content": ""})))
        if isinstance(event, Tokens):
            e = event.event
            if e.reasoning:
                out.append(sse(self.chunk({"reasoning_content": e.reasoning})))
            if e.text:
                out.append(sse(self.chunk({"content": e.text})))
            for d in e.tool_deltas:
                if d.index not in self.calls:
                    out.append(self._call(d.index, d.id, d.name))
                if d.arguments:
                    out.append(self._arguments(d.index, d.arguments))
        elif isinstance(event, Finished):
            out += self._finish(event.result)
        else:
            out.append(sse(failure_error(event.failure).body()))
        return out
