"""The messages between the app and the engine process: frozen dataclasses sent over a pipe.

Requests (app -> engine process)::

    Load(config)                   load a target (+ drafter); replaces any loaded model
    Generate(request_id, request)  produce one reply
    Cancel(request_id)             stop that reply between engine steps (ignored if it is not running)
    Unload()                       free the models, keep the process
    Shutdown()                     leave the process

Replies (engine process -> app)::

    Loaded(info)                   after Load
    LoadFailed(message)            after Load; ``message`` is a sentence for the user
    Tokens(request_id, event)      streamed text; events are merged so that at most about
                                   30 Tokens messages a second cross the pipe
    Finished(request_id, result)   the reply is done (also after Cancel: finish_reason CANCELLED)
    Failed(request_id, message, kind)  the reply could not be produced (context overflow, no model,
                                   a constraint that cannot be used: kind "GrammarError"...)
    Unloaded()                     after Unload

Everything here is picklable plain data (the engine's types are too), so
``multiprocessing`` can carry it with the spawn start method.
"""

from __future__ import annotations

from dataclasses import dataclass

from localchat.engine.textruns import concat_runs
from localchat.engine.types import (
    EngineConfig,
    EngineInfo,
    GenerationRequest,
    GenerationResult,
    TokenEvent,
)

# Requests


@dataclass(frozen=True)
class Load:
    config: EngineConfig


@dataclass(frozen=True)
class Generate:
    request_id: int
    request: GenerationRequest


@dataclass(frozen=True)
class Cancel:
    request_id: int


@dataclass(frozen=True)
class Unload:
    pass


@dataclass(frozen=True)
class Shutdown:
    pass


Request = Load | Generate | Cancel | Unload | Shutdown

# Replies


@dataclass(frozen=True)
class Loaded:
    info: EngineInfo


@dataclass(frozen=True)
class LoadFailed:
    message: str


@dataclass(frozen=True)
class Tokens:
    request_id: int
    event: TokenEvent


@dataclass(frozen=True)
class Finished:
    request_id: int
    result: GenerationResult


@dataclass(frozen=True)
class Failed:
    request_id: int
    message: str
    # The engine error's class: "GrammarError" when the request's output constraint cannot be used
    # (a client's mistake: the local API answers 400), "" for other failures.
    kind: str = ""


@dataclass(frozen=True)
class Unloaded:
    pass


Reply = Loaded | LoadFailed | Tokens | Finished | Failed | Unloaded


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
