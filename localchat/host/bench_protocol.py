"""The benchmark process's messages (picklable frozen dataclasses), app -> child and child -> app.

App -> child: the ``BenchJob`` (passed at spawn) and ``BenchCancel()``. Child -> app::

    BenchLoaded(info, draft_problem)   the engine is ready; warm-up and runs follow
    BenchProgress(record, done, total) one prompt in one mode has been measured
    BenchDone(report, cancelled)       all runs ended (or stopped after a cancel); the report
                                       carries the peak memory of the process that held the models
    BenchFailed(message)               a sentence: why the benchmark could not run
"""

from __future__ import annotations

from dataclasses import dataclass

from localchat.bench.modes import BenchMode
from localchat.bench.prompts import BenchPrompt
from localchat.bench.report import BenchRecord, BenchReport
from localchat.engine.types import EngineConfig, EngineInfo


@dataclass(frozen=True)
class BenchJob:
    config: EngineConfig
    prompts: tuple[BenchPrompt, ...]
    modes: tuple[BenchMode, ...]
    max_tokens: int = 128
    warmup: bool = True


@dataclass(frozen=True)
class BenchCancel:
    pass


@dataclass(frozen=True)
class BenchLoaded:
    info: EngineInfo
    draft_problem: str = ""


@dataclass(frozen=True)
class BenchProgress:
    record: BenchRecord
    done: int
    total: int


@dataclass(frozen=True)
class BenchDone:
    report: BenchReport
    cancelled: bool


@dataclass(frozen=True)
class BenchFailed:
    message: str


BenchReply = BenchLoaded | BenchProgress | BenchDone | BenchFailed
