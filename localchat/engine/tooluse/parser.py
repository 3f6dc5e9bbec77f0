"""A reply read as it streams: content, reasoning and tool calls apart.

``ReplyParser.feed`` takes the reply's text in pieces, as the engine produces it,
and returns what each piece added: content (with the offsets it came from in the
fed text, so the engine can keep its draft marking), reasoning, and tool-call
deltas in OpenAI's streaming order (index, id and name once, then argument
fragments). ``parse_reply`` is the same machine fed the whole text at once, so a
streamed reply and a complete one always agree.

What it reads:

- ``<think>…</think>`` (models that think) as reasoning, also when the prompt opened the
  block; a call marker inside the thinking is thinking.
- The format's own blocks (``<tool_call>…</tool_call>``, ``[TOOL_CALLS][…]``, ...): a call
  is taken as soon as its name is known and is one of the request's tools, and its
  arguments stream as written. A block whose text is not a call goes to the content.
- Habits of small models: a ```` ```json ```` fenced block, or a reply that is a bare JSON
  object, ``{"name": .., "arguments": ..}`` naming a listed tool; these are judged whole
  (only the keys a call has), since code blocks and JSON answers look the same until they end.
- A ``<tool_call>`` block left without its closing tag at the end of the reply.

A call cut off by the token limit keeps the arguments written so far (as OpenAI
does with ``finish_reason: length``). Nothing here raises on odd text: what is
not a call is content. Whitespace right after ``</think>`` and around calls is
dropped; the rest of the content is passed on exactly as written.
"""

from __future__ import annotations

import enum
import re
import secrets
import string
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from localchat.engine.tooluse.formats import ThinkingTags, ToolFormat
from localchat.engine.tooluse.jsonscan import CallScanner
from localchat.engine.types import ToolCall, ToolCallDelta

_ID_CHARS = string.ascii_letters + string.digits
_WS = " \t\r\n"
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "type", "id"})
_ARGS_KEYS = ("arguments", "parameters")
_FENCE = "```"
_FENCE_INFO = re.compile(r"[\w+.-]*")
_FENCE_INFO_MAX = 20
_JSON_FENCES = frozenset({"", "json", "jsonc", "json5"})


def new_call_id() -> str:
    """``call_`` and 24 random letters and digits (Mistral's templates want at least 9 of them)."""
    return "call_" + "".join(secrets.choice(_ID_CHARS) for _ in range(24))


@dataclass(frozen=True)
class ParseDelta:
    """What one piece of text added. ``content_pieces``: (offset in the fed text, text)."""

    content_pieces: tuple[tuple[int, str], ...] = ()
    reasoning: str = ""
    tool_deltas: tuple[ToolCallDelta, ...] = ()

    @property
    def content(self) -> str:
        return "".join(text for _, text in self.content_pieces)

    @property
    def empty(self) -> bool:
        return not (self.content_pieces or self.reasoning or self.tool_deltas)


@dataclass(frozen=True)
class ParsedReply:
    content: str
    reasoning: str
    tool_calls: tuple[ToolCall, ...]


class ReplyReader(Protocol):
    """What the engine feeds a reply's text to (a ReplyParser, or PassThrough when nothing is parsed)."""

    def feed(self, text: str) -> ParseDelta: ...
    def finish(self) -> ParseDelta: ...
    @property
    def calls(self) -> tuple[ToolCall, ...]: ...
    @property
    def calls_done(self) -> int: ...
    @property
    def thinking_spans(self) -> tuple[tuple[int, int], ...]: ...


class PassThrough:
    """Every character is content, unchanged: the reader of replies without tools or thinking."""

    def __init__(self) -> None:
        self._at = 0

    def feed(self, text: str) -> ParseDelta:
        start, self._at = self._at, self._at + len(text)
        return ParseDelta(((start, text),) if text else ())

    def finish(self) -> ParseDelta:
        return ParseDelta()

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        return ()

    @property
    def calls_done(self) -> int:
        return 0

    @property
    def thinking_spans(self) -> tuple[tuple[int, int], ...]:
        return ()


class _Mode(enum.Enum):
    TEXT = "text"
    THINK = "think"
    CODE = "code"  # inside a fenced block that is not a call: passed on until its closing fence
    FENCE_HEAD = "fence_head"  # after ``` until its info string ends
    BLOCK = "block"  # a block that is, or may be, calls


class _Kind(enum.Enum):
    MARKED = "marked"  # opened by the format's marker: explicit, calls stream from their name on
    FENCE = "fence"  # ```json ... ```: judged whole
    BARE = "bare"  # a reply that starts with JSON: judged whole


@dataclass
class _Call:
    index: int
    id: str
    name: str
    arguments: str = ""  # as streamed so far


@dataclass
class _Block:
    kind: _Kind
    start: int  # offset of its first character (the marker's) in the fed text
    head: int  # length of the marker or fence line
    closer: str
    text: str = ""  # everything read since ``start``
    body: str = "start"  # start, object, array, after
    scanner: CallScanner | None = None
    call: _Call | None = None  # the call the scanner is reading, once it is taken
    skip: bool = False  # the object being read is not a call (a later element of an accepted block)
    accepted: bool = False  # at least one call of this block was taken
    array: bool = False


class ReplyParser:
    """Feed a reply's text in pieces; see the module docstring for what it reads."""

    def __init__(
        self,
        fmt: ToolFormat | None,
        tool_names: Iterable[str],
        thinking: ThinkingTags | None = None,
        opens_thinking: bool = False,
        new_id: Callable[[], str] = new_call_id,
    ) -> None:
        """``fmt`` None or no ``tool_names``: calls are not read (tool_choice none), only thinking."""
        self._names = frozenset(tool_names)
        self._fmt = fmt if self._names else None
        self._thinking = thinking
        self._new_id = new_id
        self._buf = ""
        self._buf_at = 0  # offset of ``_buf[0]`` in the fed text
        self._mode = _Mode.THINK if thinking is not None and opens_thinking else _Mode.TEXT
        self._spans: list[tuple[int, int]] = []  # thinking blocks ended so far (offsets, tags included)
        self._think_start = 0  # where the open thinking block began (THINK mode)
        self._block: _Block | None = None
        self._calls: list[_Call] = []  # taken, in order (the last may still be written)
        self._done = 0  # calls whose object is complete
        self._started = False  # non-blank content was given
        self._trim_lead = True  # drop blank content until something else comes
        self._pending: list[tuple[int, str]] = []  # trailing blank content, given when more follows
        self._reason_lead = True
        self._reason_pending = ""
        # output of the current feed
        self._out: list[tuple[int, str]] = []
        self._reasoning: list[str] = []
        self._deltas: list[ToolCallDelta] = []

    # -- public ---------------------------------------------------------------------------
    @property
    def calls(self) -> tuple[ToolCall, ...]:
        return tuple(ToolCall(c.id, c.name, c.arguments) for c in self._calls)

    @property
    def calls_done(self) -> int:
        """Calls whose JSON is complete (the engine may stop after the first without parallel calls)."""
        return self._done

    @property
    def thinking_spans(self) -> tuple[tuple[int, int], ...]:
        """(start, end) offsets in the fed text of the thinking blocks read, their tags included; one
        still open runs to the end of what was fed (the engine counts the reasoning tokens from them)."""
        if self._mode is _Mode.THINK:
            return (*self._spans, (self._think_start, self._buf_at + len(self._buf)))
        return tuple(self._spans)

    def feed(self, text: str) -> ParseDelta:
        self._buf += text
        self._run(final=False)
        return self._delta()

    def finish(self) -> ParseDelta:
        self._run(final=True)
        if self._calls:
            self._pending.clear()
        self._flush_pending()
        return self._delta()

    # -- output ---------------------------------------------------------------------------
    def _delta(self) -> ParseDelta:
        out = ParseDelta(tuple(self._out), "".join(self._reasoning), tuple(self._deltas))
        self._out, self._reasoning, self._deltas = [], [], []
        return out

    def _content(self, offset: int, text: str) -> None:
        if self._trim_lead:
            stripped = text.lstrip(_WS)
            offset += len(text) - len(stripped)
            text = stripped
            if not text:
                return
            self._trim_lead = False
        core = text.rstrip(_WS)
        if core:
            self._flush_pending()
            self._out.append((offset, core))
            self._started = True
        if len(core) < len(text):
            self._pending.append((offset + len(core), text[len(core) :]))

    def _flush_pending(self) -> None:
        self._out.extend(self._pending)
        self._pending.clear()

    def _reason(self, text: str) -> None:
        if self._reason_lead:
            text = text.lstrip(_WS)
            if not text:
                return
            self._reason_lead = False
        core = text.rstrip(_WS)
        if core:
            self._reasoning.append(self._reason_pending + core)
            self._reason_pending = ""
        self._reason_pending += text[len(core) :]

    def _end_reasoning(self) -> None:
        self._reason_pending = ""
        self._reason_lead = True

    # -- the machine ------------------------------------------------------------------------
    def _consume(self, n: int) -> str:
        taken, self._buf = self._buf[:n], self._buf[n:]
        self._buf_at += n
        return taken

    def _run(self, final: bool) -> None:
        """Step until a step waits for more text (or, when ``final``, until all is read)."""
        while self._step(final):
            pass

    def _step(self, final: bool) -> bool:
        """One step of the current mode; False when it made no progress (it waits for more text)."""
        if self._mode is _Mode.BLOCK:
            block = self._block
            assert block is not None
            if block.body == "start":
                return self._body_start(block, final)
            if block.body == "object":
                return self._object(block, final)
            if block.body == "array":
                return self._array(block, final)
            return self._after(block, final)
        if not self._buf:
            return False
        if self._mode is _Mode.TEXT:
            return self._text(final)
        if self._mode is _Mode.THINK:
            return self._think(final)
        if self._mode is _Mode.CODE:
            return self._code(final)
        return self._fence_head(final)

    def _markers(self) -> list[str]:
        markers = []
        if self._thinking is not None:
            markers.append(self._thinking.open)
        if self._fmt is not None:
            markers.extend(self._fmt.openers)
            markers.append(_FENCE)
        return markers

    def _text(self, final: bool) -> bool:
        buf = self._buf
        markers = self._markers()
        if self._fmt is not None and not self._started and not self._calls:
            lead = _blank(buf)
            rest = buf[lead:]
            if rest[:1] in ("{", "["):
                if not final and any(m.startswith(rest) and m != rest for m in markers):
                    return False  # "[TOOL" may still become Mistral's marker
                if not any(rest.startswith(m) for m in markers):
                    self._content(self._buf_at, self._consume(lead))
                    self._open_block(_Kind.BARE, 0, "")
                    return True
        found, partial = _find(buf, markers)
        if found is not None:
            at, marker = found
            self._content(self._buf_at, self._consume(at))
            if self._thinking is not None and marker == self._thinking.open:
                self._think_start = self._buf_at
                self._consume(len(marker))
                self._mode = _Mode.THINK
            elif marker == _FENCE:
                self._mode = _Mode.FENCE_HEAD
            else:
                assert self._fmt is not None
                self._open_block(_Kind.MARKED, len(marker), self._fmt.closer)
            return True
        n = len(buf) - (0 if final else partial)
        self._content(self._buf_at, self._consume(n))
        return n > 0

    def _think(self, final: bool) -> bool:
        assert self._thinking is not None
        close = self._thinking.close
        found, partial = _find(self._buf, [close])
        if found is not None:
            self._reason(self._consume(found[0]))
            self._consume(len(close))
            self._spans.append((self._think_start, self._buf_at))
            self._end_reasoning()
            self._mode, self._trim_lead = _Mode.TEXT, True
            return True
        n = len(self._buf) - (0 if final else partial)
        self._reason(self._consume(n))
        return n > 0

    def _code(self, final: bool) -> bool:
        found, partial = _find(self._buf, [_FENCE])
        if found is not None:
            self._content(self._buf_at, self._consume(found[0] + len(_FENCE)))
            self._mode = _Mode.TEXT
            return True
        n = len(self._buf) - (0 if final else partial)
        self._content(self._buf_at, self._consume(n))
        return n > 0

    def _fence_head(self, final: bool) -> bool:
        """After ```: a call candidate when its info string is empty or json, else a code block."""
        info_line = self._buf[len(_FENCE) :]
        newline = info_line.find("\n")
        info = info_line if newline < 0 else info_line[:newline]
        if len(info) > _FENCE_INFO_MAX or not _FENCE_INFO.fullmatch(info):
            self._content(self._buf_at, self._consume(len(_FENCE)))  # not a fence: backticks in the text
            self._mode = _Mode.TEXT
        elif newline >= 0:
            head = len(_FENCE) + newline + 1
            if info.lower() in _JSON_FENCES:
                self._open_block(_Kind.FENCE, head, _FENCE)
            else:
                self._content(self._buf_at, self._consume(head))
                self._mode = _Mode.CODE
        elif final:
            self._content(self._buf_at, self._consume(len(self._buf)))
            self._mode = _Mode.TEXT
        else:
            return False
        return True

    # -- blocks ------------------------------------------------------------------------------
    def _open_block(self, kind: _Kind, head: int, closer: str) -> None:
        block = _Block(kind, self._buf_at, head, closer)
        block.text = self._consume(head)
        self._block = block
        self._mode = _Mode.BLOCK

    def _take(self, block: _Block, n: int) -> None:
        block.text += self._consume(n)

    def _body_start(self, block: _Block, final: bool) -> bool:
        lead = _blank(self._buf)
        if lead == len(self._buf):
            self._take(block, lead)
            if final:
                self._reject(block)
                return True
            return lead > 0
        ch = self._buf[lead]
        if ch not in "{[":
            self._reject(block)
            return True
        self._take(block, lead + (ch == "["))
        if ch == "[":
            block.array, block.body = True, "array"
        else:
            block.body, block.scanner = "object", CallScanner()
        return True

    def _array(self, block: _Block, final: bool) -> bool:
        """Between the objects of an array: a comma, the next object or the closing bracket."""
        lead = _blank(self._buf)
        if lead == len(self._buf):
            self._take(block, lead)
            if final:
                self._end_block(block)
                return True
            return lead > 0
        ch = self._buf[lead]
        if ch == "{":
            self._take(block, lead)
            block.body, block.scanner = "object", CallScanner()
        elif ch == "," and block.scanner is not None:
            self._take(block, lead + 1)
        elif ch == "]" and block.accepted:
            self._take(block, lead + 1)
            block.body = "after"
        elif block.accepted:
            block.body = "after"
        else:
            self._reject(block)
        return True

    def _object(self, block: _Block, final: bool) -> bool:
        scanner = block.scanner
        assert scanner is not None
        taken = scanner.feed(self._buf)
        self._take(block, taken)
        if final and not self._buf:
            scanner.finish()
        if not self._judge(block, scanner):
            return True  # rejected: the text is read again as content
        if scanner.done or (scanner.bad and block.accepted):
            self._object_done(block, complete=scanner.done)
            return True
        if final and not self._buf:
            self._end_block(block)
            return True
        return taken > 0

    def _judge(self, block: _Block, scanner: CallScanner) -> bool:
        """Take the call, stream its arguments, or reject what cannot be one; False once rejected.

        Called at every event of the scanner (a key or value complete, the end, an error), so a
        call is judged at the same points however the text arrives."""
        if block.call is not None:  # taken: its arguments stream to the end, whatever follows
            self._stream_args(block.call, scanner)
            return True
        name = scanner.string("name")
        not_call = (
            scanner.bad
            or any(k not in _CALL_KEYS for k in scanner.keys)
            or (name is not None and name not in self._names)
            or (scanner.done and name is None)
        )
        if not_call:
            if block.accepted:
                block.skip = True  # a later element that is no call of ours: left out
                return True
            self._reject(block)
            return False
        if name is not None and not block.skip and (block.kind is _Kind.MARKED or scanner.done):
            block.call = self._new_call(name)
            block.accepted = True
            self._pending.clear()  # blank content before a call is dropped
            self._stream_args(block.call, scanner)
        return True

    def _new_call(self, name: str) -> _Call:
        call = _Call(len(self._calls), self._new_id(), name)
        self._calls.append(call)
        self._deltas.append(ToolCallDelta(call.index, call.id, call.name))
        return call

    def _stream_args(self, call: _Call, scanner: CallScanner) -> None:
        """What is new of the arguments: an object as written; a string or other value once
        complete (a string is the arguments' JSON text); none given: ``{}`` at the object's end."""
        key = next((k for k in scanner.keys if k in _ARGS_KEYS and k in scanner.values), None)
        value = scanner.values.get(key) if key is not None else None
        if key is None or value is None:
            text = "{}" if scanner.done else ""
        elif value.kind == "container":
            text = scanner.raw(key)
        elif not value.complete:
            text = ""
        elif value.kind == "string":
            text = scanner.string(key) or ""
        else:
            text = "{}" if scanner.raw(key) == "null" else scanner.raw(key)
        new = text[len(call.arguments) :]
        if new:
            call.arguments += new
            self._deltas.append(ToolCallDelta(call.index, arguments=new))

    def _object_done(self, block: _Block, complete: bool) -> None:
        if block.call is not None:
            self._done += 1
        block.call, block.skip = None, False
        block.body = "array" if block.array and complete else "after"

    def _after(self, block: _Block, final: bool) -> bool:
        """After the calls: the closing text, more calls of a closer-less block, or the end."""
        if block.closer:
            openers = list(self._fmt.openers) if self._fmt is not None and block.kind is _Kind.MARKED else []
            found, _ = _find(self._buf, [block.closer, *openers])
            if found is not None:
                at, marker = found
                # A new block that opens before this one closed ends it; what lies between is dropped.
                self._take(block, at + (len(marker) if marker == block.closer else 0))
                self._close_block()
                return True
            if final:
                self._end_block(block)
                return True
            return False
        lead = _blank(self._buf)
        if lead == len(self._buf):
            if final:
                self._take(block, lead)
                self._close_block()
                return True
            return False
        ch = self._buf[lead]
        if not block.array and ch in ";,":  # calls in a row: {..}; {..}
            self._take(block, lead + 1)
        elif not block.array and ch == "{":
            self._take(block, lead)
            block.body, block.scanner = "object", CallScanner()
        else:
            self._close_block()
        return True

    def _end_block(self, block: _Block) -> None:
        """The text ended inside a block: the calls taken stay (one cut off keeps the arguments
        written so far); a block without one is content; text held after the calls is content."""
        if not block.accepted:
            self._reject(block)
            return
        if block.call is not None:
            block.call = None
        held = self._buf if block.body == "after" else ""
        self._consume(len(self._buf) - len(held))  # an unfinished object after the last call
        self._close_block()
        if held:
            self._content(self._buf_at, self._consume(len(held)))

    def _close_block(self) -> None:
        self._block = None
        self._mode = _Mode.TEXT
        self._trim_lead = True

    def _reject(self, block: _Block) -> None:
        """Not a call: the block's first text is content, the rest is read again."""
        self._block = None
        if block.kind is _Kind.FENCE:
            head, self._mode = block.head, _Mode.CODE
        else:
            head, self._mode = max(block.head, 1), _Mode.TEXT
        head = min(head, len(block.text))
        self._content(block.start, block.text[:head])
        self._buf = block.text[head:] + self._buf
        self._buf_at = block.start + head


def _blank(text: str) -> int:
    """How many blank characters ``text`` starts with."""
    return len(text) - len(text.lstrip(_WS))


def _find(buf: str, markers: list[str]) -> tuple[tuple[int, str] | None, int]:
    """The earliest complete marker in ``buf`` (offset, marker), and the length of the longest
    tail of ``buf`` that may be the start of a marker (to keep until more text comes)."""
    best: tuple[int, str] | None = None
    for marker in markers:
        at = buf.find(marker)
        if at >= 0 and (best is None or at < best[0] or (at == best[0] and len(marker) > len(best[1]))):
            best = (at, marker)
    partial = 0
    for marker in markers:
        for n in range(min(len(marker) - 1, len(buf)), partial, -1):
            if buf.endswith(marker[:n]):
                partial = n
                break
    return best, partial


def thinking_spans(text: str, thinking: ThinkingTags, opens_thinking: bool = False
                   ) -> tuple[tuple[int, int], ...]:
    """The thinking blocks of a whole reply (offsets, tags included), as ``ReplyParser`` reads them: for a
    reply whose thinking stays in its content (``reasoning_format: "none"``), whose reader does not look."""
    parser = ReplyParser(None, (), thinking, opens_thinking)
    parser.feed(text)
    parser.finish()
    return parser.thinking_spans


def tokens_within(starts: Sequence[int], spans: Iterable[tuple[int, int]]) -> int:
    """How many tokens start inside the spans (``starts``: each token's offset in the reply's text).

    A token that straddles a span's end (``</think>`` and a newline in one token) counts in the span."""
    return sum(any(a <= at < b for a, b in spans) for at in starts)


def parse_reply(
    text: str,
    fmt: ToolFormat | None,
    tool_names: Iterable[str],
    thinking: ThinkingTags | None = None,
    opens_thinking: bool = False,
    new_id: Callable[[], str] = new_call_id,
) -> ParsedReply:
    """A complete reply's content, reasoning and calls (the streaming parser fed it at once)."""
    parser = ReplyParser(fmt, tool_names, thinking, opens_thinking, new_id)
    first, last = parser.feed(text), parser.finish()
    return ParsedReply(first.content + last.content, first.reasoning + last.reasoning, parser.calls)
