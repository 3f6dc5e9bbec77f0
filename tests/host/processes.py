"""The engine and benchmark processes started as the supervisors start them, for tests that drive
the pipe by hand."""

from __future__ import annotations

from localchat.host.child import ChildProcess
from localchat.host.engine_child import DEFAULT_ENGINE
from localchat.host.protocol import RunBench, Shutdown


def engine_process(engine_factory: str = DEFAULT_ENGINE, log_path: str | None = None) -> ChildProcess:
    process = ChildProcess("localchat.host.engine_child:serve", name="localchat-engine", what="engine",
                           farewell=Shutdown())
    process.spawn(engine_factory, log_path)
    return process


def bench_process(job: RunBench, engine_factory: str = DEFAULT_ENGINE) -> ChildProcess:
    process = ChildProcess("localchat.host.bench_child:serve_bench", name="localchat-benchmark",
                           what="benchmark")
    process.spawn(job, engine_factory, None)
    return process
