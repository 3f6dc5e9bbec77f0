"""Tool calls under the tool grammar on the real Qwen2.5-Coder pair: with tool_choice required, a named
function and auto (lazy: the grammar starts at the model's ``<tool_call>`` token), the calls' arguments
are valid for the tool's schema, the reply's reader still yields them, and greedy text is the same with
speculation off, a draft model, n-gram lookup and adaptive speculation.

The target is Q4_K_M with ``exact=True`` (see test_grammar_real.py); replies are short (one call).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from localchat.engine.engine import Engine
from localchat.engine.types import (
    ChatMessage,
    DrafterKind,
    EngineConfig,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    SamplingParams,
    SpeculationConfig,
    Tool,
    ToolChoice,
    ToolChoiceMode,
)

pytestmark = pytest.mark.slow

OFF = SpeculationConfig(enabled=False)
DRAFT = SpeculationConfig(drafter=DrafterKind.MODEL, draft_tokens=4, adaptive=False)
NGRAM = SpeculationConfig(drafter=DrafterKind.NGRAM, draft_tokens=4, adaptive=False)
ADAPTIVE = SpeculationConfig(drafter=DrafterKind.AUTO, adaptive=True)

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TIME_SCHEMA = {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"],
               "additionalProperties": False}
WEATHER = Tool("get_weather", "Get the current weather in a city", json.dumps(WEATHER_SCHEMA))
TIME = Tool("get_time", "Get the current time in a timezone", json.dumps(TIME_SCHEMA))
SCHEMAS = {"get_weather": WEATHER_SCHEMA, "get_time": TIME_SCHEMA}
QUESTION = (ChatMessage("user", "What's the weather in Paris?"),)


@pytest.fixture(scope="module")
def engine(qwen_target_path: Path, qwen_draft_path: Path) -> Iterator[Engine]:
    cfg = EngineConfig(str(qwen_target_path), draft_path=str(qwen_draft_path), n_ctx=1024, exact=True,
                       use_profile=False, calibrate=False, state_memory_bytes=0)
    with Engine(cfg) as eng:
        yield eng


def ask(eng: Engine, choice: ToolChoice, spec: SpeculationConfig = OFF,
        messages: tuple[ChatMessage, ...] = QUESTION) -> GenerationResult:
    eng.reset()
    return eng.generate(GenerationRequest(
        messages=messages, max_tokens=48, sampling=SamplingParams(temperature=0.0), speculation=spec,
        tools=(WEATHER, TIME), tool_choice=choice, parallel_tool_calls=False,
        session=f"tools:{choice}:{spec}"))


def valid_calls(r: GenerationResult) -> list[str]:
    assert r.finish_reason is FinishReason.TOOL_CALLS and r.tool_calls, r
    for call in r.tool_calls:
        jsonschema.validate(json.loads(call.arguments), SCHEMAS[call.name])
    return [c.name for c in r.tool_calls]


def test_required_calls_are_valid_and_the_same_with_every_speculation_mode(engine: Engine) -> None:
    required = ToolChoice(ToolChoiceMode.REQUIRED)
    runs = {name: ask(engine, required, spec)
            for name, spec in (("off", OFF), ("draft", DRAFT), ("ngram", NGRAM), ("adaptive", ADAPTIVE))}
    plain = runs["off"]
    assert valid_calls(plain) == ["get_weather"]
    assert plain.stats.grammar_seconds > 0 and plain.stats.forced_tokens > 0
    for name, r in runs.items():
        assert r.token_ids == plain.token_ids, name
        # the same calls (their ids are fresh per reply)
        assert [(c.name, c.arguments) for c in r.tool_calls] == [
            (c.name, c.arguments) for c in plain.tool_calls], name
    assert runs["draft"].stats.verify_passes < plain.stats.verify_passes


def test_a_named_function_is_the_one_called(engine: Engine) -> None:
    r = ask(engine, ToolChoice(ToolChoiceMode.FUNCTION, "get_time"))
    assert valid_calls(r) == ["get_time"]


def test_auto_starts_the_grammar_at_the_models_call_token(engine: Engine) -> None:
    plain = ask(engine, ToolChoice())
    assert valid_calls(plain) == ["get_weather"]
    assert plain.stats.grammar_seconds > 0
    spec = ask(engine, ToolChoice(), ADAPTIVE)
    assert spec.token_ids == plain.token_ids
    # a question without a call: free text under the lazy grammar, nothing masked
    hello = ask(engine, ToolChoice(), messages=(ChatMessage("user", "Say hello in French, one word."),))
    assert hello.tool_calls == () and hello.finish_reason is FinishReason.STOP and hello.text
    assert hello.stats.grammar_masked_tokens == 0
