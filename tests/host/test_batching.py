from __future__ import annotations

from localchat.engine.stats import GenerationStats
from localchat.engine.types import SpeculationState, TokenEvent
from localchat.host.engine_child import TokenBatcher


def _event(i: int) -> TokenEvent:
    stats = GenerationStats(generated_tokens=i + 1)
    return TokenEvent(f"t{i} ", 1, i % 2, stats, SpeculationState(True, "x"))


def test_batcher_merges_events_between_intervals() -> None:
    now = [0.0]
    sent: list[TokenEvent] = []
    batcher = TokenBatcher(sent.append, interval=0.1, clock=lambda: now[0])
    batcher.add(_event(0))  # the first goes out at once
    assert [e.text for e in sent] == ["t0 "]
    for i in range(1, 5):
        now[0] += 0.01
        batcher.add(_event(i))
    assert len(sent) == 1
    now[0] = 0.2
    batcher.add(_event(5))
    assert len(sent) == 2
    merged = sent[1]
    assert merged.text == "t1 t2 t3 t4 t5 "
    assert merged.n_tokens == 5
    assert merged.drafted_accepted == 3
    assert merged.stats.generated_tokens == 6  # the latest statistics
    now[0] += 0.01
    batcher.add(_event(6))
    batcher.flush()
    batcher.flush()
    assert [e.text for e in sent] == ["t0 ", "t1 t2 t3 t4 t5 ", "t6 "]
