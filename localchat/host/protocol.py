"""What the app asks of its child processes: frozen dataclasses sent over a pipe.

The engine process (host/engine_child.py)::

    Load(config)                      load a target (+ drafter); replaces any loaded model
    Generate(job, source, request)    produce one reply
    Cancel(job)                       stop that reply between engine steps (ignored if it is not running)
    Shutdown()                        leave the process

The benchmark process (host/bench_child.py) gets its ``RunBench`` when it is
spawned (with the routes it measures too, ``localchat bench --through-api`` or
``--link-latency``), and ``Cancel(0)`` to stop. What the children answer is the one
vocabulary of host/events.py (Loaded, Tokens, Finished, Failed, BenchProgress,
BenchDone). Everything here is picklable plain data, so ``multiprocessing``
carries it with the spawn start method.
"""

from __future__ import annotations

from dataclasses import dataclass

from localchat.bench.modes import BenchMode
from localchat.bench.prompts import BenchPrompt
from localchat.engine.textruns import concat_runs
from localchat.engine.types import EngineConfig, GenerationRequest, TokenEvent


@dataclass(frozen=True)
class Load:
    config: EngineConfig


@dataclass(frozen=True)
class Generate:
    job: int
    source: str
    request: GenerationRequest


@dataclass(frozen=True)
class Cancel:
    job: int


@dataclass(frozen=True)
class Shutdown:
    pass


@dataclass(frozen=True)
class RunBench:
    config: EngineConfig
    prompts: tuple[BenchPrompt, ...]
    modes: tuple[BenchMode, ...]
    max_tokens: int = 128
    warmup: bool = True
    repeat: int = 1  # every prompt in every mode this many times
    # Routes (bench/routes.py): the local API's address (``.../v1``, "" none), and link delays in ms
    # (the target split over ``config``'s workers behind a relay; the bench's own engine then runs alone).
    api_url: str = ""
    link_delays: tuple[float, ...] = ()


Request = Load | Generate | Cancel | Shutdown


def merge_events(first: TokenEvent, second: TokenEvent) -> TokenEvent:
    """One event standing for ``first`` then ``second``: text and counts add up, state is the latest."""
    return TokenEvent(
        text=first.text + second.text,
        n_tokens=first.n_tokens + second.n_tokens,
        drafted_accepted=first.drafted_accepted + second.drafted_accepted,
        stats=second.stats,
        speculation=second.speculation,
        drafted_runs=concat_runs(first.drafted_runs, second.drafted_runs),
        prompt_progress=second.prompt_progress if not second.text else None,
        reasoning=first.reasoning + second.reasoning,
        tool_deltas=first.tool_deltas + second.tool_deltas,
    )
