"""Adaptive speculation on real models: auto-off where speculation loses, and coming back."""

from __future__ import annotations

import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pytest

from localchat.engine import draft_sources, speculative
from localchat.engine.backend import Context
from localchat.engine.engine import Engine
from localchat.engine.types import (
    ChatMessage,
    DrafterKind,
    EngineConfig,
    GenerationRequest,
    SamplingParams,
    SpeculationConfig,
    TokenEvent,
)

ADAPTIVE = SpeculationConfig(drafter=DrafterKind.AUTO, draft_tokens=4, adaptive=True)


def run(eng: Engine, prompt: str, max_tokens: int, spec: SpeculationConfig = ADAPTIVE,
        session: str = "s") -> tuple[list[int], list[TokenEvent]]:
    """Generate; return the draft length of every verification pass and the streamed events."""
    lengths: list[int] = []
    events: list[TokenEvent] = []
    eng.trace_hook = lambda batch, _choices, _accepted: lengths.append(len(batch) - 1)
    try:
        eng.generate(
            GenerationRequest(messages=(ChatMessage("user", prompt),), max_tokens=max_tokens,
                              sampling=SamplingParams(temperature=0.0), speculation=spec, session=session),
            events.append,
        )
    finally:
        eng.trace_hook = None
    return lengths, events


# What one pass costs on the test machine (a 2-core x86-64 CPU, 2 threads) at a quiet moment: the
# calibration at load of the 1.5B Q4_K_M target, in ms by batch size, and the 0.5B drafter per token
# (docs/BENCHMARKS.md, "Cost curve of this machine"). Compute-bound: a batch of n costs nearly n steps.
TARGET_MS = {1: 27.7, 2: 55.0, 4: 91.5, 8: 144.4, 16: 172.0}
DRAFTER_MS_PER_TOKEN = 15.6


def _curve_ms(size: int) -> float:
    """The target's pass of ``size`` tokens: a line between the measured sizes, the last slope beyond."""
    sizes = sorted(TARGET_MS)
    if size >= sizes[-1]:
        slope = (TARGET_MS[16] - TARGET_MS[8]) / 8
        return TARGET_MS[16] + slope * (size - 16)
    return float(np.interp(size, sizes, [TARGET_MS[k] for k in sizes]))


class MachineClock:
    """Time as the policy sees it, charged per llama.cpp pass from the measured costs above.

    The policy decides from the seconds its passes take; measured on a machine that other processes
    also use, one slow moment turns a loss into a win or the reverse (this test failed once so, on a
    busy 2-core machine). Charged by this clock, the same passes always cost the same: the test judges
    the policy's decisions on this machine's costs, not the machine's load at the time.
    """

    def __init__(self, target: Context) -> None:
        self.now = 0.0
        self.target = target

    def perf_counter(self) -> float:
        return self.now

    def charge(self, ctx: Context, n_tokens: int) -> None:
        ms = _curve_ms(n_tokens)
        if ctx is not self.target:  # the drafter: the same curve's shape at its cost per token
            ms *= DRAFTER_MS_PER_TOKEN / TARGET_MS[1]
        self.now += ms / 1000


class ChargedClock(Protocol):
    def perf_counter(self) -> float: ...

    def charge(self, ctx: Context, n_tokens: int) -> None: ...


def charge_passes(monkeypatch: pytest.MonkeyPatch, clock: ChargedClock) -> None:
    """Make ``clock`` the decode loop's and the drafters' time, charged by every llama.cpp pass."""
    real_decode = Context.decode

    def decode(self: Context, tokens: Sequence[int], logits_for: str | int = "last") -> int:
        result = real_decode(self, tokens, logits_for)
        clock.charge(self, len(tokens))
        return result

    monkeypatch.setattr(Context, "decode", decode)
    fake_time = types.SimpleNamespace(perf_counter=clock.perf_counter)
    monkeypatch.setattr(speculative, "time", fake_time)
    monkeypatch.setattr(draft_sources, "time", fake_time)


@pytest.fixture
def machine_clock(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Install a MachineClock for an engine: ``machine_clock(eng)`` (the engine's target is known then)."""

    def install(eng: Engine) -> MachineClock:
        clock = MachineClock(eng.target)
        charge_passes(monkeypatch, clock)
        return clock

    return install


def paused_runs(events: list[TokenEvent]) -> list[tuple[bool, int]]:
    """The reply as stretches of (paused, tokens), from the state sent with each piece of text."""
    runs: list[tuple[bool, int]] = []
    for e in events:
        if runs and runs[-1][0] == e.speculation.paused:
            runs[-1] = (e.speculation.paused, runs[-1][1] + e.n_tokens)
        else:
            runs.append((e.speculation.paused, e.n_tokens))
    return runs


@pytest.mark.slow
def test_auto_off_pauses_where_speculation_loses_probes_recovers_and_the_toggle_wins(
    qwen_target_path: Path, qwen_draft_path: Path, machine_clock: Any
) -> None:
    """The Q4_K_M target is compute-bound on a CPU: verifying a batch costs nearly one step per token,
    so speculation with the 0.5B drafter is slower than plain decoding (0.6-0.8x measured),
    while n-gram drafts on a reply that copies its prompt still pay (1.2-1.4x).

    The real models draft and verify (what is accepted is theirs); each pass is charged this machine's
    measured cost (``MachineClock``), so another process on the CPU cannot change the decisions.
    Without a profile or a calibration at load, so that the first reply has to find this out itself
    (with one, it starts paused: see test_profile_real.py)."""
    cfg = EngineConfig(str(qwen_target_path), draft_path=str(qwen_draft_path), n_ctx=2048,
                       use_profile=False, calibrate=False)
    with Engine(cfg) as eng:
        machine_clock(eng)
        prompt = ("Write a long story, at least 400 words, about a lighthouse keeper "
                  "who finds a message in a bottle.")
        lengths, events = run(eng, prompt, max_tokens=230)
        paused = [e.speculation for e in events if e.speculation.paused]
        assert paused, f"never paused; draft lengths {lengths}"
        reason = paused[0].reason
        assert reason.startswith("speculation paused: 0.") and "retrying in 128 tokens" in reason, reason
        gain = float(reason.split(": ")[1].split("x")[0])
        assert gain < 0.97
        runs = paused_runs(events)
        longest = max(range(len(runs)), key=lambda i: runs[i][1] if runs[i][0] else -1)
        assert runs[longest][0] and runs[longest][1] >= 120, runs  # the pause holds for its 128 tokens
        assert longest > 0 and not runs[0][0], f"it measured speculation before pausing: {runs}"
        # Where the pause runs out the story goes on, and a story is text the target is unsure of: the pause
        # waits on instead of looking back (``AdaptivePolicy.sure_look``), so the probe comes with the reply
        # that copies text, below.
        # Recovery: a reply that copies text (n-gram drafts are free and right) makes
        # speculation pay again, so after its probe it stays on to the end.
        rows = "\n".join(f"{i:03d},item-{i},{(i * 37) % 101}" for i in range(1, 121))
        copy_prompt = f"Repeat these CSV lines exactly, with nothing else:\n\n{rows}"
        copy_lengths, copy_events = run(eng, copy_prompt, max_tokens=300, session="copy")
        first_draft = next((i for i, n in enumerate(copy_lengths) if n > 0), None)
        assert first_draft is not None, f"never probed: {copy_lengths}"
        tail = copy_lengths[first_draft:]
        assert len(tail) >= 8 and all(n > 0 for n in tail[-5:]), f"did not stay on: {copy_lengths}"
        assert max(tail) >= 8, f"lookup drafts did not grow: {copy_lengths}"
        assert not copy_events[-1].speculation.paused, copy_events[-1].speculation
        copied = "".join(e.text for e in copy_events)
        assert "001,item-1,37" in copied, copied[:80]
        # The same conversation with speculation turned off by the user: no drafting at all.
        off_lengths, off_events = run(eng, prompt, max_tokens=24, spec=SpeculationConfig(enabled=False))
        assert set(off_lengths) == {0}
        assert all(not e.speculation.active and "turned off" in e.speculation.reason for e in off_events)


def test_turning_speculation_back_on_resumes_a_paused_chat(
    smollm2_f16_path: Path, smollm2_path: Path
) -> None:
    """A chat paused by the adaptive policy, then speculation off and on again by the user: the next
    reply is not paused (before, it stayed paused for the rest of its retry wait)."""
    # The F16 target with its Q4_1 copy as drafter: a drafter cheaper than its target, as in use.
    # The draft model itself, adaptive: under AUTO a busy machine's calibration at load may hand the
    # chat to lookup alone (a policy of its own), and this test is about the draft model's pause.
    model = SpeculationConfig(drafter=DrafterKind.MODEL, draft_tokens=4, adaptive=True)
    cfg = EngineConfig(str(smollm2_f16_path), draft_path=str(smollm2_path), n_ctx=512)
    with Engine(cfg) as eng:
        run(eng, "Name three colours.", max_tokens=8, spec=model)
        policy = next(p for (session, *_), p in eng._policies.items() if session == "s")
        policy._pause(0.62, 0.4)  # what a losing stretch of this chat leaves behind
        _, still = run(eng, "And three more.", max_tokens=6, spec=model)
        assert still[0].speculation.paused and still[0].speculation.speedup == pytest.approx(0.62)
        _, off = run(eng, "And three more.", max_tokens=6, spec=SpeculationConfig(enabled=False))
        assert not off[0].speculation.active
        back_on = SpeculationConfig(drafter=DrafterKind.MODEL, draft_tokens=4, adaptive=True, resume=True)
        _, resumed = run(eng, "And three more.", max_tokens=6, spec=back_on)
        # Whether a given step drafts is the stop rule's call on this machine's timings; what the
        # user turned on is that the chat is no longer paused.
        assert not resumed[0].speculation.paused and resumed[0].speculation.active
        assert resumed[0].speculation.speedup == 0.0
