"""The reply reader: every format's calls, complete and streamed in random small pieces, thinking apart,
small models' habits, and text that is no call left as content."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from localchat.engine.tooluse.formats import GENERIC, GRANITE, HERMES, LLAMA3, MISTRAL, THINK, ToolFormat
from localchat.engine.tooluse.parser import (
    ParsedReply,
    PassThrough,
    ReplyParser,
    new_call_id,
    parse_reply,
    thinking_spans,
    tokens_within,
)
from localchat.engine.types import ToolCall

NAMES = ("get_weather", "search")


def counter() -> Callable[[], str]:
    n = itertools.count()
    return lambda: f"call_{next(n)}"


@dataclass
class Streamed:
    content: str
    reasoning: str
    calls: tuple[ToolCall, ...]
    calls_done: int


def stream(
    text: str,
    fmt: ToolFormat | None,
    seed: int,
    names: tuple[str, ...] = NAMES,
    opens: bool = False,
    thinking: bool = False,
) -> Streamed:
    """Feed ``text`` in random pieces of 1-7 characters; rebuild the reply from the deltas alone, and
    check that every content piece is the fed text at the offset it names."""
    rng = random.Random(seed)
    parser = ReplyParser(fmt, names, THINK if thinking or opens else None, opens, counter())
    content, reasoning = "", ""
    calls: dict[int, list[str]] = {}
    i = 0
    deltas = []
    while i < len(text):
        n = rng.randint(1, 7)
        deltas.append(parser.feed(text[i : i + n]))
        i += n
    deltas.append(parser.finish())
    for d in deltas:
        for at, piece in d.content_pieces:
            assert text[at : at + len(piece)] == piece
        content += d.content
        reasoning += d.reasoning
        for td in d.tool_deltas:
            if td.index not in calls:
                assert td.id and td.name, "a call's first delta carries its id and name"
                assert td.index == len(calls), "calls are numbered in order"
                calls[td.index] = [td.id, td.name, ""]
            else:
                assert not td.id and not td.name, "id and name come once"
            calls[td.index][2] += td.arguments
    got = tuple(ToolCall(*calls[k]) for k in sorted(calls))
    return Streamed(content, reasoning, got, parser.calls_done)


def check(
    text: str,
    fmt: ToolFormat | None,
    names: tuple[str, ...] = NAMES,
    opens: bool = False,
    thinking: bool = False,
) -> ParsedReply:
    """The complete parse, after checking that 40 random streamings of ``text`` give exactly it."""
    whole = parse_reply(text, fmt, names, THINK if thinking or opens else None, opens, counter())
    for seed in range(40):
        got = stream(text, fmt, seed, names, opens, thinking)
        assert (got.content, got.reasoning, got.calls) == (
            whole.content,
            whole.reasoning,
            whole.tool_calls,
        ), seed
    return whole


def call(name: str, args: object, index: int = 0) -> ToolCall:
    return ToolCall(f"call_{index}", name, args if isinstance(args, str) else json.dumps(args))


# -- each format ----------------------------------------------------------------------------------


def test_hermes_calls_and_the_text_before_them() -> None:
    text = (
        "Let me look both up.\n<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n'
        '{"name": "search", "arguments": {"q": "Paris \\"museums\\"", "n": [1, {"x": "}"}]}}\n</tool_call>'
    )
    reply = check(text, HERMES)
    assert reply.content == "Let me look both up."
    assert reply.tool_calls == (
        call("get_weather", '{"city": "Paris"}'),
        call("search", '{"q": "Paris \\"museums\\"", "n": [1, {"x": "}"}]}', 1),
    )


def test_hermes_call_without_its_closing_tag_at_the_end() -> None:
    reply = check('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n', HERMES)
    assert reply.content == "" and reply.tool_calls == (call("get_weather", {"city": "Paris"}),)


def test_llama3_bare_json_with_parameters_and_python_tag() -> None:
    reply = check('{"name": "get_weather", "parameters": {"city": "Paris"}}', LLAMA3)
    assert reply.tool_calls == (call("get_weather", {"city": "Paris"}),) and reply.content == ""
    two = (
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; '
        '{"name": "search", "parameters": {}}'
    )
    reply = check(two, LLAMA3)
    assert [c.name for c in reply.tool_calls] == ["get_weather", "search"] and reply.content == ""


def test_mistral_array_with_string_arguments() -> None:
    text = (
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, '
        '{"name": "search", "arguments": "{\\"q\\": \\"x\\"}"}]'
    )
    reply = check(text, MISTRAL)
    assert reply.tool_calls == (call("get_weather", {"city": "Paris"}), call("search", '{"q": "x"}', 1))
    assert reply.content == ""


def test_granite_array() -> None:
    reply = check('<|tool_call|>[{"name": "search", "arguments": {"q": "granite"}}]', GRANITE)
    assert reply.tool_calls == (call("search", {"q": "granite"}),)


def test_generic_format_reads_the_hermes_form_it_asks_for() -> None:
    reply = check('<tool_call>\n{"name": "search", "arguments": {"q": "gemma"}}\n</tool_call>', GENERIC)
    assert reply.tool_calls == (call("search", {"q": "gemma"}),)


# -- small models' habits -------------------------------------------------------------------------


def test_a_fenced_json_call_after_some_words() -> None:
    text = (
        "You can use `get_weather`:\n"
        '```json\n{\n  "name": "get_weather",\n  "arguments": {\n    "city": "Paris"\n  }\n}\n```'
    )
    reply = check(text, HERMES)
    assert reply.content == "You can use `get_weather`:"
    assert reply.tool_calls == (call("get_weather", '{\n    "city": "Paris"\n  }'),)


def test_the_doubled_braces_of_qwens_template_example() -> None:
    for text in (
        '{{"name": "get_weather", "arguments": {"city": "Paris"}}',
        '{{"name": "get_weather", "arguments": {"city": "Paris"}}}',
    ):
        reply = check(text, HERMES)
        assert reply.tool_calls == (call("get_weather", {"city": "Paris"}),) and reply.content == ""


def test_json_and_code_that_are_no_call_stay_content() -> None:
    for text in (
        '```json\n{"name": "Ada", "age": 36}\n```',  # a name, but not a listed tool
        '```json\n{"a": 1}\n```\nDone.',
        '```python\nx = {"name": "get_weather", "arguments": {}}\n```',  # code is code
        '```json\n{"name": "get_weather", "arguments": {}, "response": {"t": 18}}\n```',  # a summary
        '{"city": "Paris", "temperature": 18}',
        "[1, 2, 3]",
        "Use ``` for code, and {braces} as you like.",
        '<tool_call>\n{"name": "unknown_tool", "arguments": {}}\n</tool_call>',
        "<tool_call> I cannot call tools.",
        "<tool_call>",
        '{"name": "get_weather", "arguments": {"city": "Par',  # a bare candidate cut off is text
    ):
        reply = check(text, HERMES)
        assert reply.tool_calls == () and reply.content == text.strip(), text


def test_a_marked_call_cut_off_keeps_its_arguments_so_far() -> None:
    reply = check('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par', HERMES)
    assert reply.tool_calls == (call("get_weather", '{"city": "Par'),) and reply.content == ""


def test_unparseable_output_is_content_never_an_error() -> None:
    rng = random.Random(7)
    alphabet = '{}[]",:<>/`\n tool_call namegt_wh"arguments'
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        for fmt in (HERMES, LLAMA3, MISTRAL, GENERIC):
            parse_reply(text, fmt, NAMES, THINK)  # must not raise
        stream(text, HERMES, rng.randint(0, 99), thinking=True)


def test_only_the_chosen_tool_is_read() -> None:
    text = '<tool_call>\n{"name": "search", "arguments": {}}\n</tool_call>'
    assert check(text, HERMES, names=("get_weather",)).tool_calls == ()


def test_without_tools_nothing_is_read_as_a_call() -> None:
    text = '<tool_call>\n{"name": "search", "arguments": {}}\n</tool_call>'
    reply = check(text, HERMES, names=())
    assert reply.tool_calls == () and reply.content == text


# -- reasoning ------------------------------------------------------------------------------------


def test_thinking_goes_to_reasoning_and_a_marker_inside_it_is_thinking() -> None:
    text = (
        "<think>\nShould I use <tool_call> here? ```json {} ``` maybe.\n</think>\n\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    )
    reply = check(text, HERMES, thinking=True)
    assert reply.reasoning == "Should I use <tool_call> here? ```json {} ``` maybe."
    assert reply.content == "" and reply.tool_calls == (call("get_weather", {"city": "Oslo"}),)


def test_a_prompt_that_opened_the_thinking_block() -> None:
    reply = check("Two and two.\nThat is four.\n</think>\n\nThe answer is 4.", HERMES, opens=True)
    assert reply.reasoning == "Two and two.\nThat is four." and reply.content == "The answer is 4."
    # thinking that never closes (the token limit) stays reasoning
    reply = check("Still thinking about <tool_call>", HERMES, opens=True)
    assert reply.reasoning == "Still thinking about <tool_call>" and reply.content == ""


def test_thinking_without_tools() -> None:
    reply = check("<think>hmm</think>Hello!", None, thinking=True)
    assert (reply.reasoning, reply.content, reply.tool_calls) == ("hmm", "Hello!", ())


# -- the stream's own promises --------------------------------------------------------------------


def test_arguments_stream_as_they_are_written() -> None:
    parser = ReplyParser(HERMES, NAMES, new_id=counter())
    first = parser.feed('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa')
    assert [(d.index, d.id, d.name) for d in first.tool_deltas][:1] == [(0, "call_0", "get_weather")]
    assert "".join(d.arguments for d in first.tool_deltas) == '{"city": "Pa'
    assert parser.calls_done == 0
    second = parser.feed('ris"}}\n</tool_call>')
    assert "".join(d.arguments for d in second.tool_deltas) == 'ris"}'
    assert parser.calls_done == 1 and first.content == second.content == ""


def test_a_partial_marker_is_held_then_released_as_content() -> None:
    parser = ReplyParser(HERMES, NAMES)
    assert parser.feed("a <tool_").content == "a"
    assert parser.feed("callers>").content == " <tool_callers>"


@pytest.mark.parametrize("text", ["", "plain", "  spaced  \n", "```\ncode\n```"])
def test_pass_through_keeps_every_character(text: str) -> None:
    reader = PassThrough()
    out = reader.feed(text[:2]).content + reader.feed(text[2:]).content + reader.finish().content
    assert out == text and reader.calls == ()


def test_call_ids_are_distinct_and_long_enough_for_mistral() -> None:
    ids = {new_call_id() for _ in range(100)}
    assert len(ids) == 100 and all(i.startswith("call_") and len(i) >= 14 and i[5:].isalnum() for i in ids)


@pytest.mark.parametrize("seed", range(5))
def test_thinking_spans_cover_each_block_with_its_tags_however_the_text_arrives(seed: int) -> None:
    """What the engine counts ``reasoning_tokens`` from (usage reported 0 after a reply that thought)."""
    text = 'Hi <think>plan</think> so <tool_call>{"name": "search", "arguments": {}}</tool_call>'
    rng = random.Random(seed)
    parser = ReplyParser(HERMES, NAMES, THINK)
    i = 0
    while i < len(text):
        n = rng.randint(1, 7)
        parser.feed(text[i : i + n])
        i += n
    parser.finish()
    start = text.index("<think>")
    assert parser.thinking_spans == ((start, text.index("</think>") + len("</think>")),)
    assert thinking_spans(text, THINK) == parser.thinking_spans


def test_thinking_spans_of_a_block_the_prompt_opened_or_the_reply_left_open() -> None:
    assert thinking_spans("plan</think>answer", THINK, opens_thinking=True) == ((0, 12),)
    assert thinking_spans("<think>still thinking", THINK) == ((0, 21),)
    assert thinking_spans("no thoughts here", THINK) == ()
    parser = ReplyParser(None, (), THINK)
    parser.feed("<think>a")
    assert parser.thinking_spans == ((0, 8),)  # an open block runs to what was fed so far
    assert PassThrough().thinking_spans == ()


def test_tokens_within_counts_the_tokens_that_start_inside_a_span() -> None:
    # tokens: "<think>" "plan" "</think>" "\n\n" "answer" at these offsets
    starts = [0, 7, 11, 19, 21]
    assert tokens_within(starts, ((0, 19),)) == 3
    assert tokens_within(starts, ()) == 0
    assert tokens_within(starts, ((0, 5), (20, 30))) == 2
