"""Lines of a tool server's output: split in linear time, and one too long cut short with its start kept."""

from __future__ import annotations

import json
import time

from localchat.toolservers.framing import LineFramer, Oversized, first_text, request_id
from localchat.toolservers.stdio_pipe import CUT_KEY, cut_result


def test_lines_across_chunks_in_any_pieces() -> None:
    text = b'{"a": 1}\r\n{"b": "two"}\n\n{"c": 3}\n'
    for size in (1, 2, 3, 7, 100):
        framer = LineFramer()
        got: list[bytes | Oversized] = []
        for i in range(0, len(text), size):
            got += framer.feed(text[i : i + size])
        assert got == [b'{"a": 1}', b'{"b": "two"}', b"", b'{"c": 3}']


def test_a_long_line_is_cut_and_its_id_and_text_kept() -> None:
    message = {"jsonrpc": "2.0", "id": 17, "result": {"content": [{"type": "text", "text": "é\\\"x" * 40}]}}
    data = (json.dumps(message) + "\nnext\n").encode()
    framer = LineFramer(max_bytes=100, head_bytes=90, tail_bytes=20)
    got: list[bytes | Oversized] = []
    for i in range(0, len(data), 13):
        got += framer.feed(data[i : i + 13])
    cut, after = got
    assert isinstance(cut, Oversized) and after == b"next"
    assert cut.size == len(data) - len(b"\nnext\n") and cut.head == data[:90] and cut.tail.endswith(b"}}")
    assert request_id(cut) == 17
    start = first_text(cut.head)
    assert start and ("é\\\"x" * 40).startswith(start)


def test_the_id_may_come_last() -> None:
    tail = b'"text":"zzz"}]},"id":"req-9","jsonrpc":"2.0"}'
    assert request_id(Oversized(b'{"result":{"content":[{"type":"text","text":"zz', tail, 10**8)) == "req-9"
    assert request_id(Oversized(b'{"method":"notifications/message"', b"}", 10**8)) is None


def test_a_cut_message_answers_its_request_with_the_start_of_its_text() -> None:
    head = b'{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"0123456789'
    cut = Oversized(head, b"}}", 52_000_000)
    message = cut_result(cut)
    assert message is not None
    dumped = json.loads(message.message.model_dump_json(by_alias=True, exclude_none=True))
    assert dumped["id"] == 5
    assert dumped["result"]["content"][0]["text"] == "0123456789"
    assert dumped["result"]["_meta"][CUT_KEY] == 52_000_000


def test_fifty_megabytes_split_in_linear_time() -> None:
    chunk = b"x" * 65536
    framer = LineFramer(max_bytes=100_000_000)
    started = time.perf_counter()
    for _ in range(50_000_000 // len(chunk)):
        assert framer.feed(chunk) == []
    (line,) = framer.feed(b"\n")
    assert isinstance(line, bytes) and len(line) == 50_000_000 // len(chunk) * len(chunk)
    # the SDK's reader took 35 s for this on the same machine (quadratic); linear is well under 5 s
    assert time.perf_counter() - started < 5.0
