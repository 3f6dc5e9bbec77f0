"""tools/adaptive_replay.py on a real pair: a replayed policy drafts and is accepted exactly as the
engine's own decode loop does on the same prompts, and writes the target's text."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

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


def _recorded(replay: ModuleType, n_reply: int, right: set[int]) -> Any:
    """A recorded reply of ``n_reply`` tokens ending in an end token, where the drafter's greedy token is
    the reply's exactly at the positions ``right``."""
    reply = list(range(100, 100 + n_reply))
    greedy = [t if j in right else 1 for j, t in enumerate([*reply, 7])]
    rec = {"id": "p", "category": "creative", "prompt": [1, 2, 3], "reply": reply, "eog": 7,
           "greedy": greedy, "conf": [0.9] * len(greedy), "chains": {}}
    return replay.Recorded(rec, 7)


def test_the_hindsight_bound_drafts_only_where_the_drafter_is_right_and_pays_its_catch_up(
    replay: ModuleType,
) -> None:
    verify = replay._cost({n: 1.0 + 0.1 * (n - 1) for n in range(1, 18)})  # milliseconds by batch size
    draft = replay._cost({b: 0.1 * b for b in range(1, 65)})
    # Right at positions 10-13 only: plain up to 9 (the drafter falls 10 tokens behind), then one draft
    # of 4 (reading those 10 tokens first: 1.0 ms, 3 more drafter passes, a 5-token verification), then
    # plain again; 19 tokens to write after the first.
    h = replay.Hindsight(_recorded(replay, 19, {10, 11, 12, 13}), 64, verify, draft, 16)
    assert h.plain_s == pytest.approx(19 * 0.001)
    assert h.seconds == pytest.approx((9 + 1.0 + 0.3 + 1.4 + 5) / 1000)
    assert h.path == [*((i, 0, 0) for i in range(1, 10)), (10, 4, 10), *((i, 0, 0) for i in range(15, 20))]
    # Never right: nothing is worth drafting, the bound is plain decoding.
    never = replay.Hindsight(_recorded(replay, 19, set()), 64, verify, draft, 16)
    assert never.gain == pytest.approx(1.0) and all(k == 0 for _, k, _ in never.path)
    # Always right on a flat verification: one draft of 15 accepted whole and the target's own token
    # write the 16 tokens (the last one the end).
    flat = replay._cost({n: 1.0 for n in range(1, 18)})
    cheap = replay._cost({b: 0.01 for b in range(1, 65)})
    always = replay.Hindsight(_recorded(replay, 16, set(range(17))), 64, flat, cheap, 16)
    assert always.seconds == pytest.approx((0.01 + 14 * 0.01 + 1.0) / 1000)
    assert always.path == [(1, 15, 1)] and always.gain == pytest.approx(16 / 1.15)


@pytest.mark.parametrize("slope", [0.1, 0.5])
def test_an_adaptive_arm_can_name_its_drafter_for_every_reply(
    replay: ModuleType, monkeypatch: pytest.MonkeyPatch, slope: float,
) -> None:
    # A reply the drafter gets right everywhere and lookup cannot copy (no token repeats). On a gentle
    # verification curve (slope 0.1) the engine's choice is the draft model; on a steep one (0.5, a best
    # case of about 1.24x, under DRAFT_MODEL_MIN_BEST) the reply starts with lookup alone, which drafts
    # nothing here, and the draft model takes over after the hold (adaptive.HOLD_TOKENS), its look back
    # showing that it pays; kept to lookup alone (adaptive-lookuponly), the reply drafts nothing.
    from localchat.engine.adaptive import HOLD_TOKENS

    curve = {"verify_ms": {n: 10.0 + slope * 10 * (n - 1) for n in range(1, 18)},
             "draft_ms": {b: 2.0 * b for b in range(1, 65)}}
    drafted = {}
    for arm in ("adaptive", "adaptive/model", "adaptive/lookup", "adaptive/first", "adaptive-lookuponly"):
        clock = replay.Clock()
        monkeypatch.setattr(time, "perf_counter", clock)
        pipe = replay.Pipeline(arm, curve, [1, 2, 4, 8, 16], 1000, {7}, clock)
        r = _recorded(replay, 60, set(range(61)))
        out, _seconds, drafted[arm], accepted = pipe.answer(r, 64)
        monkeypatch.undo()
        assert out == r.reply and accepted == drafted[arm]
    assert drafted["adaptive/model"] > 40 and drafted["adaptive/lookup"] == 0
    # adaptive/first starts every reply as the steep curve's engine does, whatever the curve: lookup,
    # then the draft model after the hold.
    assert 0 < drafted["adaptive/first"] <= 60 - HOLD_TOKENS
    if slope < 0.5:
        assert drafted["adaptive"] == drafted["adaptive-lookuponly"] == drafted["adaptive/model"]
    else:
        assert drafted["adaptive-lookuponly"] == 0
        assert drafted["adaptive"] == drafted["adaptive/first"]
    with pytest.raises(SystemExit, match="must be one of"):
        replay.Pipeline("adaptive/neither", curve, [1], 1000, {7}, replay.Clock())


def test_the_positions_table_sets_the_rules_chance_beside_what_was_accepted(replay: ModuleType) -> None:
    from types import SimpleNamespace

    from localchat.engine.decision_trace import TokenDecision

    def take(position: int, all_chance: float, kept: bool = True, floor: bool = False) -> TokenDecision:
        return TokenDecision("take", position, 0.5, 0.5, all_chance, 0.01, 10.0, kept, floor)

    look = TokenDecision("look", 0, 0.5, 0.5, 0.9, 0.01, 10.0, True)
    steps = [
        ("code", SimpleNamespace(accepted=2,
                                 decisions=(take(0, 0.9), look, take(1, 0.8), take(2, 0.3, floor=True)))),
        ("code", SimpleNamespace(accepted=0, decisions=(take(0, 0.7), take(1, 0.1, kept=False)))),
        ("chat", SimpleNamespace(accepted=1, decisions=(take(0, 0.6),))),
    ]
    lines = replay.positions_table(steps, most=3)
    assert lines[0].split() == ["category", "position", "1", "position", "2", "position", "3"]
    assert lines[1].split() == ["chat", "0.60", "/", "1.00", "(1)", "-", "-"]
    # The floor's token and the declined one are left out: only what the rule kept on its own counts.
    assert lines[2].split() == ["code", "0.80", "/", "0.50", "(2)", "0.80", "/", "1.00", "(1)", "-"]
    # Given the earlier tokens: each token's own chance (0.5 here), and only drafts that reached it count.
    short = ("code", SimpleNamespace(accepted=0, decisions=(take(0, 0.7), take(1, 0.6))))
    lines = replay.positions_table([*steps, short], most=3, given_earlier=True)
    assert lines[2].split() == ["code", "0.50", "/", "0.33", "(3)", "0.50", "/", "1.00", "(1)", "-"]


def test_the_losses_table_charges_each_kind_of_step_its_time_beyond_plain(replay: ModuleType) -> None:
    from types import SimpleNamespace

    def step(state: str, source: str, drafted: int, accepted: int, draft_s: float, verify_s: float,
             catch_up_s: float = 0.0, explore: bool = False) -> SimpleNamespace:
        return SimpleNamespace(state=state, source=source, drafted=drafted, accepted=accepted,
                               draft_s=draft_s, verify_s=verify_s, catch_up_s=catch_up_s, explore=explore)

    plain = 0.1  # one plain pass
    steps = [
        ("creative", step("draft", "draft", 0, 0, 0.02, 0.1, catch_up_s=0.03)),  # a look for nothing: +0.05
        ("creative", step("paused", "", 0, 0, 0.0, 0.1)),  # a plain step: nothing
        ("creative", step("look back", "", 0, 0, 0.0, 0.1, catch_up_s=0.2)),  # the look back's batch: +0.2
        ("creative", step("probe", "draft", 3, 0, 0.06, 0.2, explore=True)),  # +0.16
        ("creative", step("draft", "draft", 4, 4, 0.08, 0.22)),  # five tokens in 0.3 s: -0.2
        ("code", step("draft", "ngram", 8, 8, 0.0, 0.3)),  # lookup: nine tokens in 0.3 s: -0.6
    ]
    assert [replay.step_kind(s) for _, s in steps] == ["declined", "plain", "look back", "probe", "drafted",
                                                       "lookup"]
    lines = replay.losses_table(steps, plain)
    assert lines[0].split() == ["category", "all", "drafted", "lookup", "probe", "declined", "look", "back",
                                "plain"]
    # code: nine tokens, 0.9 s plain; lookup saved 0.6 s of it.
    assert lines[1].split() == ["code", "-66.7", "-", "-66.7", "(1)", "-", "-", "-", "-"]
    # creative: nine tokens, 0.9 s plain; +0.05 +0.2 +0.16 -0.2 = +0.21 s.
    assert lines[2].split() == ["creative", "23.3", "-22.2", "(1)", "-", "17.8", "(1)", "5.6", "(1)", "22.2",
                                "(1)", "0.0", "(1)"]


def test_the_switch_study_leaves_lookup_for_the_draft_model_only_where_its_answers_pay(
    replay: ModuleType, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A steep curve (lookup alone is the engine's choice there) on which a right drafter still pays.
    curve = {"verify_ms": {n: 10.0 + 5.0 * (n - 1) for n in range(1, 18)},
             "draft_ms": {b: 2.0 * b for b in range(1, 65)}}
    clock = replay.Clock()
    monkeypatch.setattr(time, "perf_counter", clock)
    study = replay.Switch(replay.Pipeline("adaptive", curve, [1, 2, 4, 8, 16], 1000, {7}, clock), 16, 64, 1.3)
    right = _recorded(replay, 90, set(range(91)))
    toks, right_s, what = study.answer(right, 96, lookup_alone=True)
    assert toks == right.reply and what.startswith("switched at ")
    wrong = _recorded(replay, 90, set())
    toks, wrong_s, what = study.answer(wrong, 96, lookup_alone=True)
    assert toks == wrong.reply and what.startswith("stayed at ")
    # The switched reply paid its catch-up and still beat writing every token plainly; the other, where
    # lookup drafts nothing, is plain decoding.
    plain = replay.Pipeline("off", curve, [1, 2, 4, 8, 16], 1000, {7}, clock).answer(wrong, 96)[1]
    assert right_s < 0.9 * plain and wrong_s == pytest.approx(plain, rel=0.02)
    assert study.answer(right, 96, lookup_alone=False)[2] == "model"
    assert study.answer(right, 12, lookup_alone=True)[2] == "lookup"  # too short a reply to look at
    rest = right.after(16)
    assert rest.prompt == [*right.prompt, *right.reply[:16]] and rest.reply == right.reply[16:]
    assert rest.greedy == right.greedy[16:] and len(rest.conf) == len(rest.greedy)


def test_an_order_is_the_recorded_one_or_a_shuffle_that_a_seed_repeats(replay: ModuleType) -> None:
    replies = []
    for k in range(12):
        r = _recorded(replay, 4, set())
        r.id, r.category = f"p{k}", ("code", "chat", "creative")[k // 4]
        replies.append(r)
    assert replay.ordered(replies, 0) == replies
    once, again, other = (replay.ordered(replies, s) for s in (1, 1, 2))
    assert once == again and once != replies and other != once
    assert sorted(r.id for r in once) == sorted(r.id for r in replies)
    # Shuffled, a category's replies no longer come one after another (what it learns meets the others').
    kinds = [r.category for r in once]
    assert kinds != sorted(kinds, key=["code", "chat", "creative"].index)
