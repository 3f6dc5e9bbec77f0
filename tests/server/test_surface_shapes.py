"""The Anthropic, Responses and Ollama surfaces' shapes without a model: request bodies into the engine's
chat (tool calls and results, thinking), a job's events into each stream (thinking blocks and calls
included, which the real models of the server tests do not write), errors in each surface's shape, the
response store's bounds, and job sources naming their surface."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localchat.engine.stats import GenerationStats
from localchat.engine.types import (
    ChatMessage,
    ConstraintKind,
    FinishReason,
    GenerationResult,
    OutputConstraint,
    SpeculationState,
    TokenEvent,
    ToolCall,
    ToolCallDelta,
    ToolChoiceMode,
)
from localchat.host.events import Failed, Failure, FailureKind, Finished, JobEvent, Tokens
from localchat.host.sources import Surface, job_source, surface_of
from localchat.server import anthropic_shapes, ollama_shapes, responses_shapes
from localchat.server.errors import ApiError, error_body, failure_error
from localchat.server.parsing import Limits
from localchat.server.response_store import ResponseStore, StoredResponse
from localchat.server.responses_shapes import ResponseHead, ResponseStream

LIMITS = Limits(max_tokens=256)
STATE = SpeculationState(active=True, drafter="n-gram")
STATS = GenerationStats(
    prompt_tokens=10,
    cached_prompt_tokens=4,
    generated_tokens=7,
    drafted=5,
    accepted=3,
    generation_seconds=0.5,
)
CALL = ToolCall("call_abc", "get_weather", '{"city": "Paris"}')
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def tokens(text: str = "", reasoning: str = "", deltas: tuple[ToolCallDelta, ...] = ()) -> Tokens:
    return Tokens(
        1, "x:y", TokenEvent(text, 1, 0, GenerationStats(), STATE, reasoning=reasoning, tool_deltas=deltas)
    )


def thinking_then_call() -> list[JobEvent]:
    """What a thinking model's reply with one call streams: thoughts, a sentence, the call in pieces."""
    result = GenerationResult(
        "Let me look.",
        FinishReason.TOOL_CALLS,
        STATS,
        STATE,
        tool_calls=(CALL,),
        reasoning="The user wants weather.",
    )
    return [
        tokens(reasoning="The user wants "),
        tokens(reasoning="weather."),
        tokens(text="Let me look."),
        tokens(deltas=(ToolCallDelta(0, "call_abc", "get_weather", '{"city": '),)),
        tokens(deltas=(ToolCallDelta(0, arguments='"Paris"}'),)),
        Finished(1, "x:y", result),
    ]


def sse_events(chunks: list[bytes]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for chunk in chunks:
        name, data = chunk.decode().strip().split("\n")
        out.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


# -- Anthropic ------------------------------------------------------------------------------


def test_anthropic_blocks_become_the_engines_chat() -> None:
    body = {
        "model": "m",
        "max_tokens": 50,
        "system": [{"type": "text", "text": "Be brief."}],
        "tools": [{"name": "get_weather", "description": "Weather", "input_schema": WEATHER}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "stop_sequences": ["END"],
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Need the tool.", "signature": "x"},
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "18C"}],
                    },
                    {"type": "text", "text": "And tomorrow?"},
                ],
            },
        ],
        "speculative": {"mode": "ngram"},
    }
    parsed = anthropic_shapes.parse_messages(body, None, LIMITS)
    r = parsed.request
    assert [m.role for m in r.messages] == ["system", "user", "assistant", "tool", "user"]
    assistant, result = r.messages[2], r.messages[3]
    assert assistant.reasoning == "Need the tool." and assistant.content == "Looking."
    assert assistant.tool_calls == (ToolCall("toolu_1", "get_weather", '{"city": "Paris"}'),)
    assert (result.tool_call_id, result.name, result.content) == ("toolu_1", "get_weather", "18C")
    assert r.tool_choice.mode is ToolChoiceMode.REQUIRED and not r.parallel_tool_calls
    assert r.stop == ("END",) and r.max_tokens == 50 and r.separate_reasoning and parsed.mode == "ngram"
    assert [t.name for t in r.tools] == ["get_weather"] and json.loads(r.tools[0].parameters) == WEATHER


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"messages": [{"role": "system", "content": "x"}]}, "messages[0].role", "top-level 'system'"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
            "messages[0].content[0]",
            "reads text only",
        ),
        (
            {
                "messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "web_search_20250305", "name": "web_search"}],
            },
            "tools[0]",
            "Anthropic's servers",
        ),
        (
            {
                "messages": [{"role": "user", "content": "x"}],
                "tool_choice": {"type": "tool", "name": "nope"},
                "tools": [{"name": "get_weather", "input_schema": WEATHER}],
            },
            "tool_choice",
            "not among the request's tools",
        ),
        ({"messages": []}, "messages", "non-empty"),
    ],
)
def test_anthropic_bad_bodies_are_sentences(body: dict[str, Any], param: str, words: str) -> None:
    with pytest.raises(ApiError) as bad:
        anthropic_shapes.parse_messages(body, None, LIMITS)
    assert bad.value.status == 400 and bad.value.param == param and words in bad.value.message


def test_anthropic_stream_opens_a_block_per_part_and_ends_with_the_stop_reason() -> None:
    parsed = anthropic_shapes.parse_messages({"messages": [{"role": "user", "content": "x"}]}, None, LIMITS)
    stream = anthropic_shapes.MessageStream("msg_1", "m", parsed)
    events = sse_events([c for e in thinking_then_call() for c in stream.render(e)])
    names = [n for n, _ in events]
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]
    starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert [b["type"] for b in starts] == ["thinking", "text", "tool_use"]
    assert starts[2] == {"type": "tool_use", "id": "call_abc", "name": "get_weather", "input": {}}
    deltas = [d["delta"] for n, d in events if n == "content_block_delta"]
    assert "".join(d.get("thinking", "") for d in deltas) == "The user wants weather."
    assert json.loads("".join(d["partial_json"] for d in deltas if d["type"] == "input_json_delta")) == {
        "city": "Paris"
    }
    assert names.count("content_block_stop") == 3
    tail = events[-2][1]
    assert tail["delta"]["stop_reason"] == "tool_use" and tail["usage"]["output_tokens"] == 7
    assert tail["timings"]["draft_n"] == 5 and tail["speculative"]["drafter"] == "n-gram"

    whole = anthropic_shapes.message("msg_1", "m", thinking_then_call()[-1].result, parsed)  # type: ignore[union-attr]
    assert [b["type"] for b in whole["content"]] == ["thinking", "text", "tool_use"]
    assert whole["content"][2]["input"] == {"city": "Paris"} and whole["stop_reason"] == "tool_use"
    assert whole["usage"] == {
        "input_tokens": 10,
        "cache_read_input_tokens": 4,
        "cache_creation_input_tokens": 0,
        "output_tokens": 7,
    }


def test_anthropic_stop_reasons() -> None:
    def reason(finish: FinishReason, stop: str = "") -> str:
        return anthropic_shapes.stop_reason(GenerationResult("", finish, STATS, STATE, stop_sequence=stop))

    assert reason(FinishReason.STOP) == "end_turn" and reason(FinishReason.STOP, "END") == "stop_sequence"
    assert reason(FinishReason.LENGTH) == "max_tokens" and reason(FinishReason.TOOL_CALLS) == "tool_use"


def test_a_failure_mid_stream_is_an_anthropic_error_event() -> None:
    parsed = anthropic_shapes.parse_messages({"messages": [{"role": "user", "content": "x"}]}, None, LIMITS)
    stream = anthropic_shapes.MessageStream("msg_1", "m", parsed)
    events = sse_events(
        stream.render(tokens(text="Hi"))
        + stream.render(Failed(1, "x:y", Failure(FailureKind.ENGINE_DIED, {"exit_code": -9})))
    )
    name, data = events[-1]
    assert name == "error" and data["type"] == "error" and data["error"]["type"] == "api_error"
    assert events[-2][0] == "content_block_stop"


# -- Responses ------------------------------------------------------------------------------


def test_responses_items_become_the_engines_chat_and_continue_a_stored_conversation() -> None:
    earlier = (ChatMessage("user", "Weather in Paris?"),)
    body = {
        "instructions": "Be brief.",
        "previous_response_id": "resp_1",
        "input": [
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": "Hm."}],
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Looking."}],
            },
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
            {"role": "developer", "content": "Use Celsius."},
        ],
        "tools": [{"type": "function", "name": "get_weather", "parameters": WEATHER, "strict": True}],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "text": {"format": {"type": "json_schema", "name": "w", "schema": WEATHER, "strict": True}},
        "max_output_tokens": 40,
    }
    req = responses_shapes.parse_responses(body, None, LIMITS, lambda rid: earlier if rid == "resp_1" else ())
    r = req.parsed.request
    assert [m.role for m in r.messages] == ["system", "user", "assistant", "tool", "system"]
    assert r.messages[0].content == "Be brief."
    assistant = r.messages[2]
    assert assistant.content == "Looking." and assistant.reasoning == "Hm."
    assert assistant.tool_calls == (ToolCall("call_1", "get_weather", '{"city":"Paris"}'),)
    assert r.messages[3].name == "get_weather" and r.messages[3].tool_call_id == "call_1"
    assert r.tool_choice.mode is ToolChoiceMode.FUNCTION and r.max_tokens == 40
    assert r.constraint is not None and r.constraint.kind is ConstraintKind.JSON_SCHEMA
    assert json.loads(r.constraint.text) == WEATHER and r.constraint.strict
    assert req.conversation[0] == earlier[0] and all(m.content != "Be brief." for m in req.conversation)
    assert req.store and req.echo["previous_response_id"] == "resp_1"
    def constraint(fmt: dict) -> OutputConstraint | None:
        body = {"input": "x", "text": {"format": fmt}}
        return responses_shapes.parse_responses(body, None, LIMITS, lambda rid: ()).parsed.request.constraint

    loose = constraint({"type": "json_schema", "name": "w", "schema": WEATHER})
    assert loose is not None and loose.kind is ConstraintKind.JSON_SCHEMA and not loose.strict
    plain = constraint({"type": "json_object"})
    assert plain is not None and plain.kind is ConstraintKind.JSON_OBJECT


def test_responses_refuses_hosted_tools_and_images_with_sentences() -> None:
    cases = [
        ({"input": "x", "tools": [{"type": "web_search"}]}, "OpenAI's servers"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "text only"),
        ({"input": [{"type": "computer_call", "id": "x"}]}, "hosted tools"),
        ({"input": "x", "background": True}, "not supported here"),
        ({}, "'input' is required"),
        ({"input": "x", "text": {"format": {"type": "xml"}}}, "'text.format.type' must be text, json_object"),
        ({"input": "x", "text": {"format": {"type": "json_schema", "name": "w"}}},
         "'text.format.schema' must be the JSON Schema"),
        ({"input": "x", "text": {"format": {"type": "json_schema", "schema": WEATHER, "strict": "yes"}}},
         "'strict' must be true or false"),
    ]
    for body, words in cases:
        with pytest.raises(ApiError) as bad:
            responses_shapes.parse_responses(body, None, LIMITS, lambda rid: ())
        assert bad.value.status == 400 and words in bad.value.message, body


def test_responses_stream_items_are_the_final_responses_items() -> None:
    req = responses_shapes.parse_responses({"input": "x"}, None, LIMITS, lambda rid: ())
    done: list[dict[str, Any]] = []
    stream = ResponseStream(ResponseHead("resp_1", "m", req), lambda body, result: done.append(body))
    events = sse_events([c for e in thinking_then_call() for c in stream.render(e)])
    names = [n for n, _ in events]
    assert names[:2] == ["response.created", "response.in_progress"] and names[-1] == "response.completed"
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    added = [d["item"]["type"] for n, d in events if n == "response.output_item.added"]
    assert added == ["reasoning", "message", "function_call"]
    args = "".join(d["delta"] for n, d in events if n == "response.function_call_arguments.delta")
    assert json.loads(args) == {"city": "Paris"}
    final = events[-1][1]["response"]
    assert final == done[0] and [i["type"] for i in final["output"]] == [
        "reasoning",
        "message",
        "function_call",
    ]
    streamed_ids = [d["item"]["id"] for n, d in events if n == "response.output_item.done"]
    assert streamed_ids == [i["id"] for i in final["output"]]
    assert final["output"][1]["content"][0]["text"] == "Let me look."
    assert final["output"][2]["call_id"] == "call_abc" and final["usage"]["input_tokens"] == 14


def test_a_response_cut_by_max_output_tokens_is_incomplete() -> None:
    req = responses_shapes.parse_responses({"input": "x"}, None, LIMITS, lambda rid: ())
    result = GenerationResult("abc", FinishReason.LENGTH, STATS, STATE)
    body = ResponseHead("resp_1", "m", req).body("completed", responses_shapes.output_items(result), result)
    assert body["status"] == "incomplete" and body["incomplete_details"] == {"reason": "max_output_tokens"}


def test_the_response_store_is_bounded_by_count_and_by_size() -> None:
    store = ResponseStore(max_responses=3, max_chars=1000)
    for i in range(5):
        store.put(f"r{i}", StoredResponse({}, (ChatMessage("user", "x" * 10),)))
    assert len(store) == 3 and store.get("r0") is None and store.get("r4") is not None
    store.put("big", StoredResponse({}, (ChatMessage("user", "x" * 960),)))
    assert store.get("big") is not None and len(store) == 1  # the others left to make room
    assert store.delete("big") and store.get("big") is None and not store.delete("big")


# -- Ollama ---------------------------------------------------------------------------------


def test_ollama_messages_tools_options_and_format() -> None:
    body = {
        "model": "m:latest",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
            },
            {"role": "tool", "content": "18C", "tool_name": "get_weather"},
        ],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}],
        "format": WEATHER,
        "options": {
            "num_predict": -1,
            "num_ctx": 8192,
            "temperature": 0.7,
            "top_k": 20,
            "top_p": 0.9,
            "min_p": 0.1,
            "seed": 3,
            "stop": ["END"],
            "repeat_penalty": 1.1,
            "repeat_last_n": 32,
        },
        "keep_alive": "5m",
    }
    req = ollama_shapes.parse_chat(body, None, LIMITS)
    assert req.parsed is not None and req.model == "m:latest"
    r = req.parsed.request
    call = r.messages[2].tool_calls[0]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert r.messages[3].tool_call_id == call.id and r.messages[3].name == "get_weather"
    s = r.sampling
    assert (s.temperature, s.top_k, s.top_p, s.min_p, s.seed, s.repeat_penalty, s.repeat_last_n) == (
        0.7,
        20,
        0.9,
        0.1,
        3,
        1.1,
        32,
    )
    assert r.stop == ("END",) and r.max_tokens == LIMITS.max_tokens and req.parsed.stream
    assert r.constraint is not None and r.constraint.kind is ConstraintKind.JSON_SCHEMA
    json_only = ollama_shapes.parse_chat({**body, "format": "json"}, None, LIMITS).parsed
    assert json_only is not None and json_only.request.constraint is not None
    assert json_only.request.constraint.kind is ConstraintKind.JSON_OBJECT
    assert ollama_shapes.parse_chat({"model": "m", "messages": []}, None, LIMITS).parsed is None  # a load
    for bad, words in (
        ({"format": "xml"}, "JSON Schema"),
        ({"options": {"temperature": "hot"}}, "number"),
        ({"messages": [{"role": "user", "content": "x", "images": ["aGk="]}]}, "text only"),
    ):
        with pytest.raises(ApiError) as refused:
            ollama_shapes.parse_chat({**body, **bad}, None, LIMITS)
        assert words in refused.value.message


def test_ollama_stream_lines_and_the_last_ones_figures() -> None:
    parsed = ollama_shapes.parse_chat({"messages": [{"role": "user", "content": "x"}]}, None, LIMITS).parsed
    assert parsed is not None
    stream = ollama_shapes.OllamaStream("m:latest", parsed, chat=True)
    lines = [
        json.loads(line)
        for e in thinking_then_call()
        for c in stream.render(e)
        for line in c.decode().splitlines()
    ]
    assert "".join(li["message"].get("thinking", "") for li in lines) == "The user wants weather."
    assert "".join(li["message"]["content"] for li in lines) == "Let me look."
    calls = [li["message"]["tool_calls"] for li in lines if "tool_calls" in li["message"]]
    assert calls == [
        [{"id": "call_abc", "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Paris"}}}]
    ]
    last = lines[-1]
    assert last["done"] and last["done_reason"] == "stop" and not any(li["done"] for li in lines[:-1])
    assert (
        last["eval_count"] == 7 and last["prompt_eval_count"] == 14 and last["eval_duration"] == 500_000_000
    )
    assert last["timings"]["draft_n_accepted"] == 3


# -- errors and sources ---------------------------------------------------------------------


def test_one_error_in_each_surfaces_shape() -> None:
    error = failure_error(Failure(FailureKind.QUEUE_FULL, {"retry_after_s": 3}))
    assert error.status == 429
    assert error_body(error, Surface.OPENAI)["error"]["code"] == "queue_full"
    assert error_body(error, Surface.RESPONSES) == error_body(error, Surface.OPENAI)
    anthropic = error_body(error, Surface.ANTHROPIC)
    assert anthropic["type"] == "error" and anthropic["error"]["type"] == "rate_limit_error"
    assert error_body(error, Surface.OLLAMA) == {"error": error.message} and error.message.endswith(".")


def test_job_sources_name_their_surface() -> None:
    for surface in Surface:
        assert surface_of(job_source(surface, "abc123")) is surface
    assert surface_of("window") is None and surface_of("api:x") is Surface.OPENAI
    assert Surface.ANTHROPIC.title == "Anthropic" and Surface.OLLAMA.title == "Ollama"
