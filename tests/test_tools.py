"""Every script in tools/ imports and answers ``--help`` (mypy checks their types: .ci/run)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "tools"
# Modules the tools share, not run themselves.
HELPERS = {"recorded_drafts"}
SCRIPTS = sorted(p.stem for p in TOOLS.glob("*.py") if p.stem not in HELPERS)


def test_the_tools_are_the_ones_this_test_knows() -> None:
    """A new tool is run below; one that went is not looked for."""
    assert SCRIPTS == ["adaptive_matrix", "adaptive_replay", "adaptive_trace", "bench_kv_switch",
                       "bench_surfaces", "calibration_curve", "compare_native", "draft_positions",
                       "drafter_batches", "first_reply", "install", "padded_batches", "state_replies",
                       "target_confidence", "tool_accuracy", "ui_latency"]
    assert all((TOOLS / f"{name}.py").is_file() for name in HELPERS)


@pytest.mark.parametrize("name", [*SCRIPTS, *sorted(HELPERS)])
def test_a_tool_imports(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(TOOLS))  # the tools import their helpers as siblings
    spec = importlib.util.spec_from_file_location(f"tools_{name}", TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # as a script runs: dataclasses look it up
    spec.loader.exec_module(module)
    assert module.__doc__, f"tools/{name}.py says nothing about what it is for"
    if name not in HELPERS:
        assert callable(getattr(module, "main", None)), f"tools/{name}.py has no main()"


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_tool_answers_help(name: str) -> None:
    root = TOOLS.parent
    # This checkout's localchat, whatever is installed.
    path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    r = subprocess.run([sys.executable, str(TOOLS / f"{name}.py"), "--help"], capture_output=True, text=True,
                       timeout=120, env=env, cwd=root, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("usage:") and "--help" in r.stdout, r.stdout[:500]
