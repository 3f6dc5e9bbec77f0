"""The speculative decoding loop: draft, verify in one target batch, accept, roll back.

Invariants:
- ``target.tokens`` mirrors the target's KV cache; the newest emitted token
  (``last``) is not in it yet: it leads the next verification batch.
- The target evaluates ``[last] + draft`` in ONE decode with logits for exactly
  those positions.
- Greedy: accept the longest prefix where the target's argmax equals the
  draft, then emit the target's own token at the first mismatch (or the bonus
  token after a fully accepted draft). Sampling: speculative sampling, which
  keeps the target's distribution.
- Rejected positions leave the target's cache at once; the drafter drops its
  own on its next sync (see draft_sources.sync_context).
- With no drafter, or a policy that asks for 0 draft tokens, the same loop is
  plain decoding, so comparisons between modes are fair.
- Under an output constraint (``grammar``, engine/constrained.py) every row the
  target verifies chooses among the tokens the grammar allows, greedy or
  sampled; a draft is cut at its first forbidden token before the target sees
  it (sampling then draws that row from the residual of the cut token's draft
  distribution, as a rejection would, so the output stays distributed as the
  restricted target); the tokens the grammar forces (fast-forward) join the
  batch after ``last`` without being drafted, with logits only from the last
  of them on, and the drafter drafts on from after them. The reply ends when
  the grammar is complete.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from localchat.engine import sampling
from localchat.engine.adaptive import DraftPolicy
from localchat.engine.backend import Context
from localchat.engine.constrained import ConstrainedReply
from localchat.engine.draft_sources import Draft, DraftSource, MixingSource, sync_context
from localchat.engine.stats import StatsRecorder
from localchat.engine.types import FinishReason, SamplingParams
from localchat.settings.options import DRAFT_TOKENS_MAX


@dataclass
class Step:
    """Tokens emitted by one verification pass: ``forced`` tokens the grammar forced, then
    ``accepted_draft`` draft tokens the target accepted, then the target's own token."""

    tokens: list[int]
    accepted_draft: int  # how many of ``tokens`` were draft tokens the target accepted
    forced: int = 0  # how many of ``tokens``, first, the grammar forced (fast-forward)


@dataclass
class _Cut:
    """A draft cut at a token the grammar forbids: the token and the distribution it was drawn from."""

    token: int
    q: sampling.Dist


class DecodeLoop:
    def __init__(
        self,
        target: Context,
        drafter: DraftSource | None,
        policy: DraftPolicy,
        params: SamplingParams,
        recorder: StatsRecorder,
        should_cancel: Callable[[], bool],
        max_tokens: int,
        grammar: ConstrainedReply | None = None,
        fast_forward: bool = True,
    ) -> None:
        self.grammar = grammar
        self.fast_forward = fast_forward and grammar is not None
        self.target = target
        self.drafter = drafter
        self.policy = policy
        self.params = params
        self.rec = recorder
        self.should_cancel = should_cancel
        self.max_tokens = max_tokens
        # A negative seed means "random", as in llama.cpp (-1); numpy refuses negative seeds.
        seed = params.seed if params.seed is not None and params.seed >= 0 else None
        self.rng = np.random.default_rng(seed)
        self.finish_reason = FinishReason.STOP
        self.is_eog = target.model.is_eog
        # Test and diagnostics hook: called after each verification with
        # (batch, the target's choice at each evaluated row, accepted count).
        self.trace: Callable[[list[int], list[int], int], None] | None = None
        # (tokens read, tokens to read) while a long prompt is read, for a progress display.
        self.on_prompt_progress: Callable[[int, int], None] | None = None

    # -- helpers -----------------------------------------------------------------
    def _pick(self, row: int, history: Sequence[int]) -> int:
        logits = self.target.logits(row)
        g = self.grammar
        if self.params.greedy:
            if g is not None:
                return g.greedy(logits, history, self.params)
            return sampling.greedy_token(logits, history, self.params)
        dist = (g.distribution(logits, history, self.params) if g is not None
                else sampling.distribution(logits, history, self.params))
        return dist.sample(self.rng)

    def _forced(self, limit: int) -> list[int]:
        """The tokens the grammar forces next (fast-forward), at most ``limit``."""
        if not self.fast_forward or self.grammar is None or limit <= 0:
            return []
        return self.grammar.forced()[:limit]

    def _cut(self, draft: Draft) -> _Cut | None:
        """End ``draft`` before its first token the grammar forbids (the target never verifies it)."""
        g = self.grammar
        if g is None or not draft.tokens:
            return None
        k = g.valid_prefix(draft.tokens)
        if k >= len(draft.tokens):
            return None
        g.cut_drafts += 1
        tok = draft.tokens[k]
        cut = _Cut(tok, draft.dists[k] if draft.dists is not None else sampling.point_mass(tok))
        del draft.tokens[k:]
        if draft.dists is not None:
            del draft.dists[k:]
        del draft.confidence[k:]
        draft.declined = None  # its position is past the cut: verification never reaches it
        return cut

    def _history(self, committed: list[int], draft: Sequence[int], i: int) -> Sequence[int]:
        if self.params.repeat_penalty == 1.0:
            return ()
        return committed[-self.params.repeat_last_n :] + list(draft[:i])

    def _verify(self, committed: list[int], forced: list[int], draft: Draft,
                cut: _Cut | None = None) -> tuple[list[int], int]:
        """Run the target on [last] + forced + draft; return (emitted tokens, accepted draft count).

        Logits come from the last of [last] + forced on: row i chooses the token after
        forced + draft[:i]. Under a grammar each accepted token is consumed as it is accepted, and
        the target's own token last.
        """
        d = draft.tokens
        g = self.grammar
        base = self.target.n_past
        self.target.decode([committed[-1], *forced, *d], logits_for=len(d) + 1)
        before = committed + forced if forced and self.params.repeat_penalty != 1.0 else committed
        accepted = 0
        final = -1
        choices: list[int] = []
        declined = draft.declined
        for i in range(len(d) + 1):
            hist = self._history(before, d, i)
            logits = self.target.logits(i)
            if self.params.greedy:
                if g is not None:
                    tok = g.greedy(logits, hist, self.params, d[i] if i < len(d) else None)
                else:
                    tok = sampling.greedy_token(logits, hist, self.params)
                choices.append(tok)
                if declined is not None and declined.position == i:
                    self.policy.observe_declined(declined.source, declined.confidence,
                                                 1.0 if tok == declined.token else 0.0)
                if i < len(d) and tok == d[i]:
                    accepted += 1
                    if g is not None:
                        g.consume(d[i : i + 1])
                        if g.done:  # the grammar is complete: the reply ends here
                            break
                    continue
                final = tok
                break
            p = (g.distribution(logits, hist, self.params) if g is not None
                 else sampling.distribution(logits, hist, self.params))
            if declined is not None and declined.position == i and declined.q > 0:
                self.policy.observe_declined(declined.source, declined.confidence,
                                             min(1.0, p.prob(declined.token) / declined.q))
            if i == len(d):
                if cut is not None:  # the cut token (forbidden: p = 0) is rejected; draw the residual
                    final = sampling.speculative_accept(p, cut.q, cut.token, self.rng)[1]
                else:
                    final = p.sample(self.rng)
                break
            q = draft.dists[i] if draft.dists is not None else sampling.point_mass(d[i])
            ok, tok = sampling.speculative_accept(p, q, d[i], self.rng)
            if ok:
                accepted += 1
                if g is not None:
                    g.consume(d[i : i + 1])
                    if g.done:
                        break
                continue
            final = tok
            break
        if g is not None and final >= 0:
            g.consume([final])
        # Keep [last] + forced + the accepted drafts; the rest leaves the cache now.
        self.target.truncate(base + 1 + len(forced) + accepted)
        if self.trace is not None:
            self.trace([([committed[-1], *forced])[-1], *d], choices, accepted)
        own = [final] if final >= 0 else []  # none when the grammar ended with an accepted draft token
        return [*forced, *d[:accepted], *own], accepted

    # -- the loop --------------------------------------------------------------------
    def run(self, prompt: list[int]) -> Iterator[Step]:
        rec, target = self.rec, self.target
        t0 = time.perf_counter()
        evaluated = sync_context(target, prompt, self.should_cancel, self.on_prompt_progress)
        if self.should_cancel():
            self.finish_reason = FinishReason.CANCELLED
            return
        rec.prompt_tokens = evaluated
        rec.cached_prompt_tokens = len(prompt) - evaluated
        history = list(prompt)
        g = self.grammar
        if g is not None and g.done:  # a grammar nothing but the empty reply matches
            self.finish_reason = FinishReason.STOP
            return
        # A grammar that forces the reply's first tokens: the first one needs no choice (the rest
        # enter the first verification batch).
        forced = self._forced(1)
        first = forced[0] if forced else self._pick(0, self._history(history, (), 0))
        if g is not None:
            g.consume([first])
            g.forced_tokens += len(forced)
        if self.drafter is not None:
            self.drafter.prefill(prompt, self.should_cancel)
        rec.prompt_seconds = time.perf_counter() - t0
        gen_start = time.perf_counter()

        if self.is_eog(first):
            self.finish_reason = FinishReason.STOP
            return
        committed = history
        committed.append(first)
        rec.generated_tokens = 1
        rec.generation_seconds = time.perf_counter() - gen_start
        self._grammar_stats()
        yield Step([first], 0, len(forced))
        if g is not None and g.done:
            self.finish_reason = FinishReason.STOP
            return

        while True:
            if rec.generated_tokens >= self.max_tokens:
                self.finish_reason = FinishReason.LENGTH
                return
            if self.should_cancel():
                self.finish_reason = FinishReason.CANCELLED
                return
            room = target.n_ctx - target.n_past - 1  # positions left after [last]
            if room < 0:
                self.finish_reason = FinishReason.CONTEXT
                return
            remaining = self.max_tokens - rec.generated_tokens
            # Room for the batch's other tokens: a lookup draft may run to DRAFT_TOKENS_MAX.
            forced = self._forced(min(room, remaining, target.n_batch - 1 - DRAFT_TOKENS_MAX))
            if forced and g is not None:
                g.consume(forced)
                g.forced_tokens += len(forced)
                if g.done or len(forced) >= min(room, remaining):
                    # The grammar ends with them, or they fill the reply or the context: no pass.
                    committed.extend(forced)
                    rec.generated_tokens += len(forced)
                    rec.generation_seconds = time.perf_counter() - gen_start
                    self._grammar_stats()
                    yield Step(forced, 0, len(forced))
                    self.finish_reason = (FinishReason.STOP if g.done else FinishReason.LENGTH
                                          if len(forced) >= remaining else FinishReason.CONTEXT)
                    return
            room -= len(forced)
            remaining -= len(forced)
            ahead = committed + forced if forced else committed  # what the drafter drafts after
            n = 0
            if self.drafter is not None:
                n = min(self.policy.draft_length(), room, remaining - 1)
                if isinstance(self.drafter, MixingSource):
                    self.drafter.limit = min(room, remaining - 1)  # how far a drafter may go beyond n
            draft = Draft()
            draft_s = 0.0
            if n > 0:
                assert self.drafter is not None
                td = time.perf_counter()
                draft = self.drafter.propose(ahead, n, self.params, self.rng, self.policy.stop_rule())
                draft_s = time.perf_counter() - td
            cut = self._cut(draft)
            tv = time.perf_counter()
            emitted, accepted = self._verify(committed, forced, draft, cut)
            verify_s = time.perf_counter() - tv

            rec.verify_passes += 1
            rec.draft_seconds += draft_s
            if draft.tokens:
                rec.record_draft(len(draft.tokens), accepted)
            step_draft_s = draft_s - draft.catch_up_seconds
            # A batch with forced tokens is longer than its draft: its time would teach the policy a
            # wrong cost for that draft length, so it is not a measurement of speculation.
            if not forced:
                self.policy.observe(len(draft.tokens), accepted, step_draft_s, verify_s, draft.source,
                                    draft.confidence)
            if isinstance(self.drafter, MixingSource) and draft.tokens:
                self.drafter.observe(draft.source, len(draft.tokens), accepted)
            self._grammar_stats()

            out: list[int] = []
            stop = False
            for tok in emitted:
                if self.is_eog(tok):
                    stop = True
                    break
                out.append(tok)
                if rec.generated_tokens + len(out) >= self.max_tokens:
                    break
            committed.extend(out)
            rec.generated_tokens += len(out)
            rec.generation_seconds = time.perf_counter() - gen_start
            if out:
                n_forced = min(len(forced), len(out))
                yield Step(out, min(accepted, len(out) - n_forced), n_forced)
            if stop or (g is not None and g.done):
                self.finish_reason = FinishReason.STOP
                return

    def _grammar_stats(self) -> None:
        g = self.grammar
        if g is None:
            return
        rec = self.rec
        rec.forced_tokens = g.forced_tokens
        rec.grammar_cut_drafts = g.cut_drafts
        rec.grammar_masked_tokens = g.masked_tokens
        rec.grammar_seconds = g.seconds
