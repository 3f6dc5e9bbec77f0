"""The speculative loop on real GGUF models: output, KV rollback, statistics, cancel, context."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import llama_cpp
import numpy as np
import pytest

from localchat.engine.draft_sources import Draft, common_prefix, sync_context
from localchat.engine.engine import Engine
from localchat.engine.errors import ContextOverflowError
from localchat.engine.textruns import concat_runs
from localchat.engine.types import (
    ChatMessage,
    DrafterKind,
    EngineConfig,
    FinishReason,
    GenerationRequest,
    SamplingParams,
    SpeculationConfig,
    SpeculationState,
    TokenEvent,
)

CODE_PROMPTS = [
    "Write a Python function is_palindrome(s) that ignores case and punctuation.",
    "Implement binary search in Python with type hints.",
    "Write a Python class Stack with push, pop and peek methods.",
]

OFF = SpeculationConfig(enabled=False)


def ask(prompt: str, spec: SpeculationConfig, max_tokens: int = 64, **sampling: object) -> GenerationRequest:
    return GenerationRequest(
        messages=(ChatMessage("user", prompt),),
        max_tokens=max_tokens,
        sampling=SamplingParams(**sampling),  # type: ignore[arg-type]
        speculation=spec,
    )


def kv_len(ctx: object) -> int:
    return int(llama_cpp.llama_memory_seq_pos_max(ctx.memory, 0)) + 1  # type: ignore[attr-defined]


@contextmanager
def story_engine(target: Path, drafter: Path) -> Iterator[tuple[Engine, list[int]]]:
    """An engine for a target and drafter, without a profile or a calibration at load, and the opening
    of a story as its prompt: what the tests that drive ``DecodeLoop`` themselves write from."""
    cfg = EngineConfig(str(target), draft_path=str(drafter), n_ctx=512, use_profile=False, calibrate=False)
    with Engine(cfg) as eng:
        assert eng.model_drafter is not None
        yield eng, eng.target_model.tokenize("Once upon a time, in a small village by the sea,",
                                             add_special=True)


def model_draft(n: int = 4, p_min: float = 0.5) -> SpeculationConfig:
    return SpeculationConfig(drafter=DrafterKind.MODEL, draft_tokens=n, adaptive=False, p_min=p_min)


@pytest.mark.slow
def test_greedy_speculation_equals_plain_on_f16_target(
    qwen_target_f16_path: Path, qwen_draft_path: Path
) -> None:
    """Bandwidth-bound F16 target: batched and single-step kernels agree, so the text must be identical."""
    cfg = EngineConfig(str(qwen_target_f16_path), draft_path=str(qwen_draft_path), n_ctx=1024)
    with Engine(cfg) as eng:
        total_drafted = 0
        for prompt in CODE_PROMPTS:
            eng.reset()
            plain = eng.generate(ask(prompt, OFF))
            eng.reset()
            spec = eng.generate(ask(prompt, model_draft()))
            assert plain.stats.generated_tokens == 64
            assert spec.token_ids == plain.token_ids, prompt
            assert spec.text == plain.text
            assert spec.stats.verify_passes < plain.stats.verify_passes
            total_drafted += spec.stats.drafted
        assert total_drafted > 0


@pytest.mark.slow
def test_quantized_target_emits_its_own_batch_argmax(
    qwen_target_path: Path, qwen_draft_path: Path, record_property: object
) -> None:
    """Q4_K_M target: batched and single-token kernels may disagree on near-ties, so the
    invariant is that every emitted token is the target's argmax at its place in the
    verification batch. The mismatch rate against plain decoding is reported."""
    cfg = EngineConfig(str(qwen_target_path), draft_path=str(qwen_draft_path), n_ctx=1024)
    with Engine(cfg) as eng:
        checked = 0

        def trace(batch: list[int], choices: list[int], accepted: int) -> None:
            nonlocal checked
            draft = batch[1:]
            assert choices[:accepted] == draft[:accepted]
            assert len(choices) == accepted + 1
            if accepted < len(draft):
                assert choices[accepted] != draft[accepted]
            assert kv_len(eng.target) == len(eng.target.tokens)
            checked += 1

        mismatches = []
        for prompt in CODE_PROMPTS:
            eng.reset()
            plain = eng.generate(ask(prompt, OFF))
            eng.reset()
            eng.trace_hook = trace
            spec = eng.generate(ask(prompt, model_draft()))
            eng.trace_hook = None
            pairs = enumerate(zip(plain.token_ids, spec.token_ids, strict=False))
            first = next((i for i, (a, b) in pairs if a != b), None)
            mismatches.append(first)
        assert checked > 10
        same = sum(1 for m in mismatches if m is None)
        record_property("q4km_identical_replies", f"{same}/{len(mismatches)}")  # type: ignore[operator]
        print(f"Q4_K_M target: {same}/{len(mismatches)} replies identical to plain; "
              f"first mismatch at {mismatches}")


def test_self_drafting_smollm2_accepts_most_tokens(smollm2_path: Path) -> None:
    cfg = EngineConfig(str(smollm2_path), draft_path=str(smollm2_path), n_ctx=1024)
    with Engine(cfg) as eng:
        res = eng.generate(ask("Explain what a list is in Python.", model_draft(), max_tokens=96))
        s = res.stats
        assert s.drafted > 20
        assert s.acceptance_rate >= 0.85, s
        assert s.acceptance_length > 2.0
        assert len(s.acceptance_rate_by_position) == 4
        assert s.tokens_per_s > 0 and s.prompt_tokens_per_s > 0
        assert 0 < s.draft_share < 1


def test_reply_marks_the_characters_from_accepted_drafts(smollm2_path: Path) -> None:
    cfg = EngineConfig(str(smollm2_path), draft_path=str(smollm2_path), n_ctx=1024)
    events: list[TokenEvent] = []
    with Engine(cfg) as eng:
        req = ask("Explain what a list is in Python.", model_draft(), max_tokens=64)
        res = eng.generate(req, events.append)
        off = eng.generate(ask("Explain what a list is in Python.", OFF, max_tokens=64))
    assert sum(res.drafted_runs) == len(res.text)
    streamed: tuple[int, ...] = ()
    for event in events:
        assert sum(event.drafted_runs) == len(event.text)
        streamed = concat_runs(streamed, event.drafted_runs)
    assert streamed == res.drafted_runs
    drafted_chars = sum(res.drafted_runs[1::2])
    # Self-drafting accepts most tokens, so most characters came from drafts, but not all:
    # every verification pass adds one token of the target's own.
    assert 0.5 * len(res.text) < drafted_chars < len(res.text)
    assert sum(off.drafted_runs[1::2]) == 0 and sum(off.drafted_runs) == len(off.text)


class ScriptedDrafter:
    """Proposes the known plain continuation, with chosen positions corrupted."""

    name = "scripted"

    def __init__(self, prompt_len: int, plain: Sequence[int], corrupt: dict[int, int], eos: int,
                 extra_after_end: int = 0) -> None:
        self.prompt_len = prompt_len
        self.plain = list(plain) + [eos] + [eos + 1] * extra_after_end
        self.corrupt = corrupt  # step -> index in the draft to corrupt (-1: none)
        self.step = 0
        self.proposed: list[list[int]] = []

    def prefill(self, tokens: Sequence[int], should_cancel: object) -> None:
        pass

    def propose(
        self, tokens: Sequence[int], n: int, params: object, rng: object, stop: object = None
    ) -> Draft:
        j = len(tokens) - self.prompt_len
        draft = list(self.plain[j : j + n])
        bad = self.corrupt.get(self.step, -1)
        if 0 <= bad < len(draft):
            draft[bad] = (draft[bad] + 7) % 1000 + 10
        self.step += 1
        self.proposed.append(draft)
        return Draft(draft, None, self.name)

    def close(self) -> None:
        pass


def test_kv_rollback_partial_and_full_acceptance(smollm2_f16_path: Path) -> None:
    with Engine(EngineConfig(str(smollm2_f16_path), n_ctx=1024)) as eng:
        req_off = ask("List three colours of the rainbow and say one thing about each.", OFF, max_tokens=60)
        plain = eng.generate(req_off)
        prompt_len = len(eng.prompt_tokens(req_off)[0])
        # Steps alternate: fully accepted, rejected at 0, at 1, at 3, fully accepted...
        corrupt = {i: [-1, 0, 1, 3][i % 4] for i in range(200)}
        drafter = ScriptedDrafter(prompt_len, plain.token_ids, corrupt, eng.target_model.eos())
        eng._choose_drafter = lambda spec: (drafter, SpeculationState(True, "scripted"))  # type: ignore[method-assign]
        seen_accepts: set[int] = set()

        def trace(batch: list[int], choices: list[int], accepted: int) -> None:
            seen_accepts.add(accepted)
            # The cache holds exactly the committed tokens after every step.
            assert kv_len(eng.target) == len(eng.target.tokens)

        eng.trace_hook = trace
        eng.reset()
        question = req_off.messages[0].content
        spec = eng.generate(ask(question, SpeculationConfig(draft_tokens=4), max_tokens=60))
        assert spec.token_ids == plain.token_ids
        assert {0, 1, 3, 4} <= seen_accepts  # partial at each place, and full acceptance
        assert spec.stats.accepted > 0 and spec.stats.accepted < spec.stats.drafted


def test_eos_inside_a_draft_ends_the_reply(smollm2_f16_path: Path) -> None:
    with Engine(EngineConfig(str(smollm2_f16_path), n_ctx=1024)) as eng:
        req_off = ask("Reply with only the word: yes", OFF, max_tokens=48)
        plain = eng.generate(req_off)
        assert plain.finish_reason is FinishReason.STOP, "the model should end this reply by itself"
        prompt_len = len(eng.prompt_tokens(req_off)[0])
        drafter = ScriptedDrafter(prompt_len, plain.token_ids, {}, eng.target_model.eos(), extra_after_end=8)
        eng._choose_drafter = lambda spec: (drafter, SpeculationState(True, "scripted"))  # type: ignore[method-assign]
        eng.reset()
        question = req_off.messages[0].content
        spec = eng.generate(ask(question, SpeculationConfig(draft_tokens=8), max_tokens=48))
        assert spec.finish_reason is FinishReason.STOP
        assert spec.token_ids == plain.token_ids
        assert spec.text == plain.text
        # The EOS was part of a proposed draft.
        assert any(eng.target_model.eos() in d for d in drafter.proposed)


def test_real_drafter_rollback_keeps_output_exact_on_f16(smollm2_f16_path: Path, smollm2_path: Path) -> None:
    """A Q4_1 drafter for the F16 target: partial acceptance all the time; output identical to plain."""
    cfg = EngineConfig(str(smollm2_f16_path), draft_path=str(smollm2_path), n_ctx=1024)
    with Engine(cfg) as eng:
        assert eng.model_drafter is not None
        dctx = eng.model_drafter.ctx

        def trace(batch: list[int], choices: list[int], accepted: int) -> None:
            assert kv_len(eng.target) == len(eng.target.tokens)
            assert kv_len(dctx) == len(dctx.tokens)

        drafted = accepted = 0
        for prompt in ["Write a haiku about the sea.", "What is 17 times 23? Explain step by step."]:
            eng.reset()
            plain = eng.generate(ask(prompt, OFF, max_tokens=64))
            eng.reset()
            eng.trace_hook = trace
            spec = eng.generate(ask(prompt, model_draft(6, p_min=0.0), max_tokens=64))
            eng.trace_hook = None
            assert spec.token_ids == plain.token_ids
            drafted += spec.stats.drafted
            accepted += spec.stats.accepted
        assert 0 < accepted < drafted


class CountingRule:
    """Keeps the first ``keep`` tokens, and looks further while below that."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.seen: list[float] = []

    def take(self, position: int, confidence: float) -> bool:
        self.seen.append(confidence)
        return position < self.keep

    def look_further(self, position: int, decode_seconds: float) -> bool:
        return position + 1 < self.keep


def test_model_drafter_drafts_as_far_as_the_stop_rule_allows(
    smollm2_f16_path: Path, smollm2_path: Path
) -> None:
    cfg = EngineConfig(str(smollm2_f16_path), draft_path=str(smollm2_path), n_ctx=512)
    with Engine(cfg) as eng:
        md = eng.model_drafter
        assert md is not None
        tokens = eng.target_model.tokenize("One, two, three, four,", add_special=False)
        md.prefill(tokens[:-1], lambda: False)
        params, rng = SamplingParams(temperature=0.0), np.random.default_rng(0)
        nothing = md.propose(tokens, 16, params, rng, CountingRule(0))
        assert nothing.tokens == [] and nothing.source == md.name  # asked, and drafted nothing
        assert md.decode_seconds is not None and md.decode_seconds > 0  # the catch-up pass was timed
        rule = CountingRule(3)
        three = md.propose(tokens, 16, params, rng, rule)
        assert len(three.tokens) == 3 and len(three.confidence) == 3
        assert all(0.0 < c <= 1.0 for c in three.confidence) and rule.seen[:3] == three.confidence
        assert len(md.ctx.tokens) == len(tokens) + 2  # it never evaluated past what it looked at
        # Without a rule the drafter's own p_min and the length decide, as before.
        assert len(md.propose(tokens, 2, params, rng).tokens) <= 2


@pytest.mark.slow
def test_stop_rule_drafts_exact_output_with_varied_lengths(
    qwen_target_f16_path: Path, qwen_draft_path: Path
) -> None:
    """Adaptive speculation on a real pair where it pays: each draft ends where the stop rule
    says; the text stays the target's own, both caches stay in step, and drafts of many
    lengths occur (short on uncertain tokens, long on easy runs)."""
    cfg = EngineConfig(str(qwen_target_f16_path), draft_path=str(qwen_draft_path), n_ctx=1024)
    adaptive = SpeculationConfig(drafter=DrafterKind.MODEL, adaptive=True)
    with Engine(cfg) as eng:
        assert eng.model_drafter is not None
        dctx = eng.model_drafter.ctx
        lengths: list[int] = []

        def trace(batch: list[int], choices: list[int], accepted: int) -> None:
            assert kv_len(eng.target) == len(eng.target.tokens)
            assert kv_len(dctx) == len(dctx.tokens)
            lengths.append(len(batch) - 1)

        for prompt in [CODE_PROMPTS[0], "Write a haiku about the sea."]:
            eng.reset()
            plain = eng.generate(ask(prompt, OFF, max_tokens=64, temperature=0.0))
            eng.reset()
            eng.trace_hook = trace
            spec = eng.generate(ask(prompt, adaptive, max_tokens=64, temperature=0.0))
            eng.trace_hook = None
            assert spec.token_ids == plain.token_ids
        assert eng.model_drafter.decode_seconds is not None and eng.model_drafter.decode_seconds > 0
        assert eng.cost.calibration_for(eng.model_drafter.name)._seen != [0.0] * 20
        assert max(lengths) >= 6 and len(set(lengths)) >= 4, lengths


def test_next_turn_reuses_both_caches(smollm2_f16_path: Path, smollm2_path: Path) -> None:
    cfg = EngineConfig(str(smollm2_f16_path), draft_path=str(smollm2_path), n_ctx=2048)
    with Engine(cfg) as eng:
        turn1 = [ChatMessage("system", "You are brief."), ChatMessage("user", "Name a fruit.")]
        r1 = eng.generate(GenerationRequest(messages=tuple(turn1), max_tokens=24, speculation=model_draft()))
        turn2 = (*turn1, ChatMessage("assistant", r1.text), ChatMessage("user", "Now name a vegetable."))
        req2 = GenerationRequest(messages=turn2, max_tokens=24, speculation=model_draft())
        r2 = eng.generate(req2)
        assert r2.stats.cached_prompt_tokens > 20
        assert r2.stats.prompt_tokens < len(eng.prompt_tokens(req2)[0])
        eng.reset()
        fresh = eng.generate(req2)
        assert fresh.stats.cached_prompt_tokens == 0
        assert fresh.token_ids == r2.token_ids


def test_cancel_mid_reply_is_prompt_and_engine_stays_usable(smollm2_path: Path) -> None:
    cfg = EngineConfig(str(smollm2_path), draft_path=str(smollm2_path), n_ctx=1024)
    with Engine(cfg) as eng:
        flag = threading.Event()
        cancelled_at: list[float] = []

        def on_event(ev: object) -> None:
            if not flag.is_set():
                flag.set()
                cancelled_at.append(time.perf_counter())

        res = eng.generate(ask("Write a long essay about rivers.", model_draft(), max_tokens=400),
                           on_event=on_event, should_cancel=flag.is_set)
        latency = time.perf_counter() - cancelled_at[0]
        assert res.finish_reason is FinishReason.CANCELLED
        assert res.stats.generated_tokens < 50
        assert latency < 2.0
        again = eng.generate(ask("Say hello.", model_draft(), max_tokens=16))
        assert again.stats.generated_tokens > 0 and again.text.strip()


def test_cancel_during_a_long_prompt(smollm2_path: Path) -> None:
    with Engine(EngineConfig(str(smollm2_path), n_ctx=4096, n_batch=64)) as eng:
        calls = 0

        def cancel() -> bool:
            nonlocal calls
            calls += 1
            return calls > 2

        res = eng.generate(ask("word " * 2000, OFF, max_tokens=8), should_cancel=cancel)
        assert res.finish_reason is FinishReason.CANCELLED
        assert res.stats.generated_tokens == 0


def test_prompt_longer_than_context_is_refused(smollm2_path: Path) -> None:
    with Engine(EngineConfig(str(smollm2_path), n_ctx=256)) as eng:
        with pytest.raises(ContextOverflowError, match="context window holds 256"):
            eng.generate(ask("tell me about " + "apples and oranges " * 300, OFF, max_tokens=16))
        ok = eng.generate(ask("Hi!", OFF, max_tokens=8))
        assert ok.stats.generated_tokens > 0


def test_long_chat_drops_oldest_turns_but_keeps_system_prompt(smollm2_path: Path) -> None:
    with Engine(EngineConfig(str(smollm2_path), n_ctx=512)) as eng:
        msgs = [ChatMessage("system", "You are a pirate.")]
        for i in range(30):
            msgs += [ChatMessage("user", f"Question {i}: tell me about ships number {i}."),
                     ChatMessage("assistant", f"Arr, ship {i} sails the seas far and wide, matey. " * 2)]
        msgs.append(ChatMessage("user", "What is your name?"))
        req = GenerationRequest(messages=tuple(msgs), max_tokens=16, speculation=OFF)
        res = eng.generate(req)
        assert res.dropped_messages > 0 and res.dropped_messages % 2 == 0
        assert "did not fit" in res.notice
        tokens, _, _ = eng.prompt_tokens(req)
        text = eng.target_model.tokenize  # noqa: F841
        prompt_text = b"".join(eng.target_model.piece(t, special=True) for t in tokens).decode()
        assert "You are a pirate." in prompt_text and "What is your name?" in prompt_text
        assert "Question 0:" not in prompt_text


def test_seeded_sampling_with_speculation_is_reproducible(smollm2_path: Path) -> None:
    cfg = EngineConfig(str(smollm2_path), draft_path=str(smollm2_path), n_ctx=1024)
    with Engine(cfg) as eng:
        outs = []
        for _ in range(2):
            eng.reset()
            r = eng.generate(ask("Tell me a fun fact.", model_draft(), max_tokens=48,
                                 temperature=0.8, seed=42))
            outs.append(r.token_ids)
            assert r.stats.drafted > 0
        assert outs[0] == outs[1]
        eng.reset()
        other = eng.generate(ask("Tell me a fun fact.", model_draft(), max_tokens=48,
                                 temperature=0.8, seed=7))
        assert other.token_ids != outs[0]


def test_ngram_drafter_accepts_on_repetitive_text(smollm2_path: Path) -> None:
    code = "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n"
    with Engine(EngineConfig(str(smollm2_path), n_ctx=1024)) as eng:
        res = eng.generate(ask("Repeat this code exactly:\n" + code, SpeculationConfig(
            drafter=DrafterKind.NGRAM, draft_tokens=8, adaptive=False), max_tokens=48))
        assert res.stats.drafted > 0
        assert res.stats.accepted > 0
        assert res.speculation.drafter == "n-gram"


def test_no_logits_for_the_whole_context(smollm2_path: Path) -> None:
    """The engine never asks llama.cpp for n_ctx x n_vocab logits."""
    with Engine(EngineConfig(str(smollm2_path), n_ctx=2048)) as eng:
        eng.generate(ask("Hello " * 200, OFF, max_tokens=4))
        n_out = eng.target._first_out  # logits were requested from this batch index on
        assert eng.target.batch.n_tokens - n_out <= 17
        assert isinstance(eng.target.logits(0), np.ndarray)


def test_a_padded_batch_reads_its_tokens_as_the_batch_alone_does(smollm2_f16_path: Path) -> None:
    """Copies of the last token behind a verification batch (the decode loop's padding) change none of
    its rows (attention is causal), and leave the cache with the rejected tokens."""
    with Engine(EngineConfig(str(smollm2_f16_path), n_ctx=256, use_profile=False, calibrate=False)) as eng:
        ctx = eng.target
        tokens = eng.target_model.tokenize("The quick brown fox jumps over the lazy", add_special=True)
        ctx.clear()
        ctx.decode(tokens[:-3], logits_for="last")
        n = ctx.n_past
        ctx.decode(tokens[-3:], logits_for=3)
        rows = [ctx.logits(i).copy() for i in range(3)]
        ctx.truncate(n)
        ctx.decode([*tokens[-3:], tokens[-1], tokens[-1]], logits_for=5)
        padded = [ctx.logits(i).copy() for i in range(3)]
        assert ctx.n_past == kv_len(ctx) == n + 5
        for a, b in zip(rows, padded, strict=True):
            assert int(np.argmax(a)) == int(np.argmax(b))
            assert float(np.max(np.abs(a - b))) < 0.1
        ctx.truncate(n + 3)
        assert ctx.n_past == kv_len(ctx) == n + 3


def test_a_batch_padded_to_a_faster_size_writes_the_plain_text(
    smollm2_f16_path: Path, smollm2_path: Path
) -> None:
    """Where the measured costs say a larger batch runs faster, the loop verifies in it; the padding
    leaves the cache with the rejected tokens, and the text is the plain one."""
    from localchat.engine.adaptive import FixedPolicy
    from localchat.engine.costs import PAD_RECHECK, CostModel
    from localchat.engine.speculative import DecodeLoop
    from localchat.engine.stats import StatsRecorder

    with story_engine(smollm2_f16_path, smollm2_path) as (eng, prompt):
        recorders: list[StatsRecorder] = []

        def write(n: int, cost: CostModel | None) -> list[int]:
            recorders.append(StatsRecorder())
            loop = DecodeLoop(eng.target, eng.model_drafter, FixedPolicy(n), SamplingParams(temperature=0.0),
                              recorders[-1], lambda: False, 64)
            loop.cost = cost

            def trace(batch: list[int], choices: list[int], accepted: int) -> None:
                assert kv_len(eng.target) == len(eng.target.tokens)  # the padding is gone

            loop.trace = trace
            return [t for step in loop.run(prompt) for t in step.tokens]

        cost = CostModel()
        for _ in range(3):  # 2 to 5 tokens slow, 6 fast: every draft of 1 to 4 is verified as 6 tokens
            for size in range(1, 10):
                cost.observe_verify(size, 0.05 if size in (1, 6) else 1.0)
        runs: list[tuple[int, int]] = []
        verify_batch = cost.verify_batch

        def recorded(batch: int, limit: int) -> int:
            runs.append((batch, verify_batch(batch, limit)))
            return runs[-1][1]

        cost.verify_batch = recorded  # type: ignore[method-assign]
        plain = write(0, None)
        text = write(4, cost)
        stats = recorders[-1].snapshot()  # the passes counted at the batch the target ran
        same = common_prefix(text, plain)
        if same < len(plain):
            # Where the batched kernels round a pass of 6 differently from a pass of 1 (some CPUs), the
            # texts may part at a near-tie only: there the two tokens are the target's top two, close.
            sync_context(eng.target, [*prompt, *plain[:same]])
            logits = np.asarray(eng.target.logits(0), dtype=np.float64)
            probs = np.exp(logits - logits.max())
            probs /= probs.sum()
            top2 = [int(t) for t in np.argsort(probs)[-2:]]
            assert sorted(top2) == sorted((plain[same], text[same])), (same, top2)
            assert abs(probs[top2[1]] - probs[top2[0]]) < 0.1, probs[top2]
        assert same >= 16  # the padding left nothing behind: the first steps' text is the plain one
        padded = [r for r in runs if r[1] != r[0]]
        assert padded and all(run == 6 for _batch, run in padded)
        unpadded = sum(1 for batch, run in runs if 2 <= batch <= 5 and run == batch)  # the rechecks
        assert unpadded <= len(runs) // PAD_RECHECK + 4
        assert sum(stats.verify_batches) == stats.verify_passes
        assert stats.verify_batches[5] == len(padded)


def test_drafter_catch_up_after_a_stretch_is_timed_apart(smollm2_f16_path: Path, smollm2_path: Path) -> None:
    """After a pause the drafter must read the tokens it sat out: that one-off cost is reported
    apart, so the adaptive policy does not judge the drafter's per-step cost by it."""
    cfg = EngineConfig(str(smollm2_f16_path), draft_path=str(smollm2_path), n_ctx=1024)
    with Engine(cfg) as eng:
        md = eng.model_drafter
        assert md is not None
        text = "The quick brown fox jumps over the lazy dog. " * 12
        tokens = eng.target_model.tokenize(text, add_special=True)
        md.prefill(tokens[:20], lambda: False)
        params, rng = SamplingParams(temperature=0.0), np.random.default_rng(0)
        behind = md.propose(tokens, 3, params, rng)  # 100+ tokens it never saw
        assert behind.catch_up_seconds > 0
        assert md.ctx.tokens[: len(tokens)] == tokens
        after = [*tokens, *behind.tokens[:1]]
        in_step = md.propose([*after, 13], 3, params, rng)  # one new token: the step's own pass
        assert in_step.catch_up_seconds == 0


def test_two_tokens_behind_the_drafter_reads_them_the_faster_way(
    smollm2_f16_path: Path, smollm2_path: Path
) -> None:
    """Two tokens behind (the last draft token and the target's own): one batched pass or two
    single-token passes, whichever measured faster. A batch is timed apart from the single passes
    (on a CPU it can cost more than two of them), so ``decode_seconds`` stays the cost of a look."""
    cfg = EngineConfig(str(smollm2_f16_path), draft_path=str(smollm2_path), n_ctx=1024)
    with Engine(cfg) as eng:
        md = eng.model_drafter
        assert md is not None
        tokens = eng.target_model.tokenize("The quick brown fox jumps over the lazy dog. " * 4,
                                           add_special=True)
        md.prefill(tokens[:10], lambda: False)
        params, rng = SamplingParams(temperature=0.0), np.random.default_rng(0)
        md.propose(tokens[:11], 1, params, rng)  # in step: one single pass timed
        assert md.decode_seconds is not None and md.pair_seconds is None

        first = md.propose(tokens[:13], 1, params, rng)  # two behind, the batch not yet timed
        assert first.catch_up_seconds > 0 and md.pair_seconds == pytest.approx(first.catch_up_seconds)
        assert md.ctx.tokens[:13] == tokens[:13]

        # Where the batch measured dearer than two single passes, two single passes read the pair.
        md.pair_seconds = 10.0
        passes_before = md.decode_seconds
        singles = md.propose(tokens[:15], 1, params, rng)
        assert singles.catch_up_seconds == 0 and md.pair_seconds == 10.0
        assert md.decode_seconds != passes_before  # both single passes were timed
        assert md.ctx.tokens[:15] == tokens[:15]

        # Now and then the batch is timed again, so that a change in its cost is seen.
        md._pairs = md.PAIR_RECHECK - 1
        rechecked = md.propose(tokens[:17], 1, params, rng)
        assert rechecked.catch_up_seconds > 0 and md.pair_seconds < 10.0

        # Where it measured cheaper (a GPU), the pair is read in one pass.
        md.pair_seconds = 0.0
        batched = md.propose(tokens[:19], 1, params, rng)
        assert batched.catch_up_seconds > 0 and md.ctx.tokens[:19] == tokens[:19]


class DeclineAt(CountingRule):
    """Keeps the first ``keep`` tokens and always looks at the next: the one after them is declined."""

    def look_further(self, position: int, decode_seconds: float) -> bool:
        return True


class DecliningPolicy:
    """Drafts up to 8 tokens, keeps the first ``keep`` of each draft, and records what verification
    says of the token the rule declined (see draft_sources.Declined)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.declined: list[tuple[str, float, float]] = []
        self.steps: list[tuple[int, int, str]] = []  # (drafted, accepted, source)

    def draft_length(self) -> int:
        return 8

    def observe(self, drafted: int, accepted: int, draft_s: float, verify_s: float, source: str,
                confidence: Sequence[float] = (), catch_up_s: float = 0.0, passes: int | None = None) -> None:
        self.steps.append((drafted, accepted, source))

    def stop_rule(self) -> DeclineAt:
        return DeclineAt(self.keep)

    def observe_declined(self, source: str, confidence: float, hit: float) -> None:
        self.declined.append((source, confidence, hit))

    listens = False

    def observe_target(self, confidence: float, source: str, first_accepted: bool | None) -> None:
        pass

    def look_back_rows(self) -> int:
        return 0

    def observe_look_back(self, looked: Sequence[tuple[float, bool]]) -> None:
        pass

    paused = False
    reason = ""
    paused_speedup = None


def decode_with(policy: DecliningPolicy, target: Path, drafter: Path) -> str:
    """Write 48 greedy tokens of a story with ``policy`` deciding each step; the drafter's name."""
    from localchat.engine.speculative import DecodeLoop
    from localchat.engine.stats import StatsRecorder

    with story_engine(target, drafter) as (eng, prompt):
        assert eng.model_drafter is not None
        loop = DecodeLoop(eng.target, eng.model_drafter, policy, SamplingParams(temperature=0.0),
                          StatsRecorder(), lambda: False, 48)
        for _ in loop.run(prompt):
            pass
        return eng.model_drafter.name


class ListeningPolicy(DecliningPolicy):
    """Every third step plain and "paused"; records what the decode loop tells it of the target."""

    def __init__(self) -> None:
        super().__init__(keep=3)
        self.heard: list[tuple[float, str, bool | None]] = []
        self._step = 0

    def draft_length(self) -> int:
        self._step += 1
        return 0 if self._step % 3 == 0 else 8

    @property
    def paused(self) -> bool:  # type: ignore[override]
        return self._step % 3 == 0

    listens = True

    def observe_target(self, confidence: float, source: str, first_accepted: bool | None) -> None:
        self.heard.append((confidence, source, first_accepted))


def test_the_loop_tells_a_listening_policy_the_targets_confidence(
    smollm2_f16_path: Path, smollm2_path: Path
) -> None:
    """At each step the target's top probability at the first row reaches a policy that listens: after
    a draft with whether its first token was the target's choice (the target as its own drafter: always),
    at a plain step of a pause alone."""
    for drafter_path, always in ((smollm2_f16_path, True), (smollm2_path, False)):
        policy = ListeningPolicy()
        decode_with(policy, smollm2_f16_path, drafter_path)
        plain = [h for h in policy.heard if h[2] is None]
        drafts = [h for h in policy.heard if h[2] is not None]
        assert len(policy.heard) == len(policy.steps) and plain and drafts
        assert all(0.0 < c <= 1.0 for c, _, _ in policy.heard)
        assert [bool(src) for _, _, src in policy.steps] == [h[2] is not None for h in policy.heard]
        assert [a > 0 for d, a, src in policy.steps if src] == [h[2] for h in drafts]
        if always:
            assert all(h[2] for h in drafts)


@pytest.mark.parametrize("keep", [0, 2])
def test_verification_judges_the_token_the_stop_rule_declined(
    smollm2_f16_path: Path, smollm2_path: Path, keep: int
) -> None:
    """The target's choice at the declined token's position is computed anyway: with the target as
    its own drafter every declined token is one it agrees with; with the Q4_1 drafter some are not.
    Each is judged once, and only where every kept token before it was accepted."""
    judged: dict[str, list[float]] = {}
    for name, drafter_path in (("self", smollm2_f16_path), ("q4", smollm2_path)):
        policy = DecliningPolicy(keep)
        name_ok = decode_with(policy, smollm2_f16_path, drafter_path)
        whole = sum(1 for drafted, accepted, src in policy.steps if src and accepted == drafted == keep)
        assert len(policy.declined) == whole > 0
        assert all(src == name_ok and 0.0 < conf <= 1.0 for src, conf, _ in policy.declined)
        judged[name] = [hit for _, _, hit in policy.declined]
    assert set(judged["self"]) == {1.0}
    assert set(judged["q4"]) <= {0.0, 1.0}  # greedy: the target's choice or not
    if keep == 0:  # the drafter's first token: some are wrong on any machine (a third token after two
        assert 0.0 in judged["q4"]  # accepted ones was right every time in 48 tokens on one CPU)


def test_looking_back_gives_the_verdicts_drafts_from_each_position_would_have_had(
    smollm2_f16_path: Path, smollm2_path: Path
) -> None:
    """After a pause the drafter reads the tokens it sat out in one batch; looking back it also says,
    for the last of them, whether its greedy choice at each position was the token that followed,
    which is what a greedy draft started there would have been accepted on. Each verdict and
    confidence is the one a draft from that position gets."""
    cfg = EngineConfig(str(smollm2_f16_path), draft_path=str(smollm2_path), n_ctx=1024)
    with Engine(cfg) as eng:
        md = eng.model_drafter
        assert md is not None
        text = ("The lighthouse keeper climbed the stairs each evening, counting the steps as his "
                "father had, and lit the lamp before the fishing boats came home across the bay. On "
                "stormy nights he stayed awake until dawn, listening to the wind and the bell.")
        tokens = eng.target_model.tokenize(text, add_special=True)
        assert len(tokens) >= 48
        md.prefill(tokens[:8], lambda: False)
        params, rng = SamplingParams(temperature=0.0), np.random.default_rng(0)
        end = 28
        looked = md.look_back(tokens[:end], 16, params)
        assert len(looked) == 15  # the last row predicts a token not yet written
        assert md.ctx.tokens == tokens[:end]  # caught up: the next look is one token behind
        for r, (confidence, hit) in enumerate(looked):
            pos = end - 16 + r
            draft = md.propose(tokens[: pos + 1], 1, params, rng)
            assert hit == (draft.tokens[0] == tokens[pos + 1]), pos
            assert confidence == pytest.approx(draft.confidence[0], abs=0.02)
        assert any(hit for _, hit in looked) and not all(hit for _, hit in looked)

        # Fewer tokens sat out than rows asked: as many verdicts as there are; sampling: none, but
        # the drafter still catches up.
        assert md.look_back(tokens[:end], 16, params) == []  # nothing sat out: the last token re-read
        assert len(md.look_back(tokens[: end + 4], 16, params)) == 3
        assert md.look_back(tokens[: end + 20], 16, SamplingParams(temperature=0.8)) == []
        assert md.ctx.tokens == tokens[: end + 20]


class PausingPolicy(DecliningPolicy):
    """Drafts for 4 steps, then 20 plain steps (a pause), then looks back on them and drafts on."""

    def __init__(self) -> None:
        super().__init__(keep=3)
        self._step = 0
        self.looked: list[Sequence[tuple[float, bool]]] = []

    def draft_length(self) -> int:
        self._step += 1
        return 0 if 4 < self._step <= 25 else 8

    def look_back_rows(self) -> int:
        return 16 if self._step == 25 else 0

    def observe_look_back(self, looked: Sequence[tuple[float, bool]]) -> None:
        self.looked.append(looked)


def test_a_pause_that_ends_looking_back_writes_the_plain_text(
    smollm2_f16_path: Path, smollm2_path: Path
) -> None:
    """The decode loop runs the look back on a plain step: the policy hears the verdicts, the catch-up
    is counted as speculation's, and the text is the one plain decoding writes."""
    from localchat.engine.adaptive import FixedPolicy
    from localchat.engine.speculative import DecodeLoop
    from localchat.engine.stats import StatsRecorder

    with story_engine(smollm2_f16_path, smollm2_path) as (eng, prompt):
        assert eng.model_drafter is not None
        pausing = PausingPolicy()
        texts, recorders = [], []
        for policy in (pausing, FixedPolicy(0)):
            rec = StatsRecorder()
            loop = DecodeLoop(eng.target, eng.model_drafter, policy, SamplingParams(temperature=0.0), rec,
                              lambda: False, 64)
            texts.append([t for step in loop.run(prompt) for t in step.tokens])
            recorders.append(rec)
            if policy is pausing:
                caught_up = list(eng.model_drafter.ctx.tokens)
    assert texts[0] == texts[1]
    assert len(pausing.looked) == 1 and len(pausing.looked[0]) == 15
    assert recorders[0].snapshot().catch_up_seconds > 0
    # The drafts after the look back read on from where it left the drafter.
    assert caught_up[: len(prompt)] == prompt and len(caught_up) > len(prompt) + 25
