"""Chat completions' tools and structured output without a model: bodies into the engine's request
(tools, tool_choice, the tool messages and calls of the history, response_format, grammar), bad bodies
as sentences naming the field, a result with calls and thinking as the answer, and a job's events as
OpenAI's stream of deltas (which the real models of the server tests do not all write: thinking)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import openai
import pytest

from localchat.engine.stats import GenerationStats
from localchat.engine.types import (
    ConstraintKind,
    EngineInfo,
    FinishReason,
    GenerationResult,
    ModelInfo,
    SpeculationState,
    TokenEvent,
    ToolCall,
    ToolCallDelta,
    ToolChoiceMode,
)
from localchat.host.events import Failure, FailureKind, Finished, JobEvent, Tokens
from localchat.server import responses_shapes, shapes
from localchat.server.chat_stream import ChatStream
from localchat.server.errors import ApiError, failure_error
from localchat.server.openai_api import refused_field
from localchat.server.parsing import Limits, ParsedRequest, parse_chat

LIMITS = Limits(max_tokens=256)
STATE = SpeculationState(active=True, drafter="n-gram")
STATS = GenerationStats(prompt_tokens=10, generated_tokens=7, generation_seconds=0.5)
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                           "parameters": WEATHER}}]
ASK = [{"role": "user", "content": "Weather in Paris?"}]
TARGET = ModelInfo("/m/t.gguf", "T", "qwen2", 1, 1, 4096, 32000, True, ("<p>", "<s>", "<m>"),
                   "hermes", True, True)


def info(target: ModelInfo = TARGET) -> EngineInfo:
    return EngineInfo("CPU", target, None, 4096, 2, 0, STATE)


def parse(**body: Any) -> ParsedRequest:
    return parse_chat({"messages": ASK, **body}, info(), LIMITS)


def refused(**body: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse(**body)
    assert caught.value.status == 400 and caught.value.message.endswith((".", ")"))
    return caught.value


def test_tools_and_each_tool_choice_reach_the_engine() -> None:
    r = parse(tools=TOOLS).request
    assert [t.name for t in r.tools] == ["get_weather"] and json.loads(r.tools[0].parameters) == WEATHER
    assert r.tool_choice.mode is ToolChoiceMode.AUTO and r.parallel_tool_calls and r.separate_reasoning
    for given, mode in (("none", ToolChoiceMode.NONE), ("required", ToolChoiceMode.REQUIRED)):
        assert parse(tools=TOOLS, tool_choice=given).request.tool_choice.mode is mode
    named = parse(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert named.request.tool_choice.mode is ToolChoiceMode.FUNCTION
    assert named.request.tool_choice.name == "get_weather"
    assert not parse(tools=TOOLS, parallel_tool_calls=False).request.parallel_tool_calls
    assert not parse(reasoning_format="none").request.separate_reasoning
    assert parse(reasoning_format="deepseek").request.separate_reasoning


def test_the_history_carries_calls_with_null_content_and_tool_results() -> None:
    history = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "call_2", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}},
        ]},
        {"role": "tool", "tool_call_id": "call_2", "content": "25C"},
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "18C"}]},
    ]
    messages = parse_chat({"messages": history, "tools": TOOLS}, info(), LIMITS).request.messages
    assert messages[1].role == "assistant" and messages[1].content == ""
    assert [(c.id, c.name, json.loads(c.arguments)) for c in messages[1].tool_calls] == [
        ("call_1", "get_weather", {"city": "Paris"}), ("call_2", "get_weather", {"city": "Rome"})]
    assert [(m.role, m.tool_call_id, m.name, m.content) for m in messages[2:]] == [
        ("tool", "call_2", "get_weather", "25C"), ("tool", "call_1", "get_weather", "18C")]


def test_response_format_json_schema_json_object_text_and_grammar() -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER, "strict": True}}
    made = parse(response_format=fmt)
    c = made.request.constraint
    assert c is not None and c.kind is ConstraintKind.JSON_SCHEMA and c.strict
    assert json.loads(c.text) == WEATHER and made.constraint_field == "response_format"
    loose = parse(response_format={"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER}})
    assert loose.request.constraint is not None and not loose.request.constraint.strict
    obj = parse(response_format={"type": "json_object"}).request.constraint
    assert obj is not None and obj.kind is ConstraintKind.JSON_OBJECT
    assert parse(response_format={"type": "text"}).request.constraint is None
    lark = parse(grammar='start: "yes" | "no"')
    assert lark.request.constraint is not None and lark.request.constraint.kind is ConstraintKind.LARK
    assert lark.constraint_field == "grammar"
    marked = parse(grammar='%llguidance {}\nstart: "yes"').request.constraint
    assert marked is not None and marked.kind is ConstraintKind.LARK and marked.text == 'start: "yes"'
    gbnf = parse(grammar='root ::= "yes" | "no"').request.constraint
    assert gbnf is not None and gbnf.kind is ConstraintKind.GBNF
    schema = parse(json_schema=WEATHER).request.constraint
    assert schema is not None and schema.kind is ConstraintKind.JSON_SCHEMA


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"tools": {"name": "x"}}, "tools", "list"),
        ({"tools": ["get_weather"]}, "tools[0]", "object"),
        ({"tools": [{"type": "function"}]}, "tools[0].function", "object"),
        ({"tools": [{"type": "function", "function": {"parameters": WEATHER}}]}, "tools[0].function.name",
         "string"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": "{}"}}]},
         "tools[0].function", "JSON Schema"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}]},
         "tools", "must describe an object"),
        ({"tools": [{"type": "code_interpreter"}]}, "tools[0].type", "function tools"),
        ({"tools": TOOLS + TOOLS}, "tools", "Two tools are named"),
        ({"tools": TOOLS, "tool_choice": "any"}, "tool_choice", "auto, none, required"),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_time"}}},
         "tool_choice", "'get_time', which is not among the request's tools"),
        ({"tool_choice": "required"}, "tool_choice", "needs at least one tool"),
        ({"parallel_tool_calls": "yes"}, "parallel_tool_calls", "true or false"),
        ({"response_format": {"type": "xml"}}, "response_format.type", "json_schema"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
         "response_format.json_schema.schema", "JSON Schema"),
        ({"response_format": "json"}, "response_format", "object"),
        ({"grammar": ""}, "grammar", "empty"),
        ({"grammar": 'start: "a"', "response_format": {"type": "json_object"}}, "grammar", "one constraint"),
        ({"messages": [*ASK, {"role": "tool", "content": "18C"}]}, "messages[1].tool_call_id", "required"),
        ({"messages": [{"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {
            "name": "f", "arguments": 3}}]}]}, "messages[0].tool_calls[0].function.arguments", "object"),
    ],
)
def test_bad_bodies_are_sentences_naming_the_field(body: dict[str, Any], param: str, words: str) -> None:
    error = refused(**body)
    assert error.param == param and words in error.message, (error.param, error.message)


def test_tools_for_a_model_without_a_chat_template_are_refused_in_the_engines_words() -> None:
    base = replace(TARGET, has_chat_template=False, tool_use=False, reasoning=False)
    with pytest.raises(ApiError) as caught:
        parse_chat({"messages": ASK, "tools": TOOLS}, info(base), LIMITS)
    assert caught.value.param == "tools" and "no chat template" in caught.value.message
    assert parse_chat({"messages": ASK}, info(base), LIMITS).request.tools == ()
    assert shapes.capabilities(info(base)) == ["completion", "json_schema", "fim"]
    assert shapes.capabilities(info()) == ["completion", "tool_use", "json_schema", "reasoning", "fim"]


def test_an_engine_refusal_names_the_field_the_constraint_came_from() -> None:
    sentence = "The JSON schema cannot be used: no text matches it."
    bad = failure_error(Failure(FailureKind.INVALID_REQUEST, sentence))
    fmt = {"type": "json_schema", "json_schema": {"name": "w", "schema": WEATHER}}
    named = refused_field(bad, parse(response_format=fmt))
    assert named.status == 400 and named.param == "response_format"
    assert named.message == "The JSON schema cannot be used: no text matches it (in 'response_format')."
    tool_grammar = failure_error(Failure(FailureKind.INVALID_REQUEST, sentence))
    assert refused_field(tool_grammar, parse(tools=TOOLS)).param == "tools"
    other = failure_error(Failure(FailureKind.CONTEXT_EXCEEDED))
    assert refused_field(other, parse(response_format=fmt)).param == "messages"


def result_with_call(text: str = "") -> GenerationResult:
    call = ToolCall("call_abc", "get_weather", '{"city": "Paris"}')
    return GenerationResult(text, FinishReason.TOOL_CALLS, STATS, STATE, tool_calls=(call,),
                            reasoning="The user wants weather.")


def test_a_reply_of_calls_is_a_message_with_tool_calls_and_null_content() -> None:
    body = shapes.chat_completion("id", 1, "m", result_with_call(), "off", "")
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_abc", "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}],
        "reasoning_content": "The user wants weather.",
    }
    parsed = openai.types.chat.ChatCompletion.model_validate(body)  # the official client's own type
    assert parsed.choices[0].message.tool_calls is not None
    length = GenerationResult('{"city": "Pa', FinishReason.LENGTH, STATS, STATE)
    cut = shapes.chat_completion("id", 1, "m", length, "off", "")["choices"][0]
    assert cut["finish_reason"] == "length" and cut["message"]["content"] == '{"city": "Pa'


def tokens(text: str = "", reasoning: str = "", deltas: tuple[ToolCallDelta, ...] = ()) -> Tokens:
    return Tokens(1, "x:y", TokenEvent(text, 1, 0, GenerationStats(), STATE, reasoning=reasoning,
                                       tool_deltas=deltas))


def chunks(events: list[JobEvent], **body: Any) -> list[dict[str, Any]]:
    stream = ChatStream("chatcmpl-1", 1, "m", parse(**body))
    raw = b"".join(b for e in events for b in stream.render(e)).decode()
    frames = [f.removeprefix("data: ") for f in raw.split("\n\n") if f]
    assert frames[-1] == "[DONE]"
    return [json.loads(f) for f in frames[:-1]]


def test_the_stream_sends_thinking_text_and_calls_as_openai_does() -> None:
    events: list[JobEvent] = [
        tokens(reasoning="The user wants "),
        tokens(reasoning="weather."),
        tokens(deltas=(ToolCallDelta(0, "call_abc", "get_weather", '{"city": '),)),
        tokens(deltas=(ToolCallDelta(0, arguments='"Paris"}'),)),
        Finished(1, "x:y", result_with_call()),
    ]
    out = chunks(events, tools=TOOLS, stream=True, stream_options={"include_usage": True})
    deltas = [c["choices"][0]["delta"] for c in out if c["choices"]]
    assert deltas == [
        {"role": "assistant", "content": ""},
        {"reasoning_content": "The user wants "},
        {"reasoning_content": "weather."},
        {"tool_calls": [{"index": 0, "id": "call_abc", "type": "function",
                         "function": {"name": "get_weather", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]},
        {},
    ]
    assert out[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert out[-1]["usage"]["completion_tokens"] == 7
    for chunk in out:
        openai.types.chat.ChatCompletionChunk.model_validate(chunk)


def test_calls_the_deltas_missed_are_sent_before_the_last_chunk() -> None:
    two = replace(result_with_call(), tool_calls=(
        ToolCall("call_abc", "get_weather", '{"city": "Paris"}'), ToolCall("call_def", "get_weather", "{}")))
    events: list[JobEvent] = [tokens(deltas=(ToolCallDelta(0, "call_abc", "get_weather", '{"ci'),)),
                              Finished(1, "x:y", two)]
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks(events, tools=TOOLS):
        for d in chunk["choices"][0]["delta"].get("tool_calls", []):
            call = calls.setdefault(d["index"], {"id": d.get("id", ""), "name": "", "arguments": ""})
            call["name"] += d["function"].get("name", "")
            call["arguments"] += d["function"]["arguments"]
    assert calls == {0: {"id": "call_abc", "name": "get_weather", "arguments": '{"city": "Paris"}'},
                     1: {"id": "call_def", "name": "get_weather", "arguments": "{}"}}


def test_usage_counts_the_reasoning_tokens_the_engine_counted() -> None:
    """``reasoning_tokens`` was always 0, also after a reply that thought (issue 25)."""
    thought = replace(result_with_call(), stats=replace(STATS, reasoning_tokens=5))
    usage = shapes.chat_completion("id", 1, "m", thought, "off", "")["usage"]
    assert usage["completion_tokens_details"]["reasoning_tokens"] == 5
    assert usage["completion_tokens"] == 7
    assert responses_shapes.usage(thought)["output_tokens_details"]["reasoning_tokens"] == 5
    parsed = openai.types.chat.ChatCompletion.model_validate(
        shapes.chat_completion("id", 1, "m", thought, "off", ""))
    assert parsed.usage is not None and parsed.usage.completion_tokens_details is not None
    assert parsed.usage.completion_tokens_details.reasoning_tokens == 5
