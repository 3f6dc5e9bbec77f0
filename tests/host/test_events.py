"""host.events: the one vocabulary crosses a pipe (pickle) unchanged, and stays small."""

from __future__ import annotations

import inspect
import pickle

from localchat.bench.report import BenchReport
from localchat.engine.stats import GenerationStats
from localchat.engine.types import (
    EngineConfig,
    FinishReason,
    GenerationResult,
    SpeculationState,
    TokenEvent,
)
from localchat.host import events
from localchat.host.events import (
    BenchDone,
    EngineState,
    Failed,
    Failure,
    FailureKind,
    Finished,
    Phase,
    StateChanged,
    Tokens,
)

STATE = SpeculationState(active=True, drafter="n-gram")


def test_every_event_survives_pickling() -> None:
    result = GenerationResult("hi", FinishReason.STOP, GenerationStats(generated_tokens=1), STATE)
    for event in (
        StateChanged(EngineState(Phase.STOPPED, EngineConfig("/m/t.gguf"),
                                 failure=Failure(FailureKind.ENGINE_DIED, exitcode=-9))),
        Tokens(3, "api:x", TokenEvent("hi", 1, 0, GenerationStats(), STATE)),
        Finished(3, "window", result),
        Failed(0, "", Failure(FailureKind.CONTEXT_EXCEEDED, "long", needed=5000, n_ctx=4096, reserve=512)),
        BenchDone(BenchReport(), cancelled=True),
    ):
        assert pickle.loads(pickle.dumps(event)) == event


def test_at_most_seven_event_classes_and_every_one_is_frozen() -> None:
    classes = [c for _, c in inspect.getmembers(events, inspect.isclass)
               if c.__module__ == events.__name__ and c.__name__ in str(events.Event)]
    assert 1 <= len(classes) <= 7
    for cls in classes:
        assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_a_state_is_ready_only_with_what_is_loaded() -> None:
    assert not EngineState(Phase.READY).ready
    assert not EngineState(Phase.LOADING).ready
