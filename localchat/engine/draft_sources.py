"""Where draft tokens come from, behind one small interface (``DraftSource``).

The engine's draft sources make the tokens; the catalog's ``DrafterEntry``
(catalog/drafters.py) only says which one a target gets.

- ``ModelDrafter``: a small GGUF with the target's vocabulary. It keeps its own
  KV cache in step with the target's accepted tokens: before drafting it drops
  whatever it holds past the common prefix and evaluates the new tokens in one
  batch. That one rule covers partial acceptance (rejected drafts dropped),
  full acceptance (the last draft token was never evaluated by the drafter and
  is simply part of the catch-up batch) and a new chat turn. Two new tokens are
  the exception: where this machine reads them faster one at a time (a CPU's
  batch of two can cost nearly three single passes), they are read so
  (``ModelDrafter._catch_up_two``).
- ``NgramDrafter``: prompt lookup. The longest recent n-gram of the context
  that also occurred earlier proposes the tokens that followed it. Free, and
  strong on code edits, summaries and quoting.
- ``CombinedDrafter``: n-gram when the context has a match, otherwise the model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from localchat.engine import sampling
from localchat.engine.backend import Context, DecodeAborted
from localchat.engine.stop_rule import StopRule
from localchat.engine.types import SamplingParams
from localchat.settings.options import DRAFT_TOKENS_MAX


@dataclass(frozen=True)
class Declined:
    """The token a stop rule declined to draft, right after the kept ones.

    Verification computes the target's choice at its position anyway (the token after the kept
    ones, or the first of the step), so whether it would have been accepted is known for free
    whenever every kept token was. Without it a confidence bin whose tokens are never drafted
    would never learn that they are accepted more often than the drafter's confidence says.
    """

    source: str
    position: int  # = the number of kept tokens
    token: int
    confidence: float
    q: float  # the drafter's probability of ``token`` (speculative sampling's q)


@dataclass
class Draft:
    tokens: list[int] = field(default_factory=list)
    # Per-token drafting distribution q (sampling mode); None means a point mass.
    dists: list[sampling.Dist] | None = None
    source: str = ""
    # Time spent catching the drafter up in one batch on tokens it did not see (a stretch after a
    # pause or n-gram drafts, or two tokens read as a batch): kept out of per-look cost figures.
    catch_up_seconds: float = 0.0
    # Single-token drafter passes this draft paid for (looks at a next token; a catch-up batch is timed
    # in ``catch_up_seconds`` instead): what a benchmark models the drafter's cost from (bench/modelled.py).
    passes: int = 0
    # The draft model's top probability for each drafted token (its confidence).
    confidence: list[float] = field(default_factory=list)
    declined: Declined | None = None


class DraftSource(Protocol):
    """What the decode loop drafts with (``ModelDrafter``, ``NgramDrafter``, ``CombinedDrafter``).

    The catalog's ``DrafterEntry`` says which of these a target gets; this is the thing that
    proposes the tokens.
    """

    name: str

    def prefill(self, tokens: Sequence[int], should_cancel: Callable[[], bool]) -> None: ...

    def propose(
        self,
        tokens: Sequence[int],
        n: int,
        params: SamplingParams,
        rng: np.random.Generator,
        stop: StopRule | None = None,
    ) -> Draft: ...

    def close(self) -> None: ...


@runtime_checkable
class MixingSource(DraftSource, Protocol):
    """A source that picks between sources per step (``CombinedDrafter``) and learns which wins.

    The decode loop sets ``limit`` (how far a free lookup draft may go past the asked length)
    before each step and reports each verdict to ``observe``.
    """

    limit: int

    def observe(self, source: str, drafted: int, accepted: int) -> None: ...


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


PROGRESS_CHUNK = 128  # tokens per decode call while someone watches a long prompt being read
PROGRESS_MIN = 2 * PROGRESS_CHUNK  # shorter prompts are read in one go, without progress


def _cut_to_prefix(ctx: Context, tokens: Sequence[int]) -> list[int]:
    """Cut ``ctx`` back to its common prefix with ``tokens`` (short of the last token, whose logits
    are needed) and return the tokens it still has to read."""
    ctx.truncate(min(common_prefix(ctx.tokens, tokens), len(tokens) - 1))
    return list(tokens[ctx.n_past :])  # truncate may have cleared everything (non-removable caches)


def sync_context(
    ctx: Context,
    tokens: Sequence[int],
    should_cancel: Callable[[], bool] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> int:
    """Make ``ctx`` hold exactly ``tokens`` with logits for the last one; returns tokens evaluated.

    The common prefix with what the cache already holds is kept; at least the
    last token is re-evaluated so that its logits are available. ``on_progress(done, total)``
    hears, for a long read, after each chunk how many of the tokens to read are read.
    """
    todo = _cut_to_prefix(ctx, tokens)
    watched = on_progress is not None and len(todo) >= PROGRESS_MIN
    # Smaller chunks while watched: a CPU reads ~128 tokens per call about as fast as 512.
    _read(ctx, todo, min(ctx.n_batch, PROGRESS_CHUNK) if watched else ctx.n_batch, should_cancel,
          on_progress if watched else None)
    return len(todo)


def read_prompt(
    ctx: Context,
    tokens: Sequence[int],
    should_cancel: Callable[[], bool] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> int:
    """Make ``ctx`` hold a reply's prompt, with logits for its last token; returns tokens evaluated.

    Without a read grid (``ctx.read_grid`` 0) this is ``sync_context``: every cell
    the cache shares with the prompt is kept. With one, the cells are the ones a
    read from scratch computes, so the reply is the one it would be with the
    history read again: llama.cpp's kernels depend on the number of tokens in a
    decode (on a CPU, flash attention takes another algorithm from 64 tokens on,
    and a single token another matrix product), so a cell read in a chunk of
    another size, or written while a reply was generated, holds slightly other
    numbers, and a near-tie later can go the other way. Only ``ctx.fresh`` cells
    are kept, cut back to a grid line, and the rest is read in chunks of the grid
    aligned to positions 0, G, 2G..., the chunks a read from scratch reads.
    """
    grid = ctx.read_grid
    if grid <= 0:
        return sync_context(ctx, tokens, should_cancel, on_progress)
    keep = max(0, min(common_prefix(ctx.tokens, tokens), len(tokens) - 1, ctx.fresh))
    ctx.truncate(keep - keep % grid)
    keep = ctx.n_past
    todo = list(tokens[keep:])
    watched = on_progress is not None and len(todo) >= PROGRESS_MIN
    try:
        _read(ctx, todo, grid, should_cancel, on_progress if watched else None)
    finally:
        # Every whole chunk read is what a read from scratch reads; a shorter last one is not.
        ctx.fresh = keep + (ctx.n_past - keep) // grid * grid
    return len(todo)


def _read(
    ctx: Context,
    todo: Sequence[int],
    step: int,
    should_cancel: Callable[[], bool] | None,
    on_progress: Callable[[int, int], None] | None,
) -> None:
    """Decode ``todo`` after what ``ctx`` holds, ``step`` tokens a decode, until done or cancelled."""
    # A long prompt can take seconds per batch on a CPU: let cancel stop a batch part-way.
    aborting = should_cancel is not None and len(todo) > 1
    if aborting:
        ctx.set_abort(should_cancel)
    try:
        if on_progress is not None:
            on_progress(0, len(todo))
        for start in range(0, len(todo), step):
            if should_cancel is not None and should_cancel():
                break
            ctx.decode(todo[start : start + step], logits_for="last")
            if on_progress is not None:
                on_progress(min(start + step, len(todo)), len(todo))
    except DecodeAborted:
        pass
    finally:
        if aborting:
            ctx.set_abort(None)


class ModelDrafter:
    """Drafts with a small model.

    A draft stops early when the drafter's top probability falls below ``p_min``
    or, when a ``StopRule`` is given (adaptive speculation), when the rule says
    the next token no longer pays for its cost.
    """

    # In step, the drafter is at most a couple of tokens behind the target (the
    # target's own token, the last draft token); more means it sat out a stretch.
    CATCH_UP = 8
    PAIR_RECHECK = 32  # when two single passes read two tokens faster, one in this many is batched
    # Two single passes replace the batch only where it costs clearly more than they do: two calls
    # cost more than their timed passes, and where the two are level (2 threads here: 31.3 ms against
    # 2 x 15.0) a switch would follow the noise of the two averages.
    PAIR_MARGIN = 1.1

    def __init__(self, ctx: Context, name: str, p_min: float = 0.5) -> None:
        self.ctx = ctx
        self.name = name
        self.p_min = p_min
        self.decode_seconds: float | None = None  # moving average of one single-token pass
        self.pair_seconds: float | None = None  # moving average of one batched pass of two tokens
        self._pairs = 0  # times the drafter was two tokens behind
        self._passes = 0  # short passes of the draft being made

    def _timed(self, run: Callable[[], object]) -> None:
        """Run one short drafter pass (a token or two) and fold its time into ``decode_seconds``."""
        self._passes += 1
        t0 = time.perf_counter()
        run()
        dt = time.perf_counter() - t0
        self.decode_seconds = dt if self.decode_seconds is None else self.decode_seconds + 0.1 * (
            dt - self.decode_seconds)

    def _catch_up_two(self, tokens: Sequence[int]) -> float:
        """Read the two tokens the drafter is behind: as one batched pass or as two single-token
        passes, whichever this machine runs faster. Returns the seconds of a batched pass (timed
        apart, as a catch-up: it is not what one look at a next token costs), 0.0 for single passes.

        On a GPU a batch of two costs about one pass. On a CPU a quantized drafter can leave its
        one-token kernel for a batch of two, which then costs well over two single passes (a 0.5B
        Q4_K_M drafter with 1 thread: 54-56 ms against 19-22 ms); folded into ``decode_seconds``,
        such batches also made every look seem dearer than it is. The batch is timed the first time
        and every ``PAIR_RECHECK``-th time after, so a change in its cost is seen; single passes
        replace it where it costs ``PAIR_MARGIN`` times two of them or more.
        """
        self._pairs += 1
        single, pair = self.decode_seconds, self.pair_seconds
        if (single is not None and pair is not None and pair > self.PAIR_MARGIN * 2 * single
                and self._pairs % self.PAIR_RECHECK):
            self._timed(lambda: sync_context(self.ctx, tokens[:-1]))
            self._decode_one(tokens[-1])
            return 0.0
        t0 = time.perf_counter()
        sync_context(self.ctx, tokens)
        dt = time.perf_counter() - t0
        self.pair_seconds = dt if pair is None else pair + 0.2 * (dt - pair)
        return dt

    def _decode_one(self, tok: int) -> None:
        self._timed(lambda: self.ctx.decode([tok], logits_for="last"))

    def prefill(self, tokens: Sequence[int], should_cancel: Callable[[], bool]) -> None:
        read_prompt(self.ctx, tokens, should_cancel)

    def propose(
        self,
        tokens: Sequence[int],
        n: int,
        params: SamplingParams,
        rng: np.random.Generator,
        stop: StopRule | None = None,
    ) -> Draft:
        ctx = self.ctx
        if len(tokens) + n >= ctx.n_ctx:
            n = ctx.n_ctx - len(tokens) - 1
        if n <= 0:
            return Draft(source=self.name)
        catch_up = 0.0
        self._passes = 0
        behind = len(tokens) - common_prefix(ctx.tokens, tokens)
        if behind > self.CATCH_UP:
            t0 = time.perf_counter()
            sync_context(ctx, tokens[:-1])
            catch_up = time.perf_counter() - t0
            self._decode_one(tokens[-1])
        elif behind == 1 and ctx.n_past == len(tokens) - 1:
            self._decode_one(tokens[-1])  # the usual step: only the target's own token is new
        elif behind > 2:
            # It sat out a few plain steps (looks skipped, see AdaptivePolicy): one batched pass,
            # not a single-token pass, so kept out of ``decode_seconds``.
            t0 = time.perf_counter()
            sync_context(ctx, tokens)
            catch_up = time.perf_counter() - t0
        elif behind == 2:  # the last draft token and the target's own, or one skipped look
            catch_up = self._catch_up_two(tokens)
        else:  # one new token after a rejection (the rejected draft tokens dropped): one pass
            self._timed(lambda: sync_context(ctx, tokens))
        out: list[int] = []
        confs: list[float] = []
        dists: list[sampling.Dist] | None = None if params.greedy else []
        history = list(tokens)
        declined: Declined | None = None
        for i in range(n):
            logits = ctx.logits(0)
            if params.greedy:
                tok = sampling.greedy_token(logits, history, params)
                conf = q_tok = sampling.top_probability(logits)
            else:
                q = sampling.distribution(logits, history, params)
                tok = q.sample(rng)
                conf, q_tok = q.top()[1], q.prob(tok)
            keep = stop.take(i, conf) if stop is not None else (conf >= self.p_min or i == 0)
            if not keep:
                if stop is not None:
                    declined = Declined(self.name, i, tok, conf, q_tok)
                break
            if dists is not None:
                dists.append(q)
            out.append(tok)
            confs.append(conf)
            history.append(tok)
            if ctx.model.is_eog(tok) or i == n - 1:
                break
            # Not yet timed (the first draft after a full re-sync): one token, then it is.
            if stop is not None and not stop.look_further(i, self.decode_seconds or float("inf")):
                break
            self._decode_one(tok)
        return Draft(out, dists, self.name, catch_up, self._passes, confs, declined)

    def look_back(self, tokens: Sequence[int], rows: int, params: SamplingParams) -> list[tuple[float, bool]]:
        """Catch up on ``tokens`` (tokens it sat out: a pause) in one batch, and say for up to
        ``rows`` of the last of them what a draft started there would have got: at each position, the
        drafter's confidence and whether its greedy choice was the token that followed. Under
        greedy decoding a draft of ``k`` tokens from a position is accepted for exactly as many of
        them as such choices run on unbroken from it, so these are the verdicts drafting would have
        had, at the price of the rows' logits in a batch that had to be read anyway (0.09-0.15 of a
        single drafter pass per row, measured on a 0.5B Q4_K_M drafter), and no verification.
        Nothing (the tokens still read) when sampling, where acceptance is not a match of choices."""
        ctx = self.ctx
        todo = _cut_to_prefix(ctx, tokens)
        k = min(rows, len(todo)) if params.greedy else 0
        if k < 2:
            _read(ctx, todo, ctx.n_batch, None, None)
            return []
        last = min(len(todo), ctx.n_batch)
        _read(ctx, todo[:-last], ctx.n_batch, None, None)
        ctx.decode(todo[-last:], logits_for=k)
        base = len(tokens) - k
        out = []
        for r in range(k - 1):  # the last row predicts the token not yet written
            logits = ctx.logits(r)
            pos = base + r
            choice = sampling.greedy_token(logits, tokens[: pos + 1], params)
            out.append((sampling.top_probability(logits), choice == tokens[pos + 1]))
        return out

    def close(self) -> None:
        self.ctx.close()


@runtime_checkable
class LooksBack(DraftSource, Protocol):
    """A source that can say what it would have drafted over tokens it sat out
    (``ModelDrafter.look_back``)."""

    def look_back(
        self, tokens: Sequence[int], rows: int, params: SamplingParams
    ) -> list[tuple[float, bool]]: ...


def match_confidence(size: int) -> float:
    """What a lookup draft from an n-gram match of ``size`` tokens is taken to be worth before its
    own acceptance is known (the prior of its calibration bin): 0.575 for 3 tokens to 0.95 for 8."""
    return min(0.95, 0.35 + 0.075 * size)


class NgramDrafter:
    """Prompt lookup: continue the context the way it continued after the same n-gram before."""

    name = "n-gram"

    def __init__(self, max_ngram: int = 8, min_ngram: int = 2) -> None:
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self._seq: list[int] = []
        # For each n: n-gram -> index just after its latest occurrence that has a continuation.
        self._index: dict[int, dict[tuple[int, ...], int]] = {}

    def _rebuild(self, tokens: Sequence[int]) -> None:
        self._seq = []
        self._index = {n: {} for n in range(self.min_ngram, self.max_ngram + 1)}
        self._extend(tokens)

    def _extend(self, tokens: Sequence[int]) -> None:
        seq = self._seq
        for tok in tokens:
            j = len(seq)  # tok lands at index j: every n-gram ending at j-1 now has a continuation
            for n, table in self._index.items():
                if j >= n:
                    table[tuple(seq[j - n : j])] = j
            seq.append(tok)

    def _sync(self, tokens: Sequence[int]) -> None:
        m = len(self._seq)
        grows = len(tokens) >= m and (m == 0 or (tokens[m - 1] == self._seq[-1] and tokens[:m] == self._seq))
        if self._index and grows:
            self._extend(tokens[m:])
        else:
            self._rebuild(tokens)

    def prefill(self, tokens: Sequence[int], should_cancel: Callable[[], bool]) -> None:
        self._rebuild(tokens)

    def match(self, tokens: Sequence[int]) -> tuple[int, int]:
        """(n-gram size, start of continuation) of the longest match, or (0, -1)."""
        self._sync(tokens)
        length = len(tokens)
        for n in range(self.max_ngram, self.min_ngram - 1, -1):
            if length < n:
                continue
            pos = self._index[n].get(tuple(tokens[length - n :]))
            if pos is not None:
                return n, pos
        return 0, -1

    def propose(
        self,
        tokens: Sequence[int],
        n: int,
        params: SamplingParams,
        rng: np.random.Generator,
        stop: StopRule | None = None,
    ) -> Draft:
        size, pos = self.match(tokens)
        # Under a stop rule (lookup on its own, adaptive) a step with nothing worth drafting cost
        # nothing either: it is a plain step (no source), not a speculative one that earned nothing.
        nothing = Draft(source="" if stop is not None else self.name)
        if size == 0:
            return nothing
        cont = list(tokens[pos : pos + n])
        confidence: list[float] = []
        if stop is not None:
            # The match's length stands in for a confidence: a long match is a reply that copies.
            conf = match_confidence(size)
            cont = cont[: stop.plan([conf] * len(cont))]
            if not cont:
                return nothing
            confidence = [conf] * len(cont)
        return Draft(cont, None if params.greedy else [sampling.point_mass(t) for t in cont], self.name,
                     confidence=confidence)

    def close(self) -> None:
        pass


class CombinedDrafter:
    """Per step: n-gram lookup when the context repeats itself and lookup drafts have been
    accepted about as well as the model's in this reply, otherwise the draft model.

    Lookup drafts are free but, on text that merely shares short phrases with the
    prompt, often wrong; the model's are paid for but usually right. Both
    acceptance rates are tracked (``observe``), and lookup gets a retry now and
    then after it lost the lead, so it comes back when the reply starts copying.
    Under a stop rule (adaptive) a lookup draft is cut where verifying it costs more
    than its tokens are likely to earn, on lookup's record in the reply
    (``lookup_chance``, ``StopRule.plan_lookup``): free to make is not free to verify.
    """

    RETRY_EVERY = 16
    MIN_MATCH = 3  # n-gram size below which a lookup draft is more often wrong than right
    MAX_LOOKUP = DRAFT_TOKENS_MAX
    LOOKUP_START = 4
    LOOKUP_PRIOR = 0.7  # a lookup token's chance before the reply's own verdicts
    LOOKUP_PRIOR_WEIGHT = 3.0

    def __init__(self, model: ModelDrafter, ngram: NgramDrafter, min_match: int = MIN_MATCH) -> None:
        self.model = model
        self.ngram = ngram
        self.min_match = min_match
        self.name = f"{model.name} + n-gram"
        self.limit = self.MAX_LOOKUP  # set by the decode loop each step: context room, tokens left
        self._start_reply()

    def _start_reply(self) -> None:
        # A new reply may copy where the last one did not (an edit after a story):
        # each reply starts from the priors instead of the last reply's verdict.
        self.ngram_rate = 0.7  # moving averages of accepted/drafted, with optimistic priors
        self.model_rate = 0.7
        self._passed_over = 0
        self._lookup_len = 0  # doubles with each lookup draft accepted whole, 0 after a miss
        # This reply's lookup drafts, per token: accepted, and runs ended by a rejection.
        self._lookup_accepted, self._lookup_rejected = 0, 0
        # A lookup draft the plan cut to nothing: (where it would have started, its tokens), judged
        # against the reply's tokens at the next step (``_judge_unverified``).
        self._unverified: tuple[int, list[int]] | None = None

    def prefill(self, tokens: Sequence[int], should_cancel: Callable[[], bool]) -> None:
        self._start_reply()
        self.model.prefill(tokens, should_cancel)
        self.ngram.prefill(tokens, should_cancel)

    def propose(
        self,
        tokens: Sequence[int],
        n: int,
        params: SamplingParams,
        rng: np.random.Generator,
        stop: StopRule | None = None,
    ) -> Draft:
        # Lookup drafts cost nothing to make: while they are accepted whole (a reply
        # that copies), each one goes twice as far, past the length chosen for the model.
        # With a stop rule the model's length is open-ended, so lookup starts from its own.
        start = min(n, self.LOOKUP_START) if stop is not None else n
        self._judge_unverified(tokens)
        size, _ = self.ngram.match(tokens)
        matched = size >= self.min_match
        tried = False  # lookup was tried at this step and came to nothing: the same again would too
        if matched:
            if self.ngram_rate >= self.model_rate - 0.1 or self._passed_over >= self.RETRY_EVERY:
                self._passed_over = 0
                draft = self._lookup(tokens, start, params, rng, stop)
                if draft is not None:
                    return draft
                tried = True
            else:
                self._passed_over += 1
        draft = self.model.propose(tokens, n, params, rng, stop)
        if not draft.tokens and matched and not tried:
            # The model found nothing worth drafting (its stop rule declined): a lookup
            # draft costs only its verification, so where that pays it is better than a plain step.
            lookup = self._lookup(tokens, start, params, rng, stop)
            if lookup is not None:
                lookup.catch_up_seconds = draft.catch_up_seconds
                lookup.passes = draft.passes
                lookup.declined = draft.declined  # at position 0: judged whatever the lookup draft
                return lookup
        return draft

    def lookup_chance(self) -> float:
        """The chance that this reply's next lookup token is accepted, those before it accepted: its
        lookup drafts' tokens accepted over those and the runs a rejection ended, from a prior of
        ``LOOKUP_PRIOR`` worth ``LOOKUP_PRIOR_WEIGHT`` tokens."""
        a, r = self._lookup_accepted, self._lookup_rejected
        return (a + self.LOOKUP_PRIOR * self.LOOKUP_PRIOR_WEIGHT) / (a + r + self.LOOKUP_PRIOR_WEIGHT)

    def _judge_unverified(self, tokens: Sequence[int]) -> None:
        """Count the lookup draft the plan cut to nothing at the last step as verification would have:
        its tokens against those the reply went on with. A reply whose first lookups missed must still
        be able to show that it copies now (structured output repeating its keys, an edit past its
        opening sentence): a draft never verified is never judged, and its record would stay low for
        the rest of the reply. Free: the tokens are known."""
        if self._unverified is None:
            return
        at, proposed = self._unverified
        self._unverified = None
        written = tokens[at : at + len(proposed)]
        accepted = common_prefix(written, proposed)
        self._lookup_accepted += accepted
        self._lookup_rejected += int(accepted < len(written))

    def _lookup(self, tokens: Sequence[int], start: int, params: SamplingParams,
                rng: np.random.Generator, stop: StopRule | None = None) -> Draft | None:
        lookup_n = min(max(start, self._lookup_len), self.limit)
        draft = self.ngram.propose(tokens, lookup_n, params, rng)
        if stop is not None and draft.tokens:
            # Free to make, not to verify (``StopRule.plan_lookup``).
            keep = stop.plan_lookup([self.lookup_chance()] * len(draft.tokens))
            if not keep:
                self._unverified = (len(tokens), list(draft.tokens))
                return None
            draft.tokens = draft.tokens[:keep]
            if draft.dists is not None:
                draft.dists = draft.dists[:keep]
        return draft if len(draft.tokens) >= min(start, 2) else None

    def observe(self, source: str, drafted: int, accepted: int) -> None:
        if drafted <= 0:
            return
        rate = accepted / drafted
        if source == self.ngram.name:
            self.ngram_rate += 0.2 * (rate - self.ngram_rate)
            self._lookup_accepted += accepted
            self._lookup_rejected += int(accepted < drafted)
            whole = accepted == drafted
            self._lookup_len = min(self.MAX_LOOKUP, 2 * max(self._lookup_len, drafted)) if whole else 0
        else:
            self.model_rate += 0.1 * (rate - self.model_rate)

    def look_back(self, tokens: Sequence[int], rows: int, params: SamplingParams) -> list[tuple[float, bool]]:
        return self.model.look_back(tokens, rows, params)

    def close(self) -> None:
        self.model.close()


class SwitchingDrafter:
    """The draft model (with lookup where the context repeats: ``CombinedDrafter``) or lookup alone,
    whichever adaptive speculation's ``SwitchingPolicy`` (engine/adaptive.py) chooses step by step
    (``use_lookup``). Both read the prompt, the draft model included: so that it can look back on the
    tokens lookup wrote at the price of one batch, and take over. It owns neither drafter."""

    def __init__(self, combined: CombinedDrafter, lookup: NgramDrafter, lookup_first: bool) -> None:
        self.combined, self.lookup = combined, lookup
        self.lookup_first = lookup_first  # the reply starts drafting by lookup alone
        self.current: DraftSource = lookup if lookup_first else combined
        self.name = f"{combined.name} or {lookup.name}"

    def use_lookup(self, on: bool) -> None:
        self.current = self.lookup if on else self.combined

    @property
    def limit(self) -> int:
        return self.combined.limit

    @limit.setter
    def limit(self, value: int) -> None:
        self.combined.limit = value

    def prefill(self, tokens: Sequence[int], should_cancel: Callable[[], bool]) -> None:
        self.combined.prefill(tokens, should_cancel)
        self.lookup.prefill(tokens, should_cancel)

    def propose(
        self,
        tokens: Sequence[int],
        n: int,
        params: SamplingParams,
        rng: np.random.Generator,
        stop: StopRule | None = None,
    ) -> Draft:
        return self.current.propose(tokens, n, params, rng, stop)

    def observe(self, source: str, drafted: int, accepted: int) -> None:
        if self.current is self.combined:
            self.combined.observe(source, drafted, accepted)

    def look_back(self, tokens: Sequence[int], rows: int, params: SamplingParams) -> list[tuple[float, bool]]:
        """The draft model's look back (lookup alone cannot say: nothing)."""
        if self.current is self.combined:
            return self.combined.look_back(tokens, rows, params)
        return []

    def close(self) -> None:
        pass
