"""The speculative decoding loop: draft, verify in one target batch, accept, roll back.

Invariants:
- ``target.tokens`` mirrors the target's KV cache; the newest emitted tokens
  (``pending``: the last one, or a block the grammar forced) are not in it yet:
  they lead the next verification batch.
- The target evaluates ``pending + draft`` in ONE decode with logits for exactly
  the positions it chooses at (the last pending token's and each draft token's).
- Greedy: accept the longest prefix where the target's argmax equals the
  draft, then emit the target's own token at the first mismatch (or the bonus
  token after a fully accepted draft). Sampling: speculative sampling, which
  keeps the target's distribution.
- Rejected positions leave the target's cache at once; the drafter drops its
  own on its next sync (see draft_sources.sync_context).
- With no drafter, or a policy that asks for 0 draft tokens, the same loop is
  plain decoding, so comparisons between modes are fair.

Under an output constraint (``grammar``, engine/constrained.py):
- Every row the target verifies chooses among the tokens the grammar allows,
  greedy or sampled. A draft is cut at its first forbidden token before the
  target sees it; sampling then draws that row from the residual of the cut
  token's draft distribution, as a rejection would, so the output stays
  distributed as the restricted target.
- Fast-forward: wherever the target would choose, the grammar is asked first
  for the tokens it forces (a JSON key after its quote); those are emitted
  without the target's choice. At a step's start they join the batch after the
  pending tokens, undrafted, and the drafter drafts on from after them; at a row
  inside the verification (after accepted draft tokens) draft tokens equal to
  them are accepted, and where the draft differs the step ends with them, pending
  for the next batch. The rule is the same at every state plain decoding would
  reach, so greedy text is the same with speculation on and off.
- The reply ends when the grammar is complete.
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
from localchat.engine.costs import CostModel
from localchat.engine.draft_sources import Draft, DraftSource, LooksBack, MixingSource, read_prompt
from localchat.engine.stats import StatsRecorder
from localchat.engine.types import FinishReason, SamplingParams
from localchat.settings.options import DRAFT_TOKENS_MAX


@dataclass
class Step:
    """Tokens emitted by one verification pass: ``forced`` tokens the grammar forced, then
    ``accepted_draft`` draft tokens the target accepted, then the target's own token (or tokens the
    grammar forced after them)."""

    tokens: list[int]
    accepted_draft: int  # how many of ``tokens`` were draft tokens the target accepted
    forced: int = 0  # how many of ``tokens``, first, the grammar forced (fast-forward)


@dataclass
class _Cut:
    """A draft cut at a token the grammar forbids: the token and the distribution it was drawn from."""

    token: int
    q: sampling.Dist


@dataclass
class _Verdict:
    """What one verification pass decided."""

    accepted: int  # draft tokens kept (the target's own choices, or equal to forced tokens)
    tail: list[int]  # emitted after them and not in the cache: the target's token, or forced ones


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
        # This machine's measured verification costs: a batch is padded to a larger size where
        # that runs faster (``CostModel.verify_batch``); None: never padded.
        self.cost: CostModel | None = None

    # -- helpers -----------------------------------------------------------------
    def _report_target(self, draft: Draft, accepted: int) -> None:
        """Tell a policy that listens the target's confidence at the step's first row: after a draft,
        with whether the drafter's first token was the target's choice, else (a plain step) without
        (the logits are computed anyway; their top probability is one pass over the vocabulary)."""
        policy = self.policy
        if not policy.listens:
            return
        confidence = sampling.top_probability(self.target.logits(0))
        policy.observe_target(confidence, draft.source, accepted > 0 if draft.tokens else None)

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
        """The tokens the grammar forces from the current state (fast-forward), consumed, at most
        ``limit``: asked again after each block until none are, so a block never ends where the grammar
        would still force."""
        g = self.grammar
        out: list[int] = []
        if not self.fast_forward or g is None:
            return out
        while len(out) < limit and not g.done:
            block = g.forced()[: limit - len(out)]
            if not block:
                break
            g.consume(block)
            out += block
        g.forced_tokens += len(out)
        return out

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

    def _choose(self, i: int, hist: Sequence[int], draft: Draft, cut: _Cut | None,
                choices: list[int]) -> tuple[bool, int]:
        """Row ``i``: (accept draft token i?, else the token emitted in its place)."""
        d, g = draft.tokens, self.grammar
        logits = self.target.logits(i)
        declined = draft.declined
        if self.params.greedy:
            if g is not None:
                tok = g.greedy(logits, hist, self.params, d[i] if i < len(d) else None)
            else:
                tok = sampling.greedy_token(logits, hist, self.params)
            choices.append(tok)
            if declined is not None and declined.position == i:
                self.policy.observe_declined(declined.source, declined.confidence,
                                             1.0 if tok == declined.token else 0.0)
            return i < len(d) and tok == d[i], tok
        p = (g.distribution(logits, hist, self.params) if g is not None
             else sampling.distribution(logits, hist, self.params))
        if declined is not None and declined.position == i and declined.q > 0:
            self.policy.observe_declined(declined.source, declined.confidence,
                                         min(1.0, p.prob(declined.token) / declined.q))
        if i == len(d):
            if cut is not None:  # the cut token (forbidden: p = 0) is rejected; draw the residual
                return False, sampling.speculative_accept(p, cut.q, cut.token, self.rng)[1]
            return False, p.sample(self.rng)
        q = draft.dists[i] if draft.dists is not None else sampling.point_mass(d[i])
        return sampling.speculative_accept(p, q, d[i], self.rng)

    def _verify(self, committed: list[int], pending: list[int], forced: list[int], draft: Draft,
                cut: _Cut | None, limit: int) -> _Verdict:
        """Run the target on pending + forced + draft in one pass and judge the draft.

        Logits come from the last of pending + forced on: row i chooses the token after
        forced + draft[:i]. Under a grammar each accepted token is consumed as it is accepted; at a
        row after accepted tokens the grammar may force tokens (``limit`` at most), which are emitted
        instead of the target's choice.
        """
        d = draft.tokens
        g = self.grammar
        base = self.target.n_past
        batch = [*pending, *forced, *d]
        pad = 0
        if self.cost is not None:
            room = min(self.target.n_ctx - base, self.target.n_batch)
            pad = self.cost.verify_batch(len(batch), room) - len(batch)
        # Padded to a larger batch this machine runs faster: copies of the last token, whose rows are
        # never read. Their logits are computed too: for a part of a batch's rows the output layer can
        # take the slow kernel the padding avoids (a Q8_0 target: 212 ms for 5 of 8 rows, 183 for 8).
        self.target.decode([*batch, *[batch[-1]] * pad], logits_for=len(d) + 1 + pad)
        self.rec.record_pass(len(batch) + pad)
        before = committed + forced if forced and self.params.repeat_penalty != 1.0 else committed
        choices: list[int] = []
        verdict = _Verdict(0, [])
        i = 0
        while i <= len(d):
            if g is not None and g.done:  # the grammar is complete: the reply ends here
                break
            block = self._forced(limit - i)  # none at row 0, unless the step's own block was cut short
            if block:
                assert g is not None
                same = 0
                while same < len(block) and i + same < len(d) and d[i + same] == block[same]:
                    same += 1
                i += same  # draft tokens equal to the forced ones: accepted, and counted as drafted
                g.forced_tokens -= same
                if same < len(block):
                    verdict.tail = block[same:]
                    break
                continue
            ok, tok = self._choose(i, self._history(before, d, i), draft, cut, choices)
            if not ok:
                verdict.tail = [tok]
                if g is not None:
                    g.consume([tok])
                break
            if g is not None:
                g.consume(d[i : i + 1])
            i += 1
        verdict.accepted = i
        # Keep pending + forced + the accepted drafts; the rest leaves the cache now.
        self.target.truncate(base + len(pending) + len(forced) + i)
        if self.trace is not None:
            self.trace([[*pending, *forced][-1], *d], choices, i)
        return verdict

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
        g = self.grammar
        if g is not None and g.done:  # a grammar nothing but the empty reply matches
            self.finish_reason = FinishReason.STOP
            return
        # Tokens for the batch beyond a draft (a lookup draft may run to DRAFT_TOKENS_MAX): pending and
        # forced blocks share the rest.
        block_limit = max(1, (target.n_batch - 1 - DRAFT_TOKENS_MAX) // 2)
        # A grammar that forces the reply's first tokens: they need no choice.
        pending = self._forced(min(block_limit, self.max_tokens, target.n_ctx - target.n_past))
        first_forced = len(pending)
        if not pending:
            pending = [self._pick(0, self._history(history, (), 0))]
            if g is not None:
                g.consume(pending)
        if self.drafter is not None:
            self.drafter.prefill(prompt, self.should_cancel)
        rec.prompt_seconds = time.perf_counter() - t0
        gen_start = time.perf_counter()

        if self.is_eog(pending[0]):
            self.finish_reason = FinishReason.STOP
            return
        committed = history
        committed.extend(pending)
        rec.generated_tokens = len(pending)
        rec.generation_seconds = time.perf_counter() - gen_start
        self._grammar_stats()
        yield Step(list(pending), 0, first_forced)
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
            room = target.n_ctx - target.n_past - len(pending)  # positions left after pending
            if room < 0:
                self.finish_reason = FinishReason.CONTEXT
                return
            remaining = self.max_tokens - rec.generated_tokens
            forced = self._forced(min(room, remaining, block_limit))
            if forced and g is not None and (g.done or len(forced) >= min(room, remaining)):
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
            rows = self.policy.look_back_rows() if n == 0 and self.drafter is not None else 0
            if rows > 0:
                # The policy asks what drafting would have got over the tokens the drafter sat out
                # (the end of a pause): the drafter catches up on them and says, this step is plain.
                td = time.perf_counter()
                looked = (self.drafter.look_back(ahead, rows, self.params)
                          if isinstance(self.drafter, LooksBack) else [])
                draft_s = draft.catch_up_seconds = time.perf_counter() - td
                self.policy.observe_look_back(looked)
            if n > 0:
                assert self.drafter is not None
                td = time.perf_counter()
                draft = self.drafter.propose(ahead, n, self.params, self.rng, self.policy.stop_rule())
                draft_s = time.perf_counter() - td
            cut = self._cut(draft)
            tv = time.perf_counter()
            verdict = self._verify(committed, pending, forced, draft, cut,
                                   min(room, remaining, block_limit))
            verify_s = time.perf_counter() - tv
            accepted = verdict.accepted
            emitted = [*forced, *draft.tokens[:accepted], *verdict.tail]

            rec.verify_passes += 1
            rec.draft_seconds += draft_s
            rec.catch_up_seconds += draft.catch_up_seconds
            rec.draft_passes += draft.passes
            if draft.tokens:
                rec.record_draft(len(draft.tokens), accepted)
            step_draft_s = draft_s - draft.catch_up_seconds
            # A batch with more than the last token before its draft is longer than the draft: its
            # time would teach the policy a wrong cost for that length, so it is not a measurement.
            if len(pending) == 1 and not forced:
                self.policy.observe(len(draft.tokens), accepted, step_draft_s, verify_s, draft.source,
                                    draft.confidence, draft.catch_up_seconds, draft.passes)
                self._report_target(draft, accepted)
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
            pending = verdict.tail
            rec.generated_tokens += len(out)
            rec.generation_seconds = time.perf_counter() - gen_start
            if out:
                n_forced = min(len(forced), len(out))
                yield Step(out, min(accepted, len(out) - n_forced), n_forced)
            if stop or (g is not None and g.done):
                self.finish_reason = FinishReason.STOP
                return
            if not pending:  # cannot happen without a grammar: every step emits the target's token
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
