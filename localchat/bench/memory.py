"""Peak resident memory of this process: recorded by the process that ran the models."""

from __future__ import annotations

import sys

import psutil


def peak_rss_mb() -> float:
    """Peak resident memory of this process, in MiB.

    psutil has the peak only on Windows (``peak_wset``); on Linux and macOS it comes from
    getrusage, imported here and not at the top: ``resource`` does not exist on Windows.
    """
    if sys.platform.startswith("linux") or sys.platform == "darwin":
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 1024.0 if sys.platform.startswith("linux") else peak / (1024.0 * 1024.0)
    info = psutil.Process().memory_info()
    return float(getattr(info, "peak_wset", info.rss)) / (1024.0 * 1024.0)
