"""toolservers/tools.py: which tool schemas can be offered (each refusal a sentence), a result's
blocks as text for the model, and the cap on its length."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from localchat.toolservers.tools import block_text, capped, left_out_sentence, result_text, schema_problem

GOOD = {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]}


def test_a_valid_object_schema_can_be_offered() -> None:
    assert schema_problem("add", GOOD) == ""
    assert schema_problem("files.read-1", {}) == ""  # no type: an object


@pytest.mark.parametrize(("name", "schema", "words"), [
    ("add numbers", GOOD, "characters a model's tool call cannot carry"),
    ("x" * 65, GOOD, "at most 64"),
    ("add", ["not", "a", "dict"], "not a JSON object"),
    ("add", {"type": "string"}, 'describes "string", not an object'),
    ("add", {"type": "object", "properties": {"a": {"type": "numbr"}}}, "not valid JSON Schema"),
])
def test_schemas_that_cannot_be_offered_say_why(name: str, schema: object, words: str) -> None:
    problem = schema_problem(name, schema)
    assert words in problem
    sentence = left_out_sentence("calc", name, problem)
    assert sentence.startswith(f"The tool '{name}' of the tool server 'calc' was left out: ")


def test_result_blocks_become_text_for_the_model() -> None:
    blocks = [
        SimpleNamespace(type="text", text="42"),
        SimpleNamespace(type="image", data="A" * 400, mime_type="image/png"),
        SimpleNamespace(type="resource_link", uri="file:///a.txt"),
        SimpleNamespace(type="resource", resource=SimpleNamespace(text="inside", uri="file:///b")),
        SimpleNamespace(type="resource", resource=SimpleNamespace(text=None, uri="file:///c.bin")),
        SimpleNamespace(type="video"),
    ]
    assert result_text(blocks, None).split("\n") == [
        "42",
        "[image: image/png, 300 bytes, not shown to the model]",
        "[resource: file:///a.txt]",
        "inside",
        "[binary resource: file:///c.bin]",
        "[video content]",
    ]
    assert block_text(SimpleNamespace()) == "[unknown content]"


def test_structured_content_stands_in_when_there_are_no_blocks() -> None:
    assert result_text([], {"sum": 3}) == '{"sum": 3}'
    assert result_text([], None) == ""


def test_capped_cuts_and_says_so() -> None:
    assert capped("abc", 3) == ("abc", False)
    assert capped("abcdef", 4) == ("abcd", True)
