"""Saved states with ``EngineConfig.exact``: the reply is the one a read of the history from scratch gives.

llama.cpp's kernels depend on how many tokens one decode holds (on a CPU, flash attention takes
another algorithm from 64 tokens on, and a single token another matrix product), so cells restored
from a state (a reply's own, or read in a chunk of another size) differ in the last bits from a read
from scratch, and at a near-tie the next reply takes the other word. Exact reads prompts in chunks of
a grid aligned to absolute positions and keeps only cells read that way (draft_sources.read_prompt).

Checked bit for bit where it is cheap (the cells, the logits the first reply token is chosen from),
and as replies on the real F16 target, for histories that share all, some or none of a saved state,
from memory and, in new engine processes, from disk.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from localchat.engine.backend import Context, Model
from localchat.engine.draft_sources import read_prompt, sync_context
from localchat.engine.engine import Engine
from localchat.engine.state_cache import SUFFIX, StateCache
from localchat.engine.types import (
    ChatMessage,
    DrafterKind,
    EngineConfig,
    GenerationRequest,
    SamplingParams,
    SpeculationConfig,
)
from localchat.host.events import Failed, Finished, Loaded
from localchat.host.protocol import Generate, Load
from tests.host.processes import engine_process

GRID = 128
TEXT = ("In the morning the harbour was quiet; the boats rocked and the gulls waited on the posts. "
        "A fisherman mended his net while his daughter counted the floats. ") * 12


# -- the reader, on the context ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2_f16(smollm2_f16_path: Path) -> Iterator[Model]:
    model = Model(smollm2_f16_path, repack=False)
    yield model
    model.close()


def chunks_of(ctx: Context, read: Sequence[int], run: object) -> list[tuple[int, int]]:
    """The (start, size) of every decode ``run()`` makes on ``ctx``."""
    seen: list[tuple[int, int]] = []
    decode = type(ctx).decode

    def spy(tokens: Sequence[int], logits_for: str | int = "last") -> int:
        seen.append((ctx.n_past, len(tokens)))
        return decode(ctx, tokens, logits_for)

    ctx.decode = spy  # type: ignore[method-assign]
    try:
        assert callable(run)
        run()
    finally:
        del ctx.decode
    return seen


def test_read_prompt_reads_the_chunks_a_read_from_scratch_reads(smollm2_f16: Model) -> None:
    ctx = Context(smollm2_f16, 1024, 2, 512)
    ctx.read_grid = GRID
    tokens = smollm2_f16.tokenize(TEXT, add_special=True)[:300]
    assert chunks_of(ctx, tokens, lambda: read_prompt(ctx, tokens)) == [(0, 128), (128, 128), (256, 44)]
    assert ctx.fresh == 256  # the last, shorter chunk is not what a longer prompt's read reads
    ctx.decode([5, 6, 7])  # a reply's own cells
    longer = [*tokens, 5, 6, 7, 8, 9]
    # Only cells read as from scratch are kept, cut back to a grid line: the reply is read again.
    assert chunks_of(ctx, longer, lambda: read_prompt(ctx, longer)) == [(256, 49)]
    # A prompt that leaves the shared part inside a chunk starts again at that chunk's line.
    other = [*tokens[:200], 1, 2, 3]
    assert chunks_of(ctx, other, lambda: read_prompt(ctx, other)) == [(128, 75)]
    assert ctx.fresh == 128
    ctx.truncate(100)
    assert ctx.fresh == 100
    ctx.clear()
    assert ctx.fresh == 0
    # Without a grid: the longest common prefix, then the rest in one decode (as before).
    ctx.read_grid = 0
    sync_context(ctx, tokens)
    assert chunks_of(ctx, other, lambda: read_prompt(ctx, other)) == [(200, 3)]
    ctx.close()


def test_a_cancelled_read_keeps_only_whole_chunks_as_fresh(smollm2_f16: Model) -> None:
    ctx = Context(smollm2_f16, 1024, 2, 512)
    ctx.read_grid = GRID
    tokens = smollm2_f16.tokenize(TEXT, add_special=True)[:300]
    read_prompt(ctx, tokens, should_cancel=lambda: ctx.n_past >= GRID)  # stop once the first chunk is in
    assert ctx.n_past == 128 and ctx.fresh == 128
    ctx.close()


def cells_after(ctx: Context, tokens: Sequence[int]) -> bytes:
    read_prompt(ctx, tokens)
    return bytes(ctx.save_state())


def test_restored_cells_are_the_cells_of_a_read_from_scratch(smollm2_f16: Model) -> None:
    """Bit for bit, after a restore of the conversation's own state (a reply's cells in it) and of
    another prompt's state that shares all but the last few tokens (the rest is a short read)."""
    base = smollm2_f16.tokenize(TEXT, add_special=True)
    first, reply = base[:230], base[230:250]
    own = [*first, *reply, *base[300:320]]  # the next turn: the prompt, the reply, a new message
    near = [*base[:290], *base[330:340]]  # another prompt sharing 290 tokens of a saved one
    ctx = Context(smollm2_f16, 1024, 2, 512)
    ctx.read_grid = GRID
    scratch = {}
    for name, tokens in (("own", own), ("near", near)):
        ctx.clear()
        scratch[name] = cells_after(ctx, tokens)
    cache = StateCache(10**9, min_tokens=1, min_gain=1)
    ctx.clear()
    read_prompt(ctx, first)
    for tok in reply:  # the reply, one token a decode as a reply is written
        ctx.decode([tok])
    ctx.truncate(ctx.fresh)  # what Engine._remember_states keeps
    cache.remember(ctx, "m")
    ctx.clear()
    read_prompt(ctx, base[:300])
    cache.remember(ctx, "m")
    for name, tokens in (("own", own), ("near", near)):
        ctx.clear()
        assert cache.restore(ctx, "m", tokens) > 0
        assert cells_after(ctx, tokens) == scratch[name], name
    ctx.close()


# -- the engine: replies and first logits ----------------------------------------------------------------

SYSTEM = ("You are a careful Python reviewer. Answer briefly and precisely, with code when asked. Point out "
          "bugs first, then style. Prefer the standard library, name every assumption you make, and keep "
          "examples under ten lines. When the question is unclear, say what you understood before "
          "answering. Never invent an API: if you are not sure a function exists, say so. Use type hints "
          "in every example, and explain any line a beginner could misread. When code has a bug, show the "
          "smallest change that fixes it before any rewrite, and say which input made it fail. Mention the "
          "time and memory a solution needs when it is not obvious, and prefer clear names over comments. "
          "If a question mixes several problems, answer them one at a time, in the order they were asked.")
QUESTION = "Write a function that reverses a linked list."
FOLLOW_UP = "Now make it recursive."
OTHER_FOLLOW_UP = "What is its time complexity?"
OTHER_QUESTION = "Explain what a Python generator is."
LONER = "You are a weather poet. Describe today's weather in a haiku."


def opening() -> tuple[tuple[str, str], ...]:
    return (("system", SYSTEM), ("user", QUESTION))


def histories(reply: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """Histories by what they share with the opening's saved state: all of it, some, or nothing."""
    exchange = (*opening(), ("assistant", reply))
    return {
        "all": (*exchange, ("user", FOLLOW_UP)),  # the conversation's own next turn
        "branch": (*exchange, ("user", OTHER_FOLLOW_UP)),  # the same first exchange, another question
        "opening": (("system", SYSTEM), ("user", OTHER_QUESTION)),  # the system prompt only
        "none": (("system", LONER), ("user", QUESTION)),
    }


def request(turns: Sequence[tuple[str, str]], max_tokens: int, spec: SpeculationConfig) -> GenerationRequest:
    return GenerationRequest(messages=tuple(ChatMessage(r, c) for r, c in turns), max_tokens=max_tokens,
                             sampling=SamplingParams(temperature=0.0), speculation=spec)


PLAIN = SpeculationConfig(enabled=False)
# A fixed draft length: adaptive lengths follow the machine's timing, and the batch sizes with them.
FIXED = SpeculationConfig(drafter=DrafterKind.MODEL, draft_tokens=4, adaptive=False)


@dataclass(frozen=True)
class Reply:
    text: str
    tokens: tuple[int, ...]
    first_logits: str  # digest of the logits the first reply token was chosen from
    cached: int


def answer(eng: Engine, req: GenerationRequest, empty: bool) -> Reply:
    """``empty``: nothing left in the contexts from the previous reply, so only a saved state helps."""
    if empty:
        for ctx in [eng.target] + ([eng.model_drafter.ctx] if eng.model_drafter else []):
            ctx.clear()
    first: list[str] = []
    target = eng.target
    logits = type(target).logits

    def spy(row: int) -> npt.NDArray[np.float32]:
        out = logits(target, row)
        if not first:
            first.append(hashlib.sha256(out.tobytes()).hexdigest())
        return out

    target.logits = spy  # type: ignore[method-assign]
    try:
        res = eng.generate(req)
    finally:
        del target.logits
    return Reply(res.text, res.token_ids, first[0], res.stats.cached_prompt_tokens)


def from_scratch(eng: Engine, req: GenerationRequest) -> Reply:
    eng.reset()  # both contexts empty and the states in memory forgotten
    return answer(eng, req, empty=True)


def test_same_reply_with_and_without_saved_states_smollm2_pair(
    smollm2_f16_path: Path, smollm2_path: Path, tmp_path: Path
) -> None:
    """The small pair: both caches (target and drafter) restored, from memory and from disk."""
    cfg = EngineConfig(str(smollm2_f16_path), str(smollm2_path), n_ctx=1024, exact=True, use_profile=False,
                       calibrate=False)
    with Engine(cfg) as eng:
        first = from_scratch(eng, request(opening(), 16, FIXED))
        todo = {k: request(h, 16, FIXED) for k, h in histories(first.text).items()}
        scratch = {k: from_scratch(eng, r) for k, r in todo.items()}
        eng.reset()
        assert answer(eng, request(opening(), 16, FIXED), empty=True) == first
        memory = {k: answer(eng, r, empty=True) for k, r in todo.items()}
        assert eng.model_drafter is not None
        assert eng.states.stored(eng.state_key(eng.model_drafter.ctx))  # the drafter's states too
    disk_cfg = replace(cfg, state_memory_bytes=0, state_folder=str(tmp_path / "states"))
    with Engine(disk_cfg) as eng:
        answer(eng, request(opening(), 16, FIXED), empty=True)
    assert len(list((tmp_path / "states").glob(f"*{SUFFIX}"))) == 2  # the target's and the drafter's
    with Engine(disk_cfg) as eng:
        disk = {k: answer(eng, r, empty=True) for k, r in todo.items()}
    for got in (memory, disk):
        for kind, reply in got.items():
            assert reply.first_logits == scratch[kind].first_logits, kind
            assert reply.tokens == scratch[kind].tokens, kind
        assert min(got[k].cached for k in ("all", "branch", "opening")) >= GRID
        assert got["none"].cached == 0


@pytest.mark.slow
def test_same_reply_with_and_without_saved_states_f16_target(
    qwen_target_f16_path: Path, tmp_path: Path
) -> None:
    """The real F16 target, greedy: from memory in this process (replies and first logits), and from
    disk in new engine processes (one saves the opening's state, another answers from it)."""
    max_tokens = 12
    cfg = EngineConfig(str(qwen_target_f16_path), n_ctx=1024, exact=True, use_profile=False, calibrate=False)
    with Engine(cfg) as eng:
        first = from_scratch(eng, request(opening(), max_tokens, PLAIN))
        todo = {k: request(h, max_tokens, PLAIN) for k, h in histories(first.text).items()}
        scratch = {k: from_scratch(eng, r) for k, r in todo.items()}
        eng.reset()
        answer(eng, request(opening(), max_tokens, PLAIN), empty=True)
        memory = {k: answer(eng, r, empty=True) for k, r in todo.items()}
    for kind, reply in memory.items():
        assert reply.first_logits == scratch[kind].first_logits, kind
        assert reply.tokens == scratch[kind].tokens, kind
    assert min(memory[k].cached for k in ("all", "branch", "opening")) >= GRID
    assert memory["none"].cached == 0

    disk_cfg = EngineConfig(str(qwen_target_f16_path), n_ctx=1024, exact=True, use_profile=False,
                            calibrate=False, state_memory_bytes=0, state_folder=str(tmp_path / "states"))
    saved = in_new_process(disk_cfg, [request(opening(), max_tokens, PLAIN)])
    assert saved[0][0] == first.tokens
    disk = in_new_process(disk_cfg, list(todo.values()))
    for kind, (tokens, cached) in zip(todo, disk, strict=True):
        assert tokens == scratch[kind].tokens, kind
        assert (cached >= GRID) == (kind != "none"), kind


def in_new_process(cfg: EngineConfig, requests: list[GenerationRequest]) -> list[tuple[tuple[int, ...], int]]:
    """(reply tokens, prompt tokens not read again) for each request, in a new engine process."""
    proc = engine_process()
    try:
        proc.send(Load(cfg))
        loaded = proc.receive(300)
        assert isinstance(loaded, Loaded), loaded
        out = []
        for i, req in enumerate(requests):
            proc.send(Generate(i + 1, "window", req))
            while True:
                reply = proc.receive(300)
                assert reply is not None and not isinstance(reply, Failed), reply
                if isinstance(reply, Finished):
                    out.append((reply.result.token_ids, reply.result.stats.cached_prompt_tokens))
                    break
        return out
    finally:
        proc.stop()
