"""host.protocol: requests cross the pipe (pickle) unchanged; merged token events add up."""

from __future__ import annotations

import pickle

from localchat.engine.stats import GenerationStats
from localchat.engine.types import EngineConfig, GenerationRequest, SpeculationState, TokenEvent
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
