"""One reply's grammar inside the decode loop: which tokens are allowed, which are forced, and the
target's choice restricted to the allowed ones.

The matcher consumes only tokens that are emitted: verification walks the batch row by row and
feeds the matcher each draft token as it is accepted, then the target's own token; a rejected draft
token was never consumed, so there is nothing to roll back. Drafts are checked with
``valid_prefix`` (llguidance's ``validate_tokens``), which leaves the state as it was.

Greedy decoding needs the full mask only where the target's first choice is forbidden: checking one
token costs about a microsecond, a mask over a 152k vocabulary tens of microseconds to compute and
as much again to apply. Sampling needs the mask at every row it samples (the distribution is the
target's over the allowed tokens, renormalised before top-k, top-p and min-p).

Fast-forward (``forced``): where the grammar allows only one continuation (a JSON key after its
quote), llguidance gives it as tokens, tokenised canonically. It holds back the last forced bytes
when a vocabulary token could span the boundary between them and what the model writes next
(``":"`` after a key could be the start of ``": "``), so the forced tokens never commit the model to
a tokenisation it would not have chosen at that boundary.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import llguidance
import numpy as np
import numpy.typing as npt

from localchat.engine import sampling
from localchat.engine.errors import GenerationError
from localchat.engine.types import SamplingParams


class ConstrainedReply:
    """The grammar state of one reply, with the counts and time ``GenerationStats`` reports."""

    def __init__(self, matcher: llguidance.LLMatcher, n_vocab: int, ends: Sequence[int]) -> None:
        self.matcher = matcher
        self.n_vocab = n_vocab
        self._bits = np.zeros((n_vocab + 31) // 32, dtype=np.int32)
        self._ends = frozenset(ends)  # the end-of-generation tokens (llguidance's EOS tokens)
        self.seconds = 0.0  # time spent on grammar work during generation
        self.forced_tokens = 0  # tokens emitted because the grammar forced them (fast-forward)
        self.cut_drafts = 0  # drafts ended early at a token the grammar forbids
        self.masked_tokens = 0  # rows where the target's first choice was forbidden (mask applied)

    # -- state ------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """The grammar is complete: nothing but the end of the reply may follow."""
        return bool(self.matcher.is_stopped())

    def forced(self) -> list[int]:
        """The tokens the grammar forces from here (fast-forward), possibly none."""
        t0 = time.perf_counter()
        out = list(self.matcher.compute_ff_tokens())
        self.seconds += time.perf_counter() - t0
        return out

    def valid_prefix(self, tokens: Sequence[int]) -> int:
        """How many of ``tokens``, from the start, the grammar allows here (the state is unchanged)."""
        t0 = time.perf_counter()
        n = int(self.matcher.validate_tokens(list(tokens)))
        self.seconds += time.perf_counter() - t0
        return n

    def consume(self, tokens: Sequence[int]) -> None:
        """Advance past emitted tokens (each one allowed: chosen under the grammar or checked). Once
        the grammar is complete only an end-of-generation token can follow; it ends the reply and
        leaves the finished matcher as it is."""
        t0 = time.perf_counter()
        todo = list(tokens)
        n = int(self.matcher.try_consume_tokens(todo)) if todo else 0
        self.seconds += time.perf_counter() - t0
        if n < len(todo) and not (self.matcher.is_stopped() and set(todo[n:]) <= self._ends):
            detail = self.matcher.get_error() or f"token {todo[n]} is not allowed here"
            raise GenerationError(f"The output constraint's matcher failed: {detail.splitlines()[0]}")

    def allowed(self) -> npt.NDArray[np.bool_]:
        """One flag per token of the vocabulary: may it come next?"""
        t0 = time.perf_counter()
        bits = self._bits
        self.matcher.unsafe_compute_mask_ptr(bits.ctypes.data, bits.nbytes)
        flags = np.unpackbits(bits.view(np.uint8), count=self.n_vocab, bitorder="little").view(np.bool_)
        self.seconds += time.perf_counter() - t0
        return flags

    # -- the target's choice under the grammar ------------------------------------------------------
    def greedy(self, logits: npt.NDArray[np.float32], history: Sequence[int], params: SamplingParams,
               draft_token: int | None = None) -> int:
        """The target's greedy token among the allowed ones. ``draft_token`` (already checked against
        the grammar) needs no check when it is the target's first choice."""
        tok = sampling.greedy_token(logits, history, params)
        if tok == draft_token:
            return tok
        t0 = time.perf_counter()
        ok = self.matcher.validate_tokens([tok]) == 1
        self.seconds += time.perf_counter() - t0
        if ok:
            return tok
        self.masked_tokens += 1
        allowed = self.allowed()
        t0 = time.perf_counter()
        x = sampling.restrict(sampling.apply_repeat_penalty(logits, history, params), allowed)
        choice = int(np.argmax(x))
        self.seconds += time.perf_counter() - t0
        return choice

    def distribution(self, logits: npt.NDArray[np.float32], history: Sequence[int],
                     params: SamplingParams) -> sampling.Dist:
        """The target's sampling distribution over the allowed tokens, renormalised."""
        allowed = self.allowed()
        t0 = time.perf_counter()
        x = sampling.restrict(sampling.apply_repeat_penalty(logits, history, params), allowed)
        self.seconds += time.perf_counter() - t0
        return sampling.distribution(x, (), params)  # the penalty is applied already
