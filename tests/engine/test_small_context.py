"""A context under 512 tokens: llama.cpp lowers the batch to the requested size, and a larger decode
aborted the whole process (GGML_ASSERT n_tokens_all <= n_batch) on every message of that chat."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
from localchat.engine.engine import Engine
from localchat.engine.types import ChatMessage, EngineConfig, GenerationRequest, SamplingParams
with Engine(EngineConfig(sys.argv[1], n_ctx=int(sys.argv[2]))) as eng:
    for words in (10, 150):  # 150 words: more tokens than the lowered batch, fewer than the cache
        msgs = (ChatMessage("user", " ".join(["hello"] * words)),)
        result = eng.generate(
            GenerationRequest(messages=msgs, max_tokens=8, sampling=SamplingParams(temperature=0.0))
        )
        assert result.text, words
        print("reply", words, eng.target.n_batch, flush=True)
"""


@pytest.mark.parametrize("n_ctx", [64, 256, 300])
def test_a_small_context_answers_instead_of_aborting(smollm2_path: Path, n_ctx: int) -> None:
    # A child process: the defect is a native abort, which would take the test run with it.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(smollm2_path), str(n_ctx)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    replies = [line.split() for line in proc.stdout.splitlines() if line.startswith("reply")]
    assert [r[1] for r in replies] == ["10", "150"]
    assert all(int(r[2]) <= n_ctx for r in replies)
