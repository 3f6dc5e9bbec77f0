"""Saved KV caches (engine/state_cache.py): unit rules on plain data, then the real Qwen pair.

The real tests run two conversations A and B alternating (A1, B1, A2) and check that A2
reads only its new tokens, from memory and, after a restart, from disk, with the reply
the same as A2 continuing in the context that wrote A1. Whether a restored state gives the
reply of a history read from scratch is test_state_exact.py's question (EngineConfig.exact).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from localchat.engine.backend import Context, Model
from localchat.engine.engine import Engine
from localchat.engine.state_cache import SUFFIX, DiskStates, StateCache, file_name, model_key
from localchat.engine.types import (
    ChatMessage,
    DrafterKind,
    EngineConfig,
    GenerationRequest,
    GenerationResult,
    SamplingParams,
    SpeculationConfig,
)

# -- unit rules, with a stand-in for a context ------------------------------------------------


@dataclass
class FakeContext:
    """Holds tokens; its "state" is the tokens' bytes, so a restore can be checked exactly."""

    tokens: list[int] = field(default_factory=list)
    refuse: bool = False
    read_grid: int = 0
    fresh: int = 0

    def save_state(self) -> bytearray:
        return bytearray(b"".join(t.to_bytes(4, "little") for t in self.tokens))

    def load_state(self, blob: bytearray, tokens: Sequence[int], fresh: bool = False) -> bool:
        self.tokens = []
        self.fresh = 0
        if self.refuse or bytes(blob) != bytes(FakeContext(list(tokens)).save_state()):
            return False
        self.tokens = list(tokens)
        self.fresh = len(tokens) if fresh else 0
        return True

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    def truncate(self, n: int) -> None:
        del self.tokens[n:]
        self.fresh = min(self.fresh, n)


def fake(tokens: Sequence[int]) -> Context:
    return FakeContext(list(tokens))  # type: ignore[return-value]


def test_restore_picks_the_longest_common_prefix() -> None:
    cache = StateCache(10_000, min_tokens=4, min_gain=2)
    a = list(range(100, 120))
    b = list(range(100, 104)) + list(range(500, 520))
    cache.remember(fake(a), "m")
    cache.remember(fake(b), "m")
    ctx = fake(b)
    assert cache.restore(ctx, "m", [*a, 1, 2, 3]) == len(a)
    assert ctx.tokens == a
    # Another model's states are never used.
    other = fake([])
    assert cache.restore(other, "other", [*a, 1]) == 0
    assert other.tokens == []


def test_restore_skips_a_small_gain_and_what_the_context_already_holds() -> None:
    cache = StateCache(10_000, min_tokens=4, min_gain=8)
    a = list(range(30))
    cache.remember(fake(a), "m")
    held = fake(a[:25])
    assert cache.restore(held, "m", [*a, 99]) == 0  # 5 more tokens: not worth a restore
    assert held.tokens == a[:25]
    assert cache.restore(fake(a[:10]), "m", [*a, 99]) == len(a)


def test_a_state_that_is_a_prefix_of_a_newer_one_is_dropped() -> None:
    cache = StateCache(10_000, min_tokens=4)
    first = list(range(20))
    cache.remember(fake(first), "m")
    cache.remember(fake(first + list(range(50, 70))), "m")
    assert cache.stored("m") == [tuple(first + list(range(50, 70)))]
    assert cache.memory_used == 40 * 4


def test_memory_is_bounded_least_recently_used_first_out() -> None:
    cache = StateCache(3 * 80, min_tokens=4)  # three states of 20 tokens
    states = [[k * 1000 + i for i in range(20)] for k in range(4)]
    for s in states[:3]:
        cache.remember(fake(s), "m")
    cache.restore(fake([]), "m", states[0] + [1])  # the first is now the most recently used
    cache.remember(fake(states[3]), "m")
    assert set(cache.stored("m")) == {tuple(states[0]), tuple(states[2]), tuple(states[3])}
    assert cache.memory_used <= 3 * 80


def test_whole_only_ignores_a_state_that_goes_past_the_prompt() -> None:
    cache = StateCache(10_000, min_tokens=4, min_gain=2)
    cache.remember(fake(list(range(40))), "m")
    ctx = fake([])
    assert cache.restore(ctx, "m", [*list(range(30)), 7, 8], whole_only=True) == 0
    assert cache.restore(ctx, "m", [*list(range(40)), 7, 8], whole_only=True) == 40


def test_with_a_read_grid_a_state_is_used_up_to_a_grid_line_only() -> None:
    """Read as from scratch (EngineConfig.exact): the prompt's next chunk must start on the grid."""
    cache = StateCache(10_000, min_tokens=4, min_gain=2)
    saved = list(range(100, 140))  # 40 tokens, all read as from scratch
    cache.remember(FakeContext(list(saved), read_grid=8, fresh=40), "m")  # type: ignore[arg-type]
    ctx = FakeContext(read_grid=8)
    prompt = [*saved[:29], 7, 8, 9]  # shares 29 tokens: 24 of them up to the grid line
    assert cache.restore(ctx, "m", prompt) == 24  # type: ignore[arg-type]
    assert ctx.tokens == saved[:24] and ctx.fresh == 24
    # What the context holds counts only as far as it was read as from scratch.
    held = FakeContext(list(saved), read_grid=8, fresh=8)
    assert cache.restore(held, "m", [*saved, 1]) == 40  # type: ignore[arg-type]
    assert held.fresh == 40
    # A context holding cells not read that way is not saved: a restore would trust every cell.
    cache.remember(FakeContext(list(range(200, 240)), read_grid=8, fresh=32), "m")  # type: ignore[arg-type]
    assert cache.stored("m") == [tuple(saved)]


def test_a_refused_state_is_dropped_and_the_prompt_read_instead(caplog: pytest.LogCaptureFixture) -> None:
    cache = StateCache(10_000, min_tokens=4, min_gain=2)
    cache.remember(fake(list(range(40))), "m")
    ctx = FakeContext(refuse=True)
    with caplog.at_level(logging.WARNING, logger="localchat.engine.states"):
        assert cache.restore(ctx, "m", list(range(41))) == 0  # type: ignore[arg-type]
    assert "refused" in caplog.text
    assert cache.stored("m") == []


def test_disk_states_are_bounded_and_survive_a_new_index(tmp_path: Path) -> None:
    disk = DiskStates(tmp_path, max_bytes=2 * 1000 + 2 * 400)
    states = [tuple(k * 1000 + i for i in range(60)) for k in range(3)]
    for s in states:
        disk.write("m", s, bytearray(os.urandom(1000)))
        disk.flush()
    files = sorted(tmp_path.glob(f"*{SUFFIX}"))
    assert len(files) == 2  # the oldest went to keep the folder in its bound
    again = DiskStates(tmp_path, max_bytes=10**6)
    assert set(again.entries("m")) == {states[1], states[2]}
    assert again.read("m", states[2]) is not None
    assert not list(tmp_path.glob("*.tmp"))
    disk.close()


def test_disk_drops_a_state_the_newer_one_extends(tmp_path: Path) -> None:
    disk = DiskStates(tmp_path, max_bytes=10**6)
    short = tuple(range(50))
    disk.write("m", short, bytearray(100))
    disk.write("m", (*short, 7, 8, 9), bytearray(100))
    disk.close()
    assert [p.name for p in tmp_path.glob(f"*{SUFFIX}")] == [file_name("m", (*short, 7, 8, 9))]


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_a_damaged_file_is_ignored_with_a_log_line_and_deleted(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    tokens = tuple(range(80))
    disk = DiskStates(tmp_path, max_bytes=10**6)
    disk.write("m", tokens, bytearray(os.urandom(5000)))
    disk.close()
    path = tmp_path / file_name("m", tokens)
    raw = bytearray(path.read_bytes())
    if damage == "truncate":
        raw = raw[:-100]
    elif damage == "flip":
        raw[-10] ^= 0xFF
    else:
        raw[:] = os.urandom(len(raw))
    path.write_bytes(raw)
    fresh = DiskStates(tmp_path, max_bytes=10**6)
    with caplog.at_level(logging.WARNING, logger="localchat.engine.states"):
        found = fresh.entries("m")
        blob = fresh.read("m", tokens) if found else None
    assert blob is None
    assert "saved state" in caplog.text
    assert not path.exists()


def test_a_file_of_another_model_is_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    tokens = tuple(range(80))
    disk = DiskStates(tmp_path, max_bytes=10**6)
    disk.write("m", tokens, bytearray(100))
    disk.close()
    (tmp_path / file_name("m", tokens)).rename(tmp_path / file_name("n", tokens))
    with caplog.at_level(logging.WARNING, logger="localchat.engine.states"):
        assert DiskStates(tmp_path, max_bytes=10**6).entries("n") == []
    assert "another model" in caplog.text


def test_model_key_follows_the_file(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + bytes(100))
    key = model_key(path)
    assert model_key(path) == key
    path.write_bytes(b"GGUF" + bytes(101))
    assert model_key(path) != key


# -- the real pair --------------------------------------------------------------------------------

SYSTEM = "You are a careful Python reviewer. Answer briefly and precisely, with code when asked. " * 3
A1 = ((("system", SYSTEM), ("user", "Write a function that reverses a linked list.")))
B1 = ((("system", SYSTEM), ("user", "Explain what a Python generator is.")))
A_NEXT = "Now make it recursive."
MAX = 16


# A fixed draft length from the draft model: the batch sizes are then the same in every engine (adaptive
# lengths follow the machine's timing), and repacked Q4_K_M weights round each batch size the same way
# each time, so a restored state continues exactly as the context that saved it would have.
FIXED = SpeculationConfig(drafter=DrafterKind.MODEL, draft_tokens=4, adaptive=False)


def ask(turns: Sequence[tuple[str, str]]) -> GenerationRequest:
    return GenerationRequest(messages=tuple(ChatMessage(r, c) for r, c in turns), max_tokens=MAX,
                             sampling=SamplingParams(temperature=0.0), speculation=FIXED)


def then(turns: Sequence[tuple[str, str]], reply: GenerationResult) -> tuple[tuple[str, str], ...]:
    return (*turns, ("assistant", reply.text), ("user", A_NEXT))


def config(target: Path, draft: Path, **kw: object) -> EngineConfig:
    # No saved profile or calibration: these tests are about both caches, and the drafts must not depend
    # on what a calibration measured. Not exact: every cell a state holds is restored (see FIXED).
    kw = {"use_profile": False, "calibrate": False, **kw}
    return EngineConfig(str(target), str(draft), n_ctx=1024, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def reference(qwen_target_path: Path, qwen_draft_path: Path) -> Iterator[dict[str, GenerationResult]]:
    """Without any saved state: A1 then A2 in one context, and B1 on its own."""
    with Engine(config(qwen_target_path, qwen_draft_path, state_memory_bytes=0)) as eng:
        a1 = eng.generate(ask(A1))
        a2 = eng.generate(ask(then(A1, a1)))
        eng.reset()
        b1 = eng.generate(ask(B1))
        # Switching without the cache: A2 reads everything after the shared system prompt again.
        a2_switched = eng.generate(ask(then(A1, a1)))
    yield {"A1": a1, "A2": a2, "B1": b1, "A2 switched": a2_switched}


@pytest.mark.slow
def test_switching_back_reads_only_the_new_tokens(
    qwen_target_path: Path, qwen_draft_path: Path, reference: dict[str, GenerationResult],
    caplog: pytest.LogCaptureFixture,
) -> None:
    with Engine(config(qwen_target_path, qwen_draft_path)) as eng:
        a1 = eng.generate(ask(A1))
        a1_prompt = len(eng.prompt_tokens(ask(A1))[0])
        b1 = eng.generate(ask(B1))
        a2_request = ask(then(A1, a1))
        a2_prompt = len(eng.prompt_tokens(a2_request)[0])
        with caplog.at_level(logging.INFO, logger="localchat.engine.states"):
            a2 = eng.generate(a2_request)
        eng.reset()  # the benchmark's "read from scratch": the kept states go too
        assert eng.generate(ask(B1)).stats.cached_prompt_tokens == 0
    assert (a1.text, b1.text) == (reference["A1"].text, reference["B1"].text)
    # A2 reads only what follows A1's prompt and reply: the new user message and its framing.
    assert a2.stats.cached_prompt_tokens >= a1_prompt + MAX - 1
    assert a2.stats.prompt_tokens == a2_prompt - a2.stats.cached_prompt_tokens
    assert a2.stats.prompt_tokens <= a2_prompt - a1_prompt - MAX + 1
    assert reference["A2 switched"].stats.prompt_tokens > a2.stats.prompt_tokens + MAX
    # Both the target's and the drafter's caches came back.
    assert caplog.text.count("restored the cache") == 2
    # The cells are the ones computed the first time: the reply is the one A2 gets without a switch.
    assert a2.token_ids == reference["A2"].token_ids
    assert a2.text == reference["A2"].text


@pytest.mark.slow
def test_a_restart_continues_from_the_saved_state(
    qwen_target_path: Path, qwen_draft_path: Path, reference: dict[str, GenerationResult], tmp_path: Path
) -> None:
    folder = str(tmp_path / "states")
    with Engine(config(qwen_target_path, qwen_draft_path, state_folder=folder)) as eng:
        a1 = eng.generate(ask(A1))
        a1_prompt = len(eng.prompt_tokens(ask(A1))[0])
    assert len(list(Path(folder).glob(f"*{SUFFIX}"))) == 2  # the target's and the drafter's
    with Engine(config(qwen_target_path, qwen_draft_path, state_folder=folder)) as eng:
        a2 = eng.generate(ask(then(A1, a1)))
    assert a2.stats.cached_prompt_tokens >= a1_prompt + MAX - 1
    assert a2.text == reference["A2"].text
    # A2's state replaced A1's (it extends it): one file per model and conversation.
    assert len(list(Path(folder).glob(f"*{SUFFIX}"))) == 2


@pytest.mark.slow
def test_a_corrupt_state_file_is_ignored(
    qwen_target_path: Path, qwen_draft_path: Path, reference: dict[str, GenerationResult], tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    folder = tmp_path / "states"
    with Engine(config(qwen_target_path, qwen_draft_path, state_folder=str(folder))) as eng:
        a1 = eng.generate(ask(A1))
    for path in folder.glob(f"*{SUFFIX}"):
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2 :] = bytes(len(raw) - len(raw) // 2)  # the second half zeroed
        path.write_bytes(raw)
    cfg = config(qwen_target_path, qwen_draft_path, state_folder=str(folder), state_memory_bytes=0)
    with caplog.at_level(logging.WARNING, logger="localchat.engine.states"), Engine(cfg) as eng:
        a2 = eng.generate(ask(then(A1, a1)))
    assert "corrupt saved state" in caplog.text
    assert a2.stats.cached_prompt_tokens == 0
    assert a2.stats.generated_tokens == MAX


def test_llama_cpp_refuses_a_truncated_state(smollm2_path: Path) -> None:
    model = Model(smollm2_path)
    try:
        ctx = Context(model, 256, 1)
        tokens = model.tokenize("The quick brown fox jumps over the lazy dog. " * 4, add_special=True)
        ctx.decode(tokens)
        blob = ctx.save_state()
        assert ctx.load_state(blob, tokens) and ctx.tokens == tokens
        assert not ctx.load_state(blob[: len(blob) // 2], tokens)
        assert ctx.tokens == []
        assert not ctx.load_state(blob, tokens[:-3])  # a blob for other tokens: refused, not believed
        assert ctx.tokens == []
        # Cells read as from scratch (EngineConfig.exact): as many as the state says, never more than held.
        assert ctx.load_state(blob, tokens, fresh=True) and ctx.fresh == len(tokens)
        ctx.truncate(5)
        assert ctx.fresh == 5
        assert not ctx.load_state(blob[: len(blob) // 2], tokens, fresh=True)
        assert ctx.fresh == 0
        ctx.close()
    finally:
        model.close()
