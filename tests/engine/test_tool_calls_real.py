"""Tool calls from a real model, greedy, without a grammar: Qwen2.5-Coder 1.5B asks for the weather in Paris,
the call is read into ``result.tool_calls`` (and streamed as deltas), and the tool's result comes back as a
text answer. Also: what a loaded model says it can do, and bad tools refused before anything is generated."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import llguidance
import pytest

from localchat.engine.engine import Engine
from localchat.engine.errors import ToolChoiceError, ToolSchemaError
from localchat.engine.textruns import concat_runs, flags_from_runs, runs_from_flags
from localchat.engine.tooluse.formats import THINK
from localchat.engine.tooluse.parser import PassThrough
from localchat.engine.tooluse.plan import ReplyPlan
from localchat.engine.types import (
    ChatMessage,
    ConstraintKind,
    DrafterKind,
    EngineConfig,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    OutputConstraint,
    SpeculationConfig,
    TokenEvent,
    Tool,
    ToolCall,
    ToolChoice,
    ToolChoiceMode,
)

WEATHER = Tool(
    "get_weather",
    "Get the current weather in a city",
    json.dumps(
        {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city name"}},
            "required": ["city"],
        }
    ),
)
SYSTEM = (
    "You are a helpful assistant with tools. When a tool result arrives, answer the user's question "
    "from it in one sentence."
)
QUESTION = [ChatMessage("system", SYSTEM), ChatMessage("user", "What's the weather in Paris?")]
RESULT = json.dumps({"city": "Paris", "temperature_c": 18, "condition": "light rain"})


def config(path: Path) -> EngineConfig:
    return EngineConfig(str(path), n_ctx=2048, use_profile=False, calibrate=False, state_memory_bytes=0)


@pytest.fixture(scope="module")
def qwen(qwen_target_path: Path) -> Iterator[Engine]:
    with Engine(config(qwen_target_path)) as engine:
        yield engine


def ask(
    engine: Engine, messages: list[ChatMessage], **kw: object
) -> tuple[GenerationResult, list[TokenEvent]]:
    events: list[TokenEvent] = []
    # n-gram lookup drafts where the reply repeats the prompt (the tool's name, the city): the draft
    # marking must stay true for the content when text is held back or taken as a call
    spec = SpeculationConfig(enabled=True)
    request = GenerationRequest(
        messages=tuple(messages), max_tokens=120, speculation=spec, tools=(WEATHER,), **kw
    )  # type: ignore[arg-type]
    result = engine.generate(request, on_event=events.append)
    return result, events


def rebuilt(events: list[TokenEvent]) -> tuple[str, list[ToolCall]]:
    """The reply as a client of the stream sees it: content, and calls from their deltas."""
    calls: dict[int, list[str]] = {}
    for e in events:
        assert sum(e.drafted_runs) == len(e.text)  # the marking describes exactly this event's text
        for d in e.tool_deltas:
            calls.setdefault(d.index, [d.id, d.name, ""])[2] += d.arguments
    return "".join(e.text for e in events), [ToolCall(*calls[i]) for i in sorted(calls)]


@pytest.mark.slow
def test_qwen_calls_the_weather_tool_and_answers_from_its_result(qwen: Engine) -> None:
    result, events = ask(qwen, QUESTION)
    assert result.finish_reason is FinishReason.TOOL_CALLS, result
    assert len(result.tool_calls) == 1
    call = result.tool_calls[0]
    assert call.name == "get_weather" and call.id.startswith("call_")
    assert "paris" in json.loads(call.arguments)["city"].lower()
    content, streamed = rebuilt(events)
    assert streamed == list(result.tool_calls) and content == result.text
    assert sum(result.drafted_runs) == len(result.text)
    assert "get_weather" not in result.text  # the call is not in the content

    answer, events = ask(
        qwen,
        [
            *QUESTION,
            ChatMessage("assistant", result.text, tool_calls=result.tool_calls),
            ChatMessage("tool", RESULT, tool_call_id=call.id, name=call.name),
        ],
    )
    assert answer.finish_reason is FinishReason.STOP and answer.tool_calls == ()
    assert "18" in answer.text and "rain" in answer.text.lower(), answer.text
    assert rebuilt(events) == (answer.text, [])


@pytest.mark.slow
def test_the_grammar_for_the_loaded_model_accepts_its_native_call(qwen: Engine) -> None:
    from llguidance.llamacpp import lltokenizer_from_vocab

    request = GenerationRequest(
        messages=tuple(QUESTION), tools=(WEATHER,), tool_choice=ToolChoice(ToolChoiceMode.REQUIRED)
    )
    grammar = qwen.tool_grammar(request)
    assert grammar is not None and not grammar.lazy and "<[151657]>" in grammar.lark
    with pytest.warns(DeprecationWarning):
        tokenizer = lltokenizer_from_vocab(qwen.target_model.vocab)
    matcher = llguidance.LLMatcher(tokenizer, llguidance.LLMatcher.grammar_from_lark(grammar.lark))
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    tokens = qwen.target_model.tokenize(text, add_special=False, parse_special=True)
    assert matcher.try_consume_tokens(tokens) == len(tokens) and matcher.is_accepting()
    assert qwen.tool_grammar(GenerationRequest(messages=tuple(QUESTION), tools=(WEATHER,))).lazy  # type: ignore[union-attr]


def test_what_a_loaded_model_can_do(qwen: Engine, smollm2_path: Path) -> None:
    info = qwen.info.target
    assert (info.tool_format, info.tool_use, info.reasoning) == ("hermes", True, False)
    with Engine(config(smollm2_path)) as small:
        info = small.info.target
        assert (info.tool_format, info.tool_use, info.reasoning) == ("generic", False, False)
        with pytest.raises(ToolSchemaError, match="parameters of tool 'f' are not valid JSON"):
            small.generate(GenerationRequest(messages=tuple(QUESTION), tools=(Tool("f", parameters="{"),)))
        with pytest.raises(ToolChoiceError, match="names 'g', which is not among"):
            small.generate(
                GenerationRequest(
                    messages=tuple(QUESTION),
                    tools=(WEATHER,),
                    tool_choice=ToolChoice(ToolChoiceMode.FUNCTION, "g"),
                )
            )


@pytest.mark.slow
def test_the_draft_marking_follows_the_content(smollm2_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With tools offered the reader sits between the produced text and the events: the content's marking
    must be the produced text's marking, character for character. The same request is generated again
    with the reader replaced by one that passes the text through, which gives the text's own marking."""
    # exact, and both read from scratch: the two runs decode the same tokens in the same batches
    cfg = EngineConfig(
        str(smollm2_path),
        draft_path=str(smollm2_path),
        n_ctx=1024,
        use_profile=False,
        calibrate=False,
        state_memory_bytes=0,
        exact=True,
    )
    spec = SpeculationConfig(drafter=DrafterKind.MODEL, adaptive=False, draft_tokens=4)
    request = GenerationRequest(
        messages=(ChatMessage("user", "Explain what a list is in Python."),),
        max_tokens=48,
        speculation=spec,
        tools=(WEATHER,),
    )
    with Engine(cfg) as eng:
        events: list[TokenEvent] = []
        read = eng.generate(request, events.append)
        monkeypatch.setattr(ReplyPlan, "reader", lambda *args: PassThrough())
        eng.reset()
        raw = eng.generate(request)
    assert read.tool_calls == () and read.text == raw.text.strip() and read.text
    lead = len(raw.text) - len(raw.text.lstrip())
    flags = flags_from_runs(raw.drafted_runs)[lead : lead + len(read.text)]
    assert read.drafted_runs == runs_from_flags(flags) and sum(read.drafted_runs[1::2]) > len(read.text) / 2
    streamed: tuple[int, ...] = ()
    for event in events:
        assert sum(event.drafted_runs) == len(event.text)
        streamed = concat_runs(streamed, event.drafted_runs)
    assert streamed == read.drafted_runs


@pytest.mark.parametrize("separate", [True, False], ids=["reasoning-apart", "reasoning-in-content"])
def test_the_tokens_of_the_thinking_are_counted(smollm2_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                separate: bool) -> None:
    """``stats.reasoning_tokens`` (the API's ``reasoning_tokens``) was 0 after a reply that thought. The
    reply is forced by a grammar; the model is made a thinking one (its tags are plain text here)."""
    forced = OutputConstraint(ConstraintKind.LARK, 'start: "<think>Two and two.</think>" " Four."')
    with Engine(config(smollm2_path)) as eng:
        monkeypatch.setattr(eng, "tool_support", replace(eng.tool_support, thinking=THINK))
        result = eng.generate(GenerationRequest(messages=tuple(QUESTION), max_tokens=40, constraint=forced,
                                                separate_reasoning=separate))
        pieces = [eng.target_model.piece(t).decode() for t in result.token_ids]
    thought = len("<think>Two and two.</think>")
    starts = [sum(len(p) for p in pieces[:i]) for i in range(len(pieces))]
    expected = sum(at < thought for at in starts)
    assert "".join(pieces).startswith("<think>Two and two.</think> Four.")
    assert (result.reasoning, result.text) == (("Two and two.", "Four.") if separate
                                               else ("", "<think>Two and two.</think> Four."))
    assert 0 < result.stats.reasoning_tokens == expected < result.stats.generated_tokens
