"""The one vocabulary from the engine to the window and the API: seven event classes, one Failure.

The same objects cross every hop: the engine process sends them over its pipe,
the supervisor puts them in a job's queue and hands them to its listener, and
the GUI's engine client emits them in its Qt signals. Nothing is translated on
the way, so nothing is said twice::

    StateChanged(state)            the engine's state: a frozen EngineState snapshot (supervisor)
    Loaded(info, draft_problem)    a child loaded its models (engine and benchmark processes)
    Tokens(job, source, event)     a job streamed text (at most ~30 a second per job)
    Finished(job, source, result)  a job ended with its result (also after a cancel)
    Failed(job, source, failure)   a job, or a load (job 0), ended without a result
    BenchProgress(record, ...)     the benchmark measured one prompt in one mode
    BenchDone(report, cancelled,   the benchmark ended (or stopped after a cancel); routes: what
              routes)              was measured about its routes (bench/routes.py), if it had any

A ``Failure`` says what went wrong as a kind with its facts (token counts, an
exit code, the worker that went away); sentences for people are made from it at
the edge (host/failure_words.py for the window and the API's messages, the
server's status table for HTTP codes). No decision ever reads a sentence.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from localchat.bench.report import BenchRecord, BenchReport
from localchat.bench.route_facts import RouteFacts
from localchat.engine.types import EngineConfig, EngineInfo, GenerationResult, TokenEvent


class FailureKind(enum.Enum):
    CONTEXT_EXCEEDED = "context_exceeded"  # needed, n_ctx, reserve
    ENGINE_DIED = "engine_died"  # exitcode; while_loading
    HUNG = "hung"  # the engine ignored a cancel for timeout_s and was ended
    WORKER_LOST = "worker_lost"  # worker: the RPC worker whose loss ended the engine
    LOAD_FAILED = "load_failed"  # detail: the engine's sentence
    CANCELLED = "cancelled"  # cancelled before it started
    NO_MODEL = "no_model"  # nothing is loaded and nothing was asked for
    QUEUE_FULL = "queue_full"  # waiting, retry_after_s
    CLOSED = "closed"  # the engine is shutting down
    INVALID_REQUEST = "invalid_request"  # detail: what in the request the engine cannot do
    ENGINE_ERROR = "engine_error"  # detail: the engine failed while writing the reply
    INTERNAL = "internal"  # the supervisor itself stopped on a fault (the log has it)


@dataclass(frozen=True)
class Failure:
    kind: FailureKind
    detail: str = ""  # the engine's own sentence, where it has one
    exitcode: int | None = None
    worker: str = ""
    needed: int = 0  # CONTEXT_EXCEEDED: tokens the prompt needs
    n_ctx: int = 0  # CONTEXT_EXCEEDED: the context window
    reserve: int = 0  # CONTEXT_EXCEEDED: tokens kept free for the reply
    waiting: int = 0  # QUEUE_FULL: requests already waiting
    retry_after_s: int = 0  # QUEUE_FULL: when to try again
    timeout_s: float = 0.0  # HUNG: how long the engine was given to stop
    while_loading: bool = False  # ENGINE_DIED: the process ended while reading the model


class Phase(enum.Enum):
    NO_MODEL = "no_model"  # nothing asked for yet
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"  # the last load failed (``failure`` says why); a job or a load tries again
    STOPPED = "stopped"  # the process ended (``failure`` says how); the next job starts it again
    CLOSED = "closed"


@dataclass(frozen=True)
class EngineState:
    """What the engine is doing, as the supervisor last knew it (it is the only one that knows)."""

    phase: Phase = Phase.NO_MODEL
    config: EngineConfig | None = None  # the configuration loaded, or being loaded, or to load again
    info: EngineInfo | None = None  # READY: what is loaded
    failure: Failure | None = None  # FAILED, STOPPED: why; cleared by the next load
    ever_loaded: bool = False  # a model has loaded once (a restart after a crash keeps it True)
    pid: int | None = None  # the engine process, while there is one
    # Workers left out of ``config`` after one of them went away and the pair fits here alone.
    dropped_workers: tuple[str, ...] = ()
    # Who asked for ``config``: "" the window or the command line; an API job's source
    # (host/sources.py) when a request named this model and loaded it.
    requested_by: str = ""
    # An API request's load of this model failed and ``config`` is the model loaded before it, loaded
    # again: what the failed one was (its target path, and why, as a Failure).
    refused_path: str = ""
    refused_failure: Failure | None = None

    @property
    def ready(self) -> bool:
        return self.phase is Phase.READY and self.info is not None


@dataclass(frozen=True)
class StateChanged:
    state: EngineState


@dataclass(frozen=True)
class Loaded:
    info: EngineInfo
    draft_problem: str = ""  # why the drafter is not used, in the engine's words ("" when it is)


@dataclass(frozen=True)
class Tokens:
    job: int
    source: str
    event: TokenEvent


@dataclass(frozen=True)
class Finished:
    job: int
    source: str
    result: GenerationResult


@dataclass(frozen=True)
class Failed:
    job: int  # 0: a load
    source: str
    failure: Failure


@dataclass(frozen=True)
class BenchProgress:
    record: BenchRecord
    done: int
    total: int


@dataclass(frozen=True)
class BenchDone:
    report: BenchReport
    cancelled: bool
    routes: RouteFacts | None = None


JobEvent = Tokens | Finished | Failed
Event = StateChanged | Loaded | Tokens | Finished | Failed | BenchProgress | BenchDone
