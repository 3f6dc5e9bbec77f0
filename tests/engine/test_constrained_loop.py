"""The decode loop's grammar rules, step by step, with a scripted target over the real Qwen2.5
vocabulary: drafts cut at a forbidden token, forced tokens at a step's start and inside a verification,
the same tokens with speculation as without, the end of the grammar, max_tokens.

The target is a stand-in (the rules under test are the loop's, not the model's): it wants to write
``TEXT`` and always prefers the first token of what is left of it, as the tokenizer splits it. The
drafter proposes the same text mostly a character at a time, a tokenisation neither the target nor the
grammar's forced tokens use (after two tokens as the target splits them), so verification meets every
case: accepted, rejected, cut, forced at the step's start and after accepted tokens.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from localchat.engine.adaptive import FixedPolicy
from localchat.engine.backend import Model
from localchat.engine.constrained import ConstrainedReply
from localchat.engine.draft_sources import Draft
from localchat.engine.grammar import GrammarCompiler
from localchat.engine.speculative import DecodeLoop
from localchat.engine.stats import StatsRecorder
from localchat.engine.types import ConstraintKind, FinishReason, OutputConstraint, SamplingParams

TEXT = '{"name": "Ada Lovelace", "born": 1815, "fields": ["math", "computing"]}'
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "born": {"type": "integer"},
                                           "fields": {"type": "array", "items": {"type": "string"}}},
          "required": ["name", "born", "fields"]}


@pytest.fixture(scope="module")
def vocab(qwen_target_path: Path) -> Iterator[Model]:
    model = Model(qwen_target_path, gpu_layers=0, vocab_only=True)
    yield model
    model.close()


@pytest.fixture(scope="module")
def compiler(vocab: Model) -> GrammarCompiler:
    return GrammarCompiler(vocab)


class ScriptedTarget:
    """Enough of backend.Context for the decode loop: a KV mirror and logits from a script."""

    def __init__(self, model: Model, prompt_len: int, wants: Callable[[Sequence[int]], int]) -> None:
        self.model = model
        self.n_ctx, self.n_batch, self.n_vocab = 4096, 512, model.n_vocab
        self.read_grid = self.fresh = 0  # prompts read as the default (not exact) mode reads them
        self.tokens: list[int] = []
        self.prompt_len = prompt_len
        self.wants = wants
        self._rows: list[npt.NDArray[np.float32]] = []

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    def set_abort(self, _: object) -> None:
        pass

    def truncate(self, n_keep: int) -> None:
        del self.tokens[n_keep:]

    def decode(self, tokens: Sequence[int], logits_for: str | int = "last") -> int:
        n = len(tokens)
        first = 0 if logits_for == "all" else n - 1 if logits_for == "last" else n - int(logits_for)
        self.tokens.extend(tokens)
        self._rows = []
        for k in range(first, n):
            row = np.zeros(self.n_vocab, dtype=np.float32)
            row[self.wants(self.tokens[self.prompt_len : len(self.tokens) - n + k + 1])] = 10.0
            self._rows.append(row)
        return n - first

    def logits(self, row: int) -> npt.NDArray[np.float32]:
        return self._rows[row]


class CharDrafter:
    """Drafts what is left of ``TEXT``: its first two tokens as the tokenizer splits it (the target
    accepts them), then one character per token (the target refuses those, and so does the grammar
    where it forces a key)."""

    name = "chars"

    def __init__(self, model: Model, prompt_len: int) -> None:
        self.model, self.prompt_len = model, prompt_len

    def prefill(self, tokens: Sequence[int], should_cancel: Callable[[], bool]) -> None:
        pass

    def propose(self, tokens: Sequence[int], n: int, params: SamplingParams, rng: np.random.Generator,
                stop: object = None) -> Draft:
        written = b"".join(self.model.piece(t) for t in tokens[self.prompt_len :]).decode("utf-8", "replace")
        rest = TEXT[len(written):] if TEXT.startswith(written) else ""
        ids = self.model.tokenize(rest, add_special=False)[:2] if rest else []
        done = len(b"".join(self.model.piece(t) for t in ids).decode())
        ids += [self.model.tokenize(ch, add_special=False)[0] for ch in rest[done:]]
        return Draft(ids[:n], source=self.name)

    def close(self) -> None:
        pass


def run(model: Model, compiler: GrammarCompiler, drafter: bool, fast_forward: bool,
        constraint: OutputConstraint | None = None, max_tokens: int = 64) -> tuple[list[int], DecodeLoop]:
    prompt = model.tokenize("Write it.", add_special=False)

    def wants(generated: Sequence[int]) -> int:
        written = b"".join(model.piece(t) for t in generated).decode("utf-8", "replace")
        if not TEXT.startswith(written) or written == TEXT:
            return model.eos()
        return model.tokenize(TEXT[len(written):], add_special=False)[0]

    target = ScriptedTarget(model, len(prompt), wants)
    c = constraint or OutputConstraint(ConstraintKind.JSON_SCHEMA, json.dumps(SCHEMA))
    grammar = ConstrainedReply(compiler.compile(c).matcher(), model.n_vocab, compiler.tokenizer.eos_tokens)
    loop = DecodeLoop(target, CharDrafter(model, len(prompt)) if drafter else None,  # type: ignore[arg-type]
                      FixedPolicy(4), SamplingParams(), StatsRecorder(), lambda: False, max_tokens,
                      grammar, fast_forward)
    out: list[int] = []
    for step in loop.run(prompt):
        out.extend(step.tokens)
    return out, loop


@pytest.mark.parametrize("fast_forward", [False, True])
def test_speculation_writes_the_same_tokens_as_plain_decoding_under_a_grammar(
    vocab: Model, compiler: GrammarCompiler, fast_forward: bool
) -> None:
    plain, plain_loop = run(vocab, compiler, drafter=False, fast_forward=fast_forward)
    spec, spec_loop = run(vocab, compiler, drafter=True, fast_forward=fast_forward)
    text = b"".join(vocab.piece(t) for t in plain).decode()
    assert json.loads(text) == json.loads(TEXT)
    assert spec == plain
    assert plain_loop.finish_reason is spec_loop.finish_reason is FinishReason.STOP
    ps, ss = plain_loop.rec, spec_loop.rec
    assert ss.verify_passes < ps.verify_passes and ss.accepted > 0
    if fast_forward:
        # The keys are forced: plain decoding writes them without the target; with speculation some
        # are drafted (equal tokens are accepted) and the rest end a verification as forced tokens.
        assert ps.forced_tokens > 0 and ss.forced_tokens > 0
        assert ps.verify_passes < len(plain)
    else:
        assert ps.forced_tokens == ss.forced_tokens == 0 and ps.verify_passes == len(plain) - 1


def test_a_draft_token_the_grammar_forbids_ends_the_draft_before_verification(
    vocab: Model, compiler: GrammarCompiler
) -> None:
    # The grammar wants the value of "name" in capitals: the drafter's lowercase letters are forbidden.
    upper = OutputConstraint(ConstraintKind.LARK, 'start: "{\\"name\\": \\"A" /[A-Z ]+/ "\\", " /(.|\\n)*/')
    plain, plain_loop = run(vocab, compiler, False, False, constraint=upper, max_tokens=20)
    spec, spec_loop = run(vocab, compiler, True, False, constraint=upper, max_tokens=20)
    assert spec == plain and spec_loop.finish_reason is plain_loop.finish_reason
    assert b"".join(vocab.piece(t) for t in plain).startswith(b'{"name": "A')
    assert spec_loop.rec.grammar_cut_drafts > 0 and spec_loop.rec.grammar_masked_tokens > 0


def test_max_tokens_inside_a_forced_block_ends_with_length(vocab: Model, compiler: GrammarCompiler) -> None:
    for drafter in (False, True):
        out, loop = run(vocab, compiler, drafter=drafter, fast_forward=True, max_tokens=3)
        assert len(out) == 3 and loop.finish_reason is FinishReason.LENGTH


class TargetDrafter(CharDrafter):
    """Drafts what is left of ``TEXT`` as the target splits it: every draft is accepted whole."""

    def propose(self, tokens: Sequence[int], n: int, params: SamplingParams, rng: np.random.Generator,
                stop: object = None) -> Draft:
        written = b"".join(self.model.piece(t) for t in tokens[self.prompt_len :]).decode("utf-8", "replace")
        rest = TEXT[len(written):] if TEXT.startswith(written) else ""
        return Draft(self.model.tokenize(rest, add_special=False)[:n] if rest else [], source=self.name)


def test_forced_tokens_a_drafter_drafted_count_as_accepted_draft_tokens(
    vocab: Model, compiler: GrammarCompiler
) -> None:
    # Why forced_tokens may be 0 under speculation with fast-forward on: a drafter that knows the text
    # drafts the keys the grammar forces, and those are accepted draft tokens. Every token is forced,
    # an accepted draft token, or the target's own choice (at most one a pass).
    plain, plain_loop = run(vocab, compiler, drafter=False, fast_forward=True)
    prompt = vocab.tokenize("Write it.", add_special=False)
    target = ScriptedTarget(vocab, len(prompt), plain_loop.target.wants)  # type: ignore[attr-defined]
    c = OutputConstraint(ConstraintKind.JSON_SCHEMA, json.dumps(SCHEMA))
    grammar = ConstrainedReply(compiler.compile(c).matcher(), vocab.n_vocab, compiler.tokenizer.eos_tokens)
    loop = DecodeLoop(target, TargetDrafter(vocab, len(prompt)), FixedPolicy(64),  # type: ignore[arg-type]
                      SamplingParams(), StatsRecorder(), lambda: False, 64, grammar, True)
    spec = [t for step in loop.run(prompt) for t in step.tokens]
    assert spec == plain and plain_loop.rec.forced_tokens > 0
    rec = loop.rec
    assert rec.forced_tokens < plain_loop.rec.forced_tokens and rec.accepted > 0
    assert rec.forced_tokens + rec.accepted <= rec.generated_tokens <= (
        rec.forced_tokens + rec.accepted + rec.verify_passes + 1)
