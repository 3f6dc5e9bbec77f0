"""The benchmark process on the real engine: it leaves when the app's end of the pipe goes away."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from localchat.bench.modes import bench_mode
from localchat.bench.prompts import builtin_prompts
from localchat.engine.types import EngineConfig
from localchat.host.events import BenchProgress, Loaded
from localchat.host.protocol import RunBench

from .processes import bench_process

pytestmark = pytest.mark.slow


def test_vanished_parent_ends_the_process(smollm2_path: Path) -> None:
    modes = (bench_mode("off"), bench_mode("draft"))
    config = EngineConfig(str(smollm2_path), draft_path=str(smollm2_path), n_ctx=512, n_threads=1)
    proc = bench_process(RunBench(config, tuple(builtin_prompts()[:6]), modes, 64, warmup=False))
    try:
        deadline = time.monotonic() + 120
        seen: list[object] = []
        while not any(isinstance(m, BenchProgress) for m in seen) and time.monotonic() < deadline:
            reply = proc.receive(0.5)
            if reply is not None:
                seen.append(reply)
        assert isinstance(seen[0], Loaded) and isinstance(seen[-1], BenchProgress)
        assert proc._conn is not None
        proc._conn.close()  # as if the app had vanished: the child reads EOF
        proc._conn = None
        proc.join(10)  # the whole run would take minutes
        assert not proc.is_alive()
        assert proc.exitcode == 0
    finally:
        proc.kill()


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="'fast' is not a speculation mode"):
        bench_mode("fast")
