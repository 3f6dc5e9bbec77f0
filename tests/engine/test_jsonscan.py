"""engine/tooluse/jsonscan.CallScanner: a call object read in any split keeps its name and the raw
text of its arguments, stops at the object's end, takes Qwen's doubled braces, and turns bad on
structure it cannot read."""

from __future__ import annotations

import json

import pytest

from localchat.engine.tooluse.jsonscan import CallScanner

CALL = '{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}'


def scan(text: str, piece: int) -> tuple[CallScanner, int]:
    """Feed ``text`` in pieces of ``piece`` characters; (the scanner, characters it took)."""
    s = CallScanner()
    taken = 0
    for i in range(0, len(text), piece):
        chunk = text[i : i + piece]
        while chunk and not (s.done or s.bad):
            n = s.feed(chunk)
            taken += n
            chunk = chunk[n:]
    s.finish()
    return s, taken


@pytest.mark.parametrize("piece", [1, 3, 7, len(CALL)])
def test_a_call_in_any_split_has_its_name_and_raw_arguments(piece: int) -> None:
    s, taken = scan(CALL + " trailing words", piece)
    assert s.done and not s.bad
    assert taken == len(CALL)  # stops at the object's end, the rest is not the call's
    assert s.string("name") == "get_weather"
    assert json.loads(s.raw("arguments")) == {"city": "Paris", "days": [1, 2]}
    assert s.keys == ["name", "arguments"]


def test_arguments_are_readable_while_still_written() -> None:
    s = CallScanner()
    rest = '{"name": "f", "arguments": {"q": "ab'
    while rest:
        rest = rest[s.feed(rest):]
    assert s.string("name") == "f"
    assert s.raw("arguments").startswith('{"q": "ab')
    assert not s.done and not s.bad


def test_doubled_braces_of_qwens_template_are_one_object() -> None:
    s, _ = scan('{{"name": "f", "arguments": {}}}', 1)
    assert s.done and s.string("name") == "f" and s.raw("arguments") == "{}"


@pytest.mark.parametrize("text", ["hello", '{"name" "f"}', '{"name": "f",, }', '{3: 1}'])
def test_text_that_is_no_call_object_is_bad(text: str) -> None:
    s, _ = scan(text, 1)
    assert s.bad and not s.done


def test_escapes_and_braces_inside_strings_do_not_end_the_object() -> None:
    text = '{"name": "say", "arguments": {"text": "a \\"quoted\\" } brace"}}'
    s, taken = scan(text, 2)
    assert s.done and taken == len(text)
    assert json.loads(s.raw("arguments")) == {"text": 'a "quoted" } brace'}
