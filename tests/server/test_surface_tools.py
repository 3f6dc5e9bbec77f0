"""Tool calls behind every surface, on the real server over Qwen2.5-Coder 1.5B (a model trained for
tools), each driven by its official client: the model asks for the weather in Paris, the client runs the
tool and sends the result back, and the answer comes from it. Then one real agent end to end: the OpenAI
Agents SDK on its default Responses path, pointed at the local server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import ollama
import pytest

from tests.server.served import API_KEY, Served, serve

pytestmark = pytest.mark.slow

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "The city name"}},
    "required": ["city"],
}
DESCRIPTION = "Get the current weather in a city"
SYSTEM = (
    "You are a helpful assistant with tools. When a tool result arrives, answer the user's question "
    "from it in one sentence."
)
QUESTION = "What's the weather in Paris?"
RESULT = json.dumps({"city": "Paris", "temperature_c": 18, "condition": "light rain"})


@pytest.fixture(scope="module")
def served(qwen_target_path: Path) -> Iterator[Served]:
    with serve(qwen_target_path, ctx=2048, queue=3) as s:
        yield s


def answered_from_the_tool(text: str) -> bool:
    return "18" in text and "rain" in text.lower()


def test_anthropic_tool_use_round_trip(served: Served) -> None:
    client = anthropic.Anthropic(base_url=served.url, api_key=API_KEY, max_retries=0, timeout=600)
    tools: Any = [{"name": "get_weather", "description": DESCRIPTION, "input_schema": WEATHER}]
    msgs: list[Any] = [{"role": "user", "content": QUESTION}]
    with client.messages.stream(
        model="test-model", max_tokens=120, system=SYSTEM, tools=tools, messages=msgs
    ) as s:
        kinds = [e.type for e in s]
        asked = s.get_final_message()
    assert asked.stop_reason == "tool_use" and "input_json" in kinds
    use = next(b for b in asked.content if b.type == "tool_use")
    assert use.name == "get_weather" and "paris" in str(use.input["city"]).lower()  # type: ignore[index]

    msgs += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in asked.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": RESULT}]},
    ]
    answer = client.messages.create(
        model="test-model", max_tokens=120, system=SYSTEM, tools=tools, messages=msgs
    )
    assert answer.stop_reason == "end_turn"
    text = "".join(b.text for b in answer.content if b.type == "text")
    assert answered_from_the_tool(text), text


def test_responses_function_call_with_its_output_fed_back(served: Served) -> None:
    client = served.client(timeout=600)
    tools: Any = [
        {"type": "function", "name": "get_weather", "description": DESCRIPTION, "parameters": WEATHER}
    ]
    events = list(
        client.responses.create(
            model="test-model",
            instructions=SYSTEM,
            input=QUESTION,
            tools=tools,
            max_output_tokens=120,
            stream=True,
        )
    )
    kinds = [e.type for e in events]
    assert "response.function_call_arguments.delta" in kinds and kinds[-1] == "response.completed"
    asked = events[-1].response  # type: ignore[union-attr]
    call = next(i for i in asked.output if i.type == "function_call")
    assert call.name == "get_weather" and "paris" in json.loads(call.arguments)["city"].lower()
    streamed = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert streamed == call.arguments

    answer = client.responses.create(
        model="test-model",
        instructions=SYSTEM,
        previous_response_id=asked.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": RESULT}],
        tools=tools,
        max_output_tokens=120,
    )
    assert answer.status == "completed" and answered_from_the_tool(answer.output_text), answer.output_text


def test_ollama_tool_call_round_trip(served: Served) -> None:
    client = ollama.Client(host=served.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=600)
    tools: Any = [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": DESCRIPTION, "parameters": WEATHER},
        }
    ]
    msgs: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    lines = list(client.chat(model="test-model:latest", messages=msgs, tools=tools, stream=True))
    calls = [c for line in lines for c in (line.message.tool_calls or [])]
    assert len(calls) == 1 and calls[0].function.name == "get_weather" and lines[-1].done
    assert "paris" in str(calls[0].function.arguments["city"]).lower()

    msgs += [
        {"role": "assistant", "content": "", "tool_calls": [c.model_dump() for c in calls]},
        {"role": "tool", "content": RESULT, "tool_name": "get_weather"},
    ]
    answer = client.chat(model="test-model", messages=msgs, tools=tools, stream=False)
    assert answer.message.content and answered_from_the_tool(answer.message.content), answer.message.content


def test_an_openai_agents_sdk_agent_uses_its_tool_through_the_responses_api(served: Served) -> None:
    from agents import (
        Agent,
        Runner,
        function_tool,
        set_default_openai_api,
        set_default_openai_client,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    asked: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """Get the current weather in a city.

        Args:
            city: The city name.
        """
        asked.append(city)
        return RESULT

    set_tracing_disabled(True)
    set_default_openai_client(
        AsyncOpenAI(base_url=served.url + "/v1", api_key=API_KEY, timeout=600), use_for_tracing=False
    )
    set_default_openai_api("responses")
    agent = Agent(name="Weather", instructions=SYSTEM, tools=[get_weather], model="test-model")
    result = Runner.run_sync(agent, QUESTION, max_turns=4)
    assert asked and "paris" in asked[0].lower()
    assert answered_from_the_tool(str(result.final_output)), result.final_output
