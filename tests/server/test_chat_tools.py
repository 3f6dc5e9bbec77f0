"""Tool calls and structured output on /v1/chat/completions, on the real server over the real
Qwen2.5-Coder 1.5B target with its 0.5B drafter, driven by the official ``openai`` client: a call
streamed and not (the deltas as OpenAI sends them, adding up to the same call), ``required``, a named
function, parallel calls, a tool result round trip, ``response_format`` checked with ``jsonschema``,
``max_tokens`` cutting JSON, what ``/v1/models`` and ``/props`` advertise, and every bad input a 400
naming its field while the server keeps serving. Greedy and short: the machine is small."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest

from tests.server.served import Served, serve

pytestmark = pytest.mark.slow

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "The city name"}},
    "required": ["city"],
}
TIME = {
    "type": "object",
    "properties": {"timezone": {"type": "string", "description": "An IANA time zone, e.g. Europe/Paris"}},
    "required": ["timezone"],
}


def function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    spec = {"name": name, "description": description, "parameters": parameters}
    return {"type": "function", "function": spec}


TOOLS: Any = [function("get_weather", "Get the current weather in a city", WEATHER)]
BOTH: Any = [*TOOLS, function("get_time", "Get the current time in a time zone", TIME)]
SYSTEM = (
    "You are a helpful assistant with tools. When a tool result arrives, answer the user's question "
    "from it in one sentence."
)
ASK: Any = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "What's the weather in Paris?"},
]
RESULT = json.dumps({"city": "Paris", "temperature_c": 18, "condition": "light rain"})
COLOUR = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20}, "warm": {"type": "boolean"}},
    "required": ["name", "warm"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def served(qwen_target_path: Path, qwen_draft_path: Path) -> Iterator[Served]:
    with serve(qwen_target_path, qwen_draft_path, ctx=2048, queue=3) as s:
        yield s


@pytest.fixture(scope="module")
def client(served: Served) -> openai.OpenAI:
    return served.client(timeout=600)


def create(client: openai.OpenAI, **kw: Any) -> Any:
    kw.setdefault("messages", ASK)
    kw.setdefault("max_tokens", 60)
    return client.chat.completions.create(model="test-model", temperature=0, **kw)


def checked_calls(message: Any, schemas: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each call's name and arguments, once the arguments are checked against the tool's schema."""
    calls = []
    for call in message.tool_calls or []:
        assert call.type == "function" and call.id.startswith("call_") and call.function.name in schemas
        arguments = json.loads(call.function.arguments)
        jsonschema.validate(arguments, schemas[call.function.name])
        calls.append((call.function.name, arguments))
    return calls


def test_a_tool_call_streamed_and_not_is_the_same_call(client: openai.OpenAI) -> None:
    made = create(client, tools=TOOLS)
    choice = made.choices[0]
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    calls = checked_calls(choice.message, {"get_weather": WEATHER})
    assert len(calls) == 1 and "paris" in calls[0][1]["city"].lower()

    chunks = list(create(client, tools=TOOLS, stream=True))
    deltas = [d for c in chunks for d in (c.choices[0].delta.tool_calls or [])]
    first, rest = deltas[0], deltas[1:]
    assert (first.index, first.type, first.function.name, first.function.arguments) == (
        0, "function", "get_weather", "")
    assert first.id and first.id.startswith("call_")
    assert rest and all(d.id is None and d.type is None and d.function.name is None for d in rest)
    assert "".join(d.function.arguments for d in rest) == choice.message.tool_calls[0].function.arguments
    assert chunks[-1].choices[0].finish_reason == "tool_calls"

    with client.chat.completions.stream(
        model="test-model", messages=ASK, tools=TOOLS, max_tokens=60, temperature=0
    ) as stream:
        kinds = {e.type for e in stream}
        final = stream.get_final_completion()
    assert "tool_calls.function.arguments.delta" in kinds
    assert final.choices[0].finish_reason == "tool_calls"
    assert checked_calls(final.choices[0].message, {"get_weather": WEATHER}) == calls


def test_required_and_a_named_function(client: openai.OpenAI) -> None:
    hello: Any = [{"role": "user", "content": "Hello! How are you today?"}]
    # One call: under the tool grammar with parallel calls allowed the 1.5B model writes call after
    # call until max_tokens (its habit once the call format is forced), which is then "length".
    forced = create(client, messages=hello, tools=TOOLS, tool_choice="required",
                    parallel_tool_calls=False).choices[0]
    assert forced.finish_reason == "tool_calls"
    assert [name for name, _ in checked_calls(forced.message, {"get_weather": WEATHER})] == ["get_weather"]

    clock: Any = [{"role": "user", "content": "What time is it in Paris?"}]
    get_time: Any = {"type": "function", "function": {"name": "get_time"}}
    named = create(client, messages=clock, tools=BOTH, tool_choice=get_time)
    calls = checked_calls(named.choices[0].message, {"get_weather": WEATHER, "get_time": TIME})
    assert [name for name, _ in calls] == ["get_time"]


def test_parallel_calls_for_two_cities(client: openai.OpenAI) -> None:
    two: Any = [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": "What's the weather in Paris and in Rome?"}]
    made = create(client, messages=two, tools=TOOLS, parallel_tool_calls=True, max_tokens=80)
    calls = checked_calls(made.choices[0].message, {"get_weather": WEATHER})
    assert calls and made.choices[0].finish_reason == "tool_calls"
    # Calls for either city or both: the 1.5B model sometimes writes both cities into one call's
    # arguments (a repeated key), which the tool's grammar prevents where the engine applies it.
    assert {args["city"].lower() for _, args in calls} <= {"paris", "rome"}


def test_a_tool_result_round_trip(client: openai.OpenAI) -> None:
    history: Any = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": RESULT},
    ]
    answer = create(client, messages=history, tools=TOOLS).choices[0]
    assert answer.finish_reason == "stop" and not answer.message.tool_calls
    text = answer.message.content or ""
    assert "18" in text and "rain" in text.lower(), text


def test_response_format_json_schema_json_object_and_max_tokens_mid_json(client: openai.OpenAI) -> None:
    ask: Any = [{"role": "user", "content": "Tell me about a colour you like."}]
    fmt: Any = {"type": "json_schema", "json_schema": {"name": "colour", "schema": COLOUR, "strict": True}}
    made = create(client, messages=ask, response_format=fmt, max_tokens=40).choices[0]
    assert made.finish_reason == "stop"
    jsonschema.validate(json.loads(made.message.content or ""), COLOUR)

    obj = create(client, messages=ask, response_format={"type": "json_object"}, max_tokens=60).choices[0]
    assert obj.finish_reason == "stop" and isinstance(json.loads(obj.message.content or ""), dict)

    cut = create(client, messages=ask, response_format=fmt, max_tokens=4).choices[0]
    assert cut.finish_reason == "length" and cut.message.content
    assert (made.message.content or "").startswith(cut.message.content)  # the text as written, greedy
    with pytest.raises(json.JSONDecodeError):
        json.loads(cut.message.content)


def test_models_and_props_advertise_what_the_model_does(served: Served) -> None:
    with served.http() as http:
        entry = http.get("/v1/models").json()["data"][0]
        props = http.get("/props").json()
    assert entry["capabilities"] == ["completion", "tool_use", "json_schema", "fim"]
    assert props["default_generation_settings"]["n_ctx"] == 2048
    assert props["model_path"].endswith("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    assert props["model_alias"] == "test-model" and "<tool_call>" in props["chat_template"]
    assert props["modalities"] == {"vision": False, "audio": False}
    assert props["build_info"].startswith("localchat")


def bad(client: openai.OpenAI, **kw: Any) -> dict[str, Any]:
    with pytest.raises(openai.BadRequestError) as caught:
        create(client, max_tokens=8, **kw)
    error = caught.value.body
    assert isinstance(error, dict) and caught.value.status_code == 400
    return error


def test_bad_input_is_a_400_naming_the_field_and_the_server_keeps_serving(client: openai.OpenAI) -> None:
    malformed = bad(client, tools=[{"type": "function", "function": {"description": "no name"}}])
    assert malformed["param"] == "tools[0].function.name" and "must be a string" in malformed["message"]
    unlisted = bad(client, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_time"}})
    assert unlisted["param"] == "tool_choice" and "'get_time'" in unlisted["message"]

    look_behind = {"type": "object", "properties": {"a": {"type": "string", "pattern": "(?<=x)a"}}}
    fmt: Any = {"type": "json_schema", "json_schema": {"name": "x", "schema": look_behind}}
    uncompiled = bad(client, response_format=fmt)
    assert uncompiled["param"] == "response_format" and "look-around" in uncompiled["message"]
    never = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 1}},
             "required": ["n"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": never}}
    unsatisfiable = bad(client, response_format=fmt)
    assert unsatisfiable["param"] == "response_format" and "Unsatisfiable" in unsatisfiable["message"]

    assert create(client, max_tokens=4).choices[0].message.content  # still serving


def test_tools_for_a_model_without_a_chat_template_are_refused(gemma3_path: Path) -> None:
    with serve(gemma3_path, ctx=512, queue=2) as s:
        client = s.client(timeout=120)
        error = bad(client, tools=TOOLS)
        assert error["param"] == "tools" and "no chat template" in error["message"]
        with s.http() as http:
            assert "tool_use" not in http.get("/v1/models").json()["data"][0]["capabilities"]
