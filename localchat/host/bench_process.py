"""The app's handle on a benchmark process: a ChildProcess running ``bench_worker.serve_bench``.

The app imports this module and bench_protocol.py, never bench_worker.py (which
imports the engine's runner): the child imports that by name. No Qt here;
services.BenchService drives ``BenchProcess`` from a QTimer.
"""

from __future__ import annotations

from collections.abc import Sequence

from localchat.bench.modes import BenchMode
from localchat.bench.prompts import BenchPrompt
from localchat.engine.types import EngineConfig
from localchat.host.bench_protocol import BenchCancel, BenchJob
from localchat.host.child import ChildGone, ChildProcess
from localchat.host.worker import DEFAULT_ENGINE

# The benchmark's ChildGone: raised by cancel/receive once the process is not running.
BenchGone = ChildGone


class BenchProcess(ChildProcess):
    """One benchmark child process and the app's end of its pipe. Nothing here blocks for long."""

    def __init__(self, engine_factory: str = DEFAULT_ENGINE, log_path: str | None = None) -> None:
        super().__init__("localchat.host.bench_worker:serve_bench", name="localchat-bench", what="benchmark")
        self._engine_factory = engine_factory
        self._log_path = log_path

    def start(
        self,
        config: EngineConfig,
        prompts: Sequence[BenchPrompt],
        modes: Sequence[BenchMode],
        max_tokens: int,
        warmup: bool = True,
    ) -> None:
        job = BenchJob(config, tuple(prompts), tuple(modes), max_tokens, warmup)
        self.spawn(job, self._engine_factory, self._log_path)

    CANCEL = BenchCancel()

    def cancel(self) -> None:
        self.send(self.CANCEL)
