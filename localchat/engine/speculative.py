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
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from localchat.engine import sampling
from localchat.engine.adaptive import DraftPolicy
from localchat.engine.backend import Context
from localchat.engine.draft_sources import Draft, DraftSource, MixingSource, read_prompt
from localchat.engine.stats import StatsRecorder
from localchat.engine.types import FinishReason, SamplingParams


@dataclass
class Step:
    """Tokens emitted by one verification pass."""

    tokens: list[int]
    accepted_draft: int  # how many of ``tokens`` were draft tokens the target accepted


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
    ) -> None:
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
        if self.params.greedy:
            return sampling.greedy_token(logits, history, self.params)
        return sampling.distribution(logits, history, self.params).sample(self.rng)

    def _history(self, committed: list[int], draft: Sequence[int], i: int) -> Sequence[int]:
        if self.params.repeat_penalty == 1.0:
            return ()
        return committed[-self.params.repeat_last_n :] + list(draft[:i])

    def _verify(self, committed: list[int], draft: Draft) -> tuple[list[int], int]:
        """Run the target on [last] + draft; return (emitted tokens, accepted draft count)."""
        d = draft.tokens
        base = self.target.n_past
        self.target.decode([committed[-1], *d], logits_for="all")
        accepted = 0
        final = -1
        choices: list[int] = []
        declined = draft.declined
        for i in range(len(d) + 1):
            hist = self._history(committed, d, i)
            if self.params.greedy:
                tok = sampling.greedy_token(self.target.logits(i), hist, self.params)
                choices.append(tok)
                if declined is not None and declined.position == i:
                    self.policy.observe_declined(declined.source, declined.confidence,
                                                 1.0 if tok == declined.token else 0.0)
                if i < len(d) and tok == d[i]:
                    accepted += 1
                    continue
                final = tok
                break
            p = sampling.distribution(self.target.logits(i), hist, self.params)
            if declined is not None and declined.position == i and declined.q > 0:
                self.policy.observe_declined(declined.source, declined.confidence,
                                             min(1.0, p.prob(declined.token) / declined.q))
            if i == len(d):
                final = p.sample(self.rng)
                break
            q = draft.dists[i] if draft.dists is not None else sampling.point_mass(d[i])
            ok, tok = sampling.speculative_accept(p, q, d[i], self.rng)
            if ok:
                accepted += 1
                continue
            final = tok
            break
        # Keep [last] + the accepted drafts; the rest leaves the cache now.
        self.target.truncate(base + 1 + accepted)
        if self.trace is not None:
            self.trace([committed[-1], *d], choices, accepted)
        return [*d[:accepted], final], accepted

    # -- the loop --------------------------------------------------------------------
    def run(self, prompt: list[int]) -> Iterator[Step]:
        rec, target = self.rec, self.target
        t0 = time.perf_counter()
        evaluated = read_prompt(target, prompt, self.should_cancel, self.on_prompt_progress)
        if self.should_cancel():
            self.finish_reason = FinishReason.CANCELLED
            return
        rec.prompt_tokens = evaluated
        rec.cached_prompt_tokens = len(prompt) - evaluated
        history = list(prompt)
        first = self._pick(0, self._history(history, (), 0))
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
        yield Step([first], 0)

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
                draft = self.drafter.propose(committed, n, self.params, self.rng, self.policy.stop_rule())
                draft_s = time.perf_counter() - td
            tv = time.perf_counter()
            emitted, accepted = self._verify(committed, draft)
            verify_s = time.perf_counter() - tv

            rec.verify_passes += 1
            rec.draft_seconds += draft_s
            if draft.tokens:
                rec.record_draft(len(draft.tokens), accepted)
            step_draft_s = draft_s - draft.catch_up_seconds
            self.policy.observe(len(draft.tokens), accepted, step_draft_s, verify_s, draft.source,
                                draft.confidence)
            if isinstance(self.drafter, MixingSource) and draft.tokens:
                self.drafter.observe(draft.source, len(draft.tokens), accepted)

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
                yield Step(out, min(accepted, len(out)))
            if stop:
                self.finish_reason = FinishReason.STOP
                return
