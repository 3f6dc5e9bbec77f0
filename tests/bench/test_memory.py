"""bench/memory.peak_rss_mb: this process's peak resident memory in MiB, at least what it uses now."""

from __future__ import annotations

import psutil

from localchat.bench.memory import peak_rss_mb


def test_the_peak_is_at_least_the_memory_in_use_now() -> None:
    ballast = bytearray(64 * 1024 * 1024)  # touched: resident
    ballast[::4096] = b"x" * len(ballast[::4096])
    now = psutil.Process().memory_info().rss / (1024 * 1024)
    peak = peak_rss_mb()
    assert now * 0.98 <= peak < 1024 * 1024  # MiB, not bytes or KiB
    del ballast
