"""host.protocol: requests cross the pipe (pickle) unchanged; merged token events add up."""

from __future__ import annotations

import pickle

from localchat.engine.stats import GenerationStats
from localchat.engine.types import (
    ChatMessage,
    EngineConfig,
    GenerationRequest,
    SpeculationState,
    TokenEvent,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolChoice,
    ToolChoiceMode,
)
from localchat.host.events import Tokens
from localchat.host.protocol import Cancel, Generate, Load, merge_events


def test_messages_survive_pickling() -> None:
    for message in (Load(EngineConfig(target_path="/m/t.gguf", rpc_servers=("127.0.0.1:50052",))),
                    Generate(3, "api:x", GenerationRequest(prompt="hi", max_tokens=4)), Cancel(3)):
        assert pickle.loads(pickle.dumps(message)) == message


def test_merged_events_add_text_and_counts_and_keep_the_latest_state() -> None:
    first = TokenEvent("ab", 2, 1, GenerationStats(generated_tokens=2),
                       SpeculationState(active=True, drafter="n-gram"), drafted_runs=(1, 1))
    second = TokenEvent("cd", 2, 0, GenerationStats(generated_tokens=4),
                        SpeculationState(active=False, drafter="n-gram", reason="paused"), drafted_runs=(2,))
    merged = merge_events(first, second)
    assert merged.text == "abcd" and merged.n_tokens == 4 and merged.drafted_accepted == 1
    assert merged.stats.generated_tokens == 4 and merged.speculation.reason == "paused"
    # "a" from the target, "b" drafted, then "cd" from the target: runs target/draft/target.
    assert merged.drafted_runs == (1, 1, 2)
    assert pickle.loads(pickle.dumps(Tokens(1, "window", merged))).event == merged


def test_merged_events_keep_reasoning_and_tool_deltas_in_order() -> None:
    state = SpeculationState(active=False, drafter="off")
    head, start = ToolCallDelta(0, "call_a", "get_weather"), ToolCallDelta(0, arguments='{"ci')
    rest, other = ToolCallDelta(0, arguments='ty": "Paris"}'), ToolCallDelta(1, "call_b", "search")
    first = TokenEvent("", 3, 0, GenerationStats(), state, reasoning="Paris, so ", tool_deltas=(head, start))
    second = TokenEvent("", 2, 0, GenerationStats(), state, reasoning="weather.", tool_deltas=(rest, other))
    merged = merge_events(first, second)
    assert merged.reasoning == "Paris, so weather." and merged.n_tokens == 5
    assert merged.tool_deltas == first.tool_deltas + second.tool_deltas
    called = ChatMessage("assistant", "", tool_calls=(ToolCall("c", "f", "{}"),))
    required = ToolChoice(ToolChoiceMode.REQUIRED)
    request = GenerationRequest(messages=(called,), tools=(Tool("f"),), tool_choice=required)
    assert pickle.loads(pickle.dumps(Generate(1, "window", request))).request == request
