"""``EngineConfig.exact``: a quantized target's text with speculation equals its plain text.

On processors where llama.cpp rearranges quantized weights ("CPU_REPACK" buffers), a pass over
several tokens rounds differently from a pass over one, and at a near-tie speculation picks the
other token (measured on a Xeon: 12 of 21 built-in prompts differed with Q4_K_M; docs/BENCHMARKS.md). With
``exact`` the weights keep their stored layout and every pass uses one kernel.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from localchat.bench.prompts import builtin_prompts
from localchat.engine.backend import Model
from localchat.engine.engine import Engine
from localchat.engine.types import (
    ChatMessage,
    DrafterKind,
    EngineConfig,
    GenerationRequest,
    SamplingParams,
    SpeculationConfig,
)

# Built-in bench prompts whose Q4_K_M replies differed under speculation on the Xeon with repacked
# weights (12 of 21 did; docs/BENCHMARKS.md, "Identical text").
DIFFERED = ("code-palindrome", "code-linked-list", "chat-git-rebase")
FIXED = SpeculationConfig(drafter=DrafterKind.MODEL, draft_tokens=4, adaptive=False)
PLAIN = SpeculationConfig(enabled=False)


def reply(eng: Engine, prompt: str, spec: SpeculationConfig) -> tuple[str, int]:
    eng.reset()
    r = eng.generate(GenerationRequest(messages=(ChatMessage("user", prompt),), max_tokens=96,
                                       sampling=SamplingParams(temperature=0.0), speculation=spec))
    return r.text, r.stats.drafted


def test_exact_keeps_the_stored_layout(qwen_target_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="localchat.engine.llama")
    model = Model(qwen_target_path, gpu_layers=0, repack=False)
    try:
        buffers = [r.getMessage() for r in caplog.records if "buffer size" in r.getMessage()]
        assert buffers, "llama.cpp said nothing about the model's buffers"
        assert not any("REPACK" in b for b in buffers), buffers
    finally:
        model.close()


def test_a_quantized_target_writes_the_same_text_with_speculation_when_exact(
    qwen_target_path: Path, qwen_draft_path: Path, tmp_path: Path
) -> None:
    cfg = EngineConfig(str(qwen_target_path), draft_path=str(qwen_draft_path), n_ctx=1024, exact=True,
                       use_profile=False, calibrate=False, state_memory_bytes=0)
    prompts = {p.id: p.prompt for p in builtin_prompts()}
    with Engine(cfg) as eng:
        for pid in DIFFERED:
            prompt = prompts[pid]
            plain, _ = reply(eng, prompt, PLAIN)
            spec, drafted = reply(eng, prompt, FIXED)
            assert drafted > 20  # verification passes of several tokens did run
            assert spec == plain, pid
