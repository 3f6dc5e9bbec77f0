"""tools/adaptive_replay.py on a real pair: a replayed policy drafts and is accepted exactly as the
engine's own decode loop does on the same prompts, and writes the target's text."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "adaptive_replay.py"
PROMPTS = [
    {"id": "t-code", "category": "code", "prompt": "Write a Python function that reverses a string."},
    {"id": "t-edit", "category": "edit",
     "prompt": "Add a docstring to this function:\n\ndef add(a, b):\n    total = a + b\n    return total\n"},
]


@pytest.fixture(scope="module")
def replay() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tools_adaptive_replay", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _real_steps(target: Path, draft: Path, prompt: str, length: int, max_tokens: int
                ) -> tuple[list[int], list[tuple[int, int]]]:
    """The engine's own loop, fixed length ``length`` with the draft model and lookup combined."""
    from localchat.engine.adaptive import FixedPolicy
    from localchat.engine.draft_sources import CombinedDrafter, NgramDrafter
    from localchat.engine.engine import Engine
    from localchat.engine.speculative import DecodeLoop
    from localchat.engine.stats import StatsRecorder
    from localchat.engine.types import ChatMessage, EngineConfig, SamplingParams

    cfg = EngineConfig(str(target), draft_path=str(draft), n_ctx=2048, use_profile=False, calibrate=False,
                       state_memory_bytes=0, n_threads=1)
    with Engine(cfg) as eng:
        assert eng.model_drafter is not None
        tokens, _ = eng.formatter.tokens_for((ChatMessage("user", prompt),))
        drafter = CombinedDrafter(eng.model_drafter, NgramDrafter())
        loop = DecodeLoop(eng.target, drafter, FixedPolicy(length), SamplingParams(temperature=0.0),
                          StatsRecorder(), lambda: False, max_tokens)
        steps: list[tuple[int, int]] = []
        loop.trace = lambda batch, _choices, accepted: steps.append((len(batch) - 1, accepted))
        out: list[int] = []
        for step in loop.run(tokens):
            out.extend(step.tokens)
        return out, steps


def test_a_replayed_fixed_length_drafts_as_the_engine_does(
    replay: ModuleType, smollm2_f16_path: Path, smollm2_path: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LOCALCHAT_PROFILES_DIR", str(tmp_path / "profiles"))
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    rec = tmp_path / "rec.json"
    replay.main(["record", "--model", str(smollm2_f16_path), "--draft", str(smollm2_path),
                 "--prompts", str(prompts), "--max-tokens", "40", "--threads", "1", "--out", str(rec)])
    data = json.loads(rec.read_text())
    curve = replay.read_curve(data)
    assert all(curve["verify_ms"][b] > 0 for b in range(1, 18))
    assert all(curve["draft_ms"][b] > 0 for b in (*range(1, 10), 16, 32, 64))  # catch-ups too
    chains = 0
    for p, recorded in zip(PROMPTS, data["prompts"], strict=True):
        text, steps = _real_steps(smollm2_f16_path, smollm2_path, p["prompt"], 4, 40)
        assert recorded["reply"] == text  # the target alone writes what the loop with a drafter wrote
        # The target's confidence in each token it wrote, for the replay of a policy that listens to it.
        assert len(recorded["target_conf"]) == len(recorded["greedy"])
        assert all(0.0 < c <= 1.0 for c in recorded["target_conf"])
        r = replay.Recorded(recorded, data["eos"])
        chains += len(r.chains)
        clock = replay.Clock()
        real = time.perf_counter
        monkeypatch.setattr(time, "perf_counter", clock)
        try:
            pipe = replay.Pipeline("auto:4", curve, data["curve"]["calibration"], data["n_vocab"],
                                   {data["eos"], *([r.eog] if r.eog is not None else [])}, clock)
            seen: list[tuple[int, int]] = []
            out, seconds, drafted, accepted = pipe.answer(r, 40, seen)
        finally:
            monkeypatch.setattr(time, "perf_counter", real)
        assert out == text
        assert seen == steps, p["id"]
        assert drafted == sum(d for d, _ in steps) and accepted == sum(a for _, a in steps)
        # The clock ran on the curve: every pass costs at least a single-token verification.
        assert seconds >= len(steps) * curve["verify_ms"][1] / 1000
    assert chains > 0  # the drafter was wrong somewhere: its drafts after a wrong token were replayed
