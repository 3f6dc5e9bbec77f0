"""Speculation policies replayed on recorded replies and a cost curve: every fixed length and
adaptive speculation, side by side, without the machine's noise.

    python tools/adaptive_replay.py record --model T.gguf --draft D.gguf --prompts heldout2
        [--limit 4] [--max-tokens 96] [--threads 1] --out REC.json
    python tools/adaptive_replay.py replay REC.json [--curve CURVE.json] [--fixed 1,2,3,4,5,6,7,8]
        [--adaptive adaptive,adaptive-nofloor]

``record`` answers each prompt with the target alone (greedy: the text every policy must write), then
reads prompt and reply with the draft model in one batch, keeping at every position of the reply the
drafter's greedy token and its confidence; where that token is not the reply's, it also keeps the few
tokens the drafter would draft after it (its draft goes on past a wrong token until its confidence
falls), and the target's confidence in each token it wrote (what a pause that listens to the target
hears). With those, what the drafter proposes at any point of the reply is known without running it.
It also keeps this machine's cost curve: the target's verification time and the drafter's decode time
by batch size (median of 9 rounds that time every size in turn; the drafter's up to the 64-token
batches that catch it up after a pause), and the sizes the engine's
calibration at load measured (none where it was declined).

``replay`` runs the engine's own decode loop (engine/speculative.py ``DecodeLoop``), drafters
(``ModelDrafter``, n-gram lookup, their combination) and policies (``FixedPolicy``,
``AdaptivePolicy``) on those recordings, with a target and a drafter that answer from them and a
clock that advances by the curve's cost of each pass. Each policy runs the prompts in order in one
pipeline of its own (a fresh install: costs calibrated at load, the pair's acceptance learnt reply
after reply), as ``localchat bench --fresh`` runs them; with ``--saved``, from the speculation profile
(engine/profile.py) that a first run over the same prompts leaves, as a later process loads it.
``--order SEED`` answers the prompts shuffled (the recorded order is category by category): what a
policy learns on one reply carries to the next, so a category's figure moves with what came before it.
Printed per prompt and category: each policy's speed over plain decoding on the curve, the best fixed
length per prompt in hindsight, and adaptive / best fixed. ``--curve`` replays on another recording's
curve (another thread count or machine): the text is this recording's, the costs that curve's. An
adaptive mode written ``adaptive/model`` or ``adaptive/lookup`` drafts with that drafter for every reply
instead of the engine's choice (``DrafterChoice``), and ``adaptive/first`` starts every reply as the
engine does where it chose lookup alone (the draft model may take over within it); with the first two,
``adaptive/either`` is the faster of the two per reply, a choice made in hindsight. ``--bound`` adds the
hindsight bound (``Hindsight``): the fastest any policy drafting with the draft model could have been,
knowing where the drafter is right. ``--positions`` adds, for each adaptive mode, the stop rule's
predicted chance of acceptance by draft position against the share of those tokens accepted
(``positions_table``); ``--losses`` where each adaptive mode's time went against plain decoding, by kind
of step (``losses_table``).
``--switch N,H,M`` adds ``adaptive/switch``, the study that preceded the engine's ``SwitchingPolicy``
(``Switch``): where the engine chose lookup alone for a reply, the draft model takes over after N tokens
if the drafter's answers over them show drafting paying by M and H tokens of that gain pay its
catch-up. Run it with ``adaptive-lookuponly`` for the engine's choice before. ``--hold T,M[,C]``
replays the engine's rule with another hold, margin and target confidence.

A replay is a model of a run: the drafter's confidences after a wrong token are kept only while at
least ``CHAIN_MIN`` (lower ones end every draft anyway) and pass times are the curve's medians. Its
figures tell policies apart exactly, prompt by prompt; a claim about speed still needs a measured
run (``tools/adaptive_matrix.py``).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from localchat.bench.prompts import select  # noqa: E402  (after the checkout is on the path)
from localchat.engine.draft_sources import common_prefix  # noqa: E402

CHAIN_LEN = 16  # tokens kept after a wrong drafted token (a draft is at most DRAFT_TOKENS_MAX)
CHAIN_MIN = 0.2  # ... while the drafter's confidence is at least this
VERIFY_SIZES = range(1, 18)
K = TypeVar("K")
DRAFT_SIZES = (*range(1, 10), 12, 16, 24, 32, 48, 64)  # past 9: the drafter's catch-up batches


# -- recording --------------------------------------------------------------------------------------
def medians_ms(runs: dict[K, Callable[[], object]], rounds: int = 9,
               prepare: Callable[[], object] | None = None) -> dict[K, float]:
    """Median milliseconds of each run, timed in ``rounds`` rounds that take every run in turn, each
    after an untimed ``prepare`` where given (the context cut back to where the runs start). Also used
    by tools/drafter_batches.py.

    Interleaved, as decoding interleaves them: on a 2-core machine with 2 threads, nine single-token
    passes timed back to back took 78-91 ms each, but 61 ms each between passes of other sizes, and
    a run's own verification passes 56-66 ms (docs/BENCHMARKS.md).
    """
    seen: dict[K, list[float]] = {key: [] for key in runs}
    for _ in range(rounds):
        for key, run in runs.items():
            if prepare is not None:
                prepare()
            t0 = time.perf_counter()
            run()
            seen[key].append(time.perf_counter() - t0)
    return {key: statistics.median(v) * 1000 for key, v in seen.items()}


def record(args: argparse.Namespace) -> None:
    os.environ.setdefault("LOCALCHAT_PROFILES_DIR", tempfile.mkdtemp())  # never the user's profiles
    from localchat.bench.prompts import prompts_from
    from localchat.engine import sampling
    from localchat.engine.adaptive import FixedPolicy
    from localchat.engine.draft_sources import sync_context
    from localchat.engine.engine import Engine
    from localchat.engine.speculative import DecodeLoop
    from localchat.engine.stats import StatsRecorder
    from localchat.engine.types import ChatMessage, EngineConfig, FinishReason, SamplingParams

    prompts = select([p for p in prompts_from(args.prompts) if not p.schema], None, args.limit)
    cfg = EngineConfig(args.model, draft_path=args.draft, n_ctx=2048, use_profile=False, calibrate=True,
                       state_memory_bytes=0, n_threads=args.threads)
    out: dict[str, Any] = {"model": Path(args.model).name, "draft": Path(args.draft).name,
                           "threads": args.threads, "max_tokens": args.max_tokens, "prompts": []}
    with Engine(cfg) as eng:
        md = eng.model_drafter
        if md is None:
            raise SystemExit(f"the draft model did not load: {eng.draft_problem}")
        dctx, tctx = md.ctx, eng.target
        # The curve: the target's and the drafter's decode by batch size after a 150-token context
        # (median of 9 rounds of every size), and the sizes the calibration at load measured (what the
        # policy knows of the curve before its first reply).
        toks = eng.target_model.tokenize("def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1)"
                                         " + fibonacci(n - 2)\n" * 8, add_special=False)

        def batch(ctx: Any, b: int) -> Callable[[], object]:
            rows: str | int = b if ctx is tctx else "last"  # verification reads every row, a catch-up one

            def run() -> object:
                ctx.truncate(150)
                return ctx.decode(toks[150:150 + b], logits_for=rows)
            return run

        curve: dict[str, Any] = {"calibration": sorted(eng.cost.verify.points)}
        for name, ctx, sizes in (("verify_ms", tctx, VERIFY_SIZES), ("draft_ms", dctx, DRAFT_SIZES)):
            ctx.truncate(0)
            ctx.decode(toks[:150], logits_for="last")
            curve[name] = medians_ms({b: batch(ctx, b) for b in sizes})
        curve["label"] = f"{Path(args.model).stem}, {args.threads} thread(s)"
        out["curve"] = curve
        for p in prompts:
            eng.reset()
            prompt, _ = eng.formatter.tokens_for((ChatMessage("user", p.prompt),))
            loop = DecodeLoop(tctx, None, FixedPolicy(0), SamplingParams(temperature=0.0), StatsRecorder(),
                              lambda: False, args.max_tokens)
            reply: list[int] = []
            for step in loop.run(prompt):
                reply.extend(step.tokens)
            eog = None
            if loop.finish_reason is FinishReason.STOP:  # the end-of-generation token the target chose
                sync_context(tctx, [*prompt, *reply])
                eog = int(np.argmax(tctx.logits(0)))
            full = [*prompt, *reply] + ([eog] if eog is not None else [])
            # The drafter along the reply: one batch with a row per position after the prompt.
            sync_context(dctx, prompt[:-1])
            rows = len(full) - len(prompt) + 1
            body = full[len(prompt) - 1:]
            dctx.decode(body, logits_for=rows)
            greedy, conf = [], []
            for r in range(rows):
                lg = dctx.logits(r)
                greedy.append(int(np.argmax(lg)))
                conf.append(round(sampling.top_probability(lg), 5))
            # The target's confidence in each token it wrote (what a pause that listens hears).
            sync_context(tctx, prompt[:-1])
            tctx.decode(body, logits_for=rows)
            target_conf = [round(sampling.top_probability(tctx.logits(r)), 5) for r in range(rows)]
            # After a wrong token: what the drafter drafts next, from its own wrong token on.
            chains: dict[int, list[list[float]]] = {}
            n_reply = len(full) - len(prompt)
            for j in range(n_reply):
                if greedy[j] == full[len(prompt) + j]:
                    continue
                sync_context(dctx, [*full[:len(prompt) + j], greedy[j]])
                chain: list[list[float]] = []
                while len(chain) < CHAIN_LEN:
                    lg = dctx.logits(0)
                    tok, c = int(np.argmax(lg)), sampling.top_probability(lg)
                    if c < CHAIN_MIN:
                        break
                    chain.append([tok, round(c, 5)])
                    dctx.decode([tok], logits_for="last")
                chains[j] = chain
            out["prompts"].append({"id": p.id, "category": p.category, "prompt": prompt, "reply": reply,
                                   "eog": eog, "greedy": greedy, "conf": conf, "target_conf": target_conf,
                                   "chains": {str(k): v for k, v in chains.items()}})
            right = sum(g == t for g, t in zip(greedy, full[len(prompt):], strict=False))
            print(f"{p.id}: {len(reply)} tokens, drafter right at {right} of {n_reply} positions", flush=True)
        out["n_vocab"] = int(eng.target_model.n_vocab)
        out["eos"] = int(eng.target_model.eos())
    Path(args.out).write_text(json.dumps(out))
    print(f"wrote {args.out}")


# -- replay -----------------------------------------------------------------------------------------
# A row of logits past the last one in a drafter's batch (with its greedy choice and confidence), against
# one single-token drafter pass: measured on the 0.5B Q4_K_M drafter in batches of 16-64 tokens, 0.15
# with 1 thread and 0.09 with 2 (`tools/drafter_batches.py --rows`); the dearer is charged.
ROW_COST = 0.15


class Clock:
    """The replay's time: every pass advances it by the curve's cost."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _cost(table: dict[int, float]) -> Callable[[int], float]:
    """Seconds for a batch of ``n`` tokens from a table of milliseconds by batch size (linear past it)."""
    sizes = sorted(table)
    top, prev = sizes[-1], sizes[-2] if len(sizes) > 1 else sizes[-1]
    slope = (table[top] - table[prev]) / max(1, top - prev)

    def cost(n: int) -> float:
        if n in table:
            return table[n] / 1000
        if n > top:
            return (table[top] + slope * (n - top)) / 1000
        lo = max(s for s in sizes if s < n)
        hi = min(s for s in sizes if s > n)
        return (table[lo] + (table[hi] - table[lo]) * (n - lo) / (hi - lo)) / 1000
    return cost


class _Model:
    def __init__(self, eog: set[int]) -> None:
        self.eog = eog

    def is_eog(self, tok: int) -> bool:
        return tok in self.eog


class ReplayContext:
    """A llama.cpp context that answers from a recording: ``answer(tokens)`` is (token, confidence)
    after ``tokens``; each decode advances ``clock`` by ``cost(batch)``."""

    read_grid = 0
    fresh = 0

    def __init__(self, answer: Callable[[Sequence[int]], tuple[int, float]], cost: Callable[[int], float],
                 clock: Clock, n_vocab: int, eog: set[int], row_s: float = 0.0) -> None:
        self.answer, self.cost, self.clock, self.n_vocab = answer, cost, clock, n_vocab
        self.row_s = row_s  # seconds per row of logits past the last one (not in the curve's cost)
        self.model = _Model(eog)
        self.tokens: list[int] = []
        self.n_ctx, self.n_batch = 4096, 512
        self._rows: list[int] = []

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    def set_abort(self, should_abort: object) -> None:
        pass

    def truncate(self, n_keep: int) -> None:
        del self.tokens[n_keep:]

    def clear(self) -> None:
        self.tokens = []

    def decode(self, tokens: Sequence[int], logits_for: str | int = "last") -> int:
        n = len(tokens)
        self.tokens.extend(tokens)
        end = len(self.tokens)
        rows = n if logits_for == "all" else 1 if logits_for == "last" else int(logits_for)
        self._rows = list(range(end - rows, end))
        self.clock.now += self.cost(n) + self.row_s * (rows - 1)
        return n

    def logits(self, row: int) -> np.ndarray:
        tok, conf = self.answer(self.tokens[: self._rows[row] + 1])
        out = np.full(self.n_vocab, -np.inf, dtype=np.float32)
        if conf >= 0.999999:
            out[tok] = 0.0
            return out
        conf = max(conf, 1e-4)
        k = int((1.0 - conf) / conf) + 2  # tokens sharing the rest, each less likely than ``tok``
        others = [t for t in range(k + 1) if t != tok][:k]
        out[others] = math.log((1.0 - conf) / k)
        out[tok] = math.log(conf)
        return out

    def close(self) -> None:
        pass


class Recorded:
    """One recorded reply: what the target and the drafter answer after any tokens."""

    def __init__(self, rec: dict[str, Any], fallback_eog: int) -> None:
        self.id, self.category = rec["id"], rec["category"]
        self.prompt: list[int] = rec["prompt"]
        self.reply: list[int] = rec["reply"]
        self.eog = rec["eog"] if rec["eog"] is not None else fallback_eog
        self.full = [*self.prompt, *self.reply, self.eog]
        self.greedy, self.conf = rec["greedy"], rec["conf"]
        self.target_conf: list[float] = rec.get("target_conf") or [1.0] * len(self.greedy)
        self.chains = {int(k): v for k, v in rec["chains"].items()}

    def after(self, n: int) -> Recorded:
        """The same reply from its ``n``-th token on, the tokens before it now part of the prompt."""
        rest = copy.copy(self)
        rest.prompt, rest.reply = [*self.prompt, *self.reply[:n]], self.reply[n:]
        rest.greedy, rest.conf, rest.target_conf = self.greedy[n:], self.conf[n:], self.target_conf[n:]
        rest.chains = {k - n: v for k, v in self.chains.items() if k >= n}
        return rest

    def target(self, tokens: Sequence[int]) -> tuple[int, float]:
        j = len(tokens) - len(self.prompt)
        if common_prefix(tokens, self.full) == len(tokens) and 0 <= j < len(self.full) - len(self.prompt):
            return self.full[len(tokens)], self.target_conf[j]
        return self.eog, 1.0  # a row after a wrong draft token: verification never reads it

    def drafter(self, tokens: Sequence[int]) -> tuple[int, float]:
        n, base = len(tokens), len(self.prompt)
        k = common_prefix(tokens, self.full)
        if k == n:
            j = n - base
            if 0 <= j < len(self.greedy):
                return self.greedy[j], self.conf[j]
            return self.eog, 0.0
        j = k - base
        chain = self.chains.get(j)
        if chain is None or tokens[k] != self.greedy[j]:
            return self.eog, 0.0
        i = n - k - 1  # tokens of the chain already in the context
        if i < len(chain) and all(tokens[k + 1 + m] == chain[m][0] for m in range(i)):
            return int(chain[i][0]), float(chain[i][1])
        return self.eog, 0.0


# An adaptive arm's drafter after a '/': "" the engine's choice per reply (``DrafterChoice``), "model" the
# draft model (with lookup, ``CombinedDrafter``) for every reply, "lookup" lookup alone for every reply,
# "first" every reply as the engine starts one where it chose lookup alone: lookup first, the draft model
# taking over within the reply where its look back pays (``SwitchingPolicy``, where ``hold_can_pass``).
DRAFTERS = ("", "model", "lookup", "first")
EITHER = "adaptive/either"  # per reply the faster of adaptive/model and adaptive/lookup (chosen in hindsight)


def _arms(fixed: Sequence[int], adaptive: Sequence[str]) -> list[str]:
    return ["off", *(f"auto:{n}" for n in fixed), *adaptive]


class Pipeline:
    """One policy's engine: the decode loop, drafters and costs, answering the prompts in order."""

    def __init__(self, arm: str, curve: dict[str, dict[int, float]], calibration: Sequence[int], n_vocab: int,
                 eogs: set[int], clock: Clock, saved: Any = None) -> None:
        from localchat.bench.modes import bench_mode
        from localchat.engine.adaptive import DrafterChoice
        from localchat.engine.costs import CostModel
        from localchat.engine.draft_sources import CombinedDrafter, ModelDrafter, NgramDrafter

        self.arm, self.clock = arm, clock
        arm, _, self.drafter = arm.partition("/")  # "adaptive/model", "adaptive/lookup": see DRAFTERS
        if self.drafter not in DRAFTERS:
            raise SystemExit(f"{self.arm}: the drafter after '/' must be one of {', '.join(DRAFTERS)}")
        mode, _, n = arm.partition(":")
        self.spec = bench_mode(mode, int(n) if n else 4).speculation
        self.verify = _cost(curve["verify_ms"])
        self.draft_cost = _cost(curve["draft_ms"])
        self.n_vocab, self.eogs = n_vocab, eogs
        self.cost = CostModel()
        self.choice = DrafterChoice()
        if saved is not None:  # a saved profile (engine/profile.py ``Measured``), as a later process loads it
            from localchat.engine import profile

            profile.apply(profile.Measured.from_json(saved.to_json()), self.cost, "draft")
        elif calibration:  # the calibration at load: the sizes it measures, on this curve
            for size in calibration:
                self.cost.observe_verify(size, self.verify(size))
            self.cost.draft_token_s["draft"] = curve["draft_ms"][1] / 1000
            self.cost.calibrated = True
        # else: the calibration at load was declined on this machine (a curve of the shape a busy
        # moment gives); the policy learns the costs as it goes, as the engine's does.
        # The drafter's catch-up reads logits for its last row only, as the curve timed it; a look back
        # (draft_sources.ModelDrafter.look_back) reads more rows, each at a fraction of a single pass.
        self.dctx = ReplayContext(lambda t: (0, 0.0), self.draft_cost, clock, n_vocab, eogs,
                                  ROW_COST * curve["draft_ms"][1] / 1000)
        self.md = ModelDrafter(self.dctx, "draft", self.spec.p_min)  # type: ignore[arg-type]
        self.ngram = NgramDrafter()
        self.lookup = NgramDrafter(min_ngram=CombinedDrafter.MIN_MATCH)
        self.combined = CombinedDrafter(self.md, self.ngram)
        self.trace: Any = None  # a DecisionTrace the adaptive policies add their steps to (``--positions``)

    def answer(self, r: Recorded, max_tokens: int,
               steps: list[tuple[int, int]] | None = None) -> tuple[list[int], float, int, int]:
        """(the reply's tokens, generation seconds, tokens drafted, tokens accepted); ``steps`` gets
        (tokens drafted, tokens accepted) for each verification."""
        from localchat.engine.adaptive import (
            AdaptivePolicy,
            DraftPolicy,
            FixedPolicy,
            SwitchingPolicy,
            hold_can_pass,
            plan_drafting,
        )
        from localchat.engine.draft_sources import SwitchingDrafter
        from localchat.engine.speculative import DecodeLoop
        from localchat.engine.stats import StatsRecorder
        from localchat.engine.types import SamplingParams

        spec = self.spec
        tctx = ReplayContext(r.target, self.verify, self.clock, self.n_vocab, self.eogs)
        self.dctx.answer = r.drafter
        drafter: Any = None
        policy: DraftPolicy = FixedPolicy(0)
        if spec.enabled:
            drafter = self.combined
            if spec.adaptive:
                variant = spec.adaptive_variant

                def adaptive(source: str) -> AdaptivePolicy:
                    p = AdaptivePolicy.for_variant(variant, self.cost, start=spec.draft_tokens, source=source,
                                                   confident=True)
                    p.trace = self.trace
                    return p

                if self.drafter == "":  # the engine's choice (``Engine._choose_drafter``)
                    plan = plan_drafting(self.cost, self.choice, "draft", variant)
                    lookup, switching = plan.lookup_first, plan.switching
                elif self.drafter == "first":
                    lookup, switching = True, hold_can_pass(self.cost, "draft")
                else:
                    lookup, switching = self.drafter == "lookup", False
                if switching:
                    drafter = SwitchingDrafter(self.combined, self.lookup, lookup)
                    policy = SwitchingPolicy(adaptive("draft"), adaptive(self.lookup.name),
                                             drafter.use_lookup, lookup, "draft")
                elif lookup:
                    drafter, policy = self.lookup, adaptive(self.lookup.name)
                else:
                    policy = adaptive("draft")
            else:
                policy = FixedPolicy(spec.draft_tokens)
        rec = StatsRecorder()
        loop = DecodeLoop(tctx, drafter, policy, SamplingParams(temperature=0.0), rec,  # type: ignore[arg-type]
                          lambda: False, max_tokens)
        if isinstance(policy, AdaptivePolicy | SwitchingPolicy):
            loop.cost = self.cost  # the engine pads where the adaptive policy prices a padded batch
        if steps is not None:
            loop.trace = lambda batch, _choices, accepted: steps.append((len(batch) - 1, accepted))
        out: list[int] = []
        for step in loop.run(r.prompt):
            out.extend(step.tokens)
        self.last = rec
        return out, rec.generation_seconds, rec.drafted, rec.accepted


SWITCH = "adaptive/switch"


class Switch:
    """A study, not the engine's rule: adaptive speculation that may leave lookup alone for the draft model
    within a reply. Where the engine chose lookup alone for a reply (``DrafterChoice``), the first ``n``
    tokens are written so; then the drafter's answers at those positions (what a catch-up batch with a row
    per token would say, ``AdaptivePolicy.observe_look_back``) price drafting as the look back after a
    pause does: the better of the proven fixed length and drafting the confident tokens. Where that gain
    reaches ``margin`` and ``horizon`` tokens of it save more than the drafter's catch-up on the prompt
    and those tokens costs, the draft model drafts the rest (a policy of its own, as a new reply's),
    after a catch-up batch charged to the reply; otherwise lookup alone goes on."""

    def __init__(self, pipe: Pipeline, n: int, horizon: int, margin: float) -> None:
        self.pipe, self.n, self.horizon, self.margin = pipe, n, horizon, margin
        self.verify, self.draft = pipe.verify, pipe.draft_cost

    def gain(self, looked: Sequence[tuple[float, bool]]) -> float:
        from localchat.engine.adaptive import AdaptivePolicy, look_back_runs

        policy = AdaptivePolicy(self.pipe.cost, source="draft", confident=True)
        policy._runs.extend(look_back_runs(looked))  # as observe_look_back counts them
        return max(policy._proven_gain(), policy._looked_gain(looked))

    def answer(self, r: Recorded, max_tokens: int, lookup_alone: bool) -> tuple[list[int], float, str]:
        """(tokens, generation seconds, what happened: "model", "lookup", or "switched at G" / "stayed
        at G" with the priced gain G)."""
        pipe = self.pipe
        if not lookup_alone:
            pipe.drafter = "model"
            toks, secs, _, _ = pipe.answer(r, max_tokens)
            return toks, secs, "model"
        pipe.drafter = "lookup"
        if max_tokens <= self.n or len(r.reply) <= self.n:
            toks, secs, _, _ = pipe.answer(r, max_tokens)
            return toks, secs, "lookup"
        head, head_s, _, _ = pipe.answer(r, self.n)
        n = len(head)
        looked = [(r.conf[j], r.greedy[j] == r.reply[j]) for j in range(n)]
        gain = self.gain(looked)
        catch_up = self.draft(len(r.prompt) + n)
        saved = min(self.horizon, max_tokens - n) * self.verify(1) * (1.0 - 1.0 / gain)
        if gain < self.margin or saved <= catch_up:
            toks, secs, _, _ = pipe.answer(r, max_tokens)
            return toks, secs, f"stayed at {gain:.2f}"
        pipe.drafter = "model"
        rest, rest_s, _, _ = pipe.answer(r.after(n), max_tokens - n)
        return [*head, *rest], head_s + catch_up + rest_s, f"switched at {gain:.2f}"


class Hindsight:
    """The fastest any policy drafting with this drafter could have written one recorded reply: a
    policy that knows where the drafter is right (an upper bound on what speculation can earn there).

    A dynamic programme over the reply, on the curve's costs. At each point it either writes one token
    plainly (one single-token pass; the drafter falls a token further behind) or drafts ``k`` tokens:
    the drafter reads in one batch the tokens it is behind on (a catch-up, ``draft(b)``), then ``k - 1``
    single tokens, and the target verifies ``k + 1`` tokens; the drafter's greedy tokens are accepted
    as far as they are the reply's, so the point moves on by the accepted tokens and one. After a draft
    accepted whole the drafter is two tokens behind (its last drafted token and the target's), else one.
    Lookup drafts (n-gram) are left out: on the text where speculation is hardest they draft nothing.
    """

    def __init__(self, r: Recorded, max_tokens: int, verify: Callable[[int], float],
                 draft: Callable[[int], float], max_len: int) -> None:
        seq = [*r.reply, r.eog] if len(r.reply) < max_tokens else r.reply[:max_tokens]  # the end token too
        n = len(seq)
        run = [0] * (n + 1)
        for j in range(n - 1, -1, -1):
            run[j] = run[j + 1] + 1 if j < len(r.greedy) and r.greedy[j] == seq[j] else 0

        def after(i: int, k: int) -> tuple[int, int]:
            """Drafting ``k`` at ``i``: the next point, and the tokens the drafter is then behind on."""
            a = min(k, run[i])
            return i + a + 1, 2 if a == k else 1

        t1 = verify(1)
        width = n + 3  # the drafter is at most n + 1 tokens behind
        read = np.array([draft(b) if b > 0 else 0.0 for b in range(width)])
        value = [np.zeros(width) for _ in range(n + 2)]
        choice: list[int] = [0] * (n + 1)  # the best draft length from each point (where drafting)
        draft_value = [0.0] * (n + 1)
        for i in range(n - 1, 0, -1):
            best, best_k = math.inf, 0
            for k in range(1, max_len + 1):
                nxt, behind = after(i, k)
                rest = value[nxt][behind] if nxt < n else 0.0
                total = (k - 1) * draft(1) + verify(k + 1) + rest
                if total < best:
                    best, best_k = total, k
            choice[i], draft_value[i] = best_k, best
            plain = t1 + (np.append(value[i + 1][1:], np.inf) if i + 1 < n else np.zeros(width))
            value[i] = np.minimum(plain, read + best)
            value[i][0] = np.inf
        self.tokens = n
        self.plain_s = (n - 1) * t1
        self.seconds = float(value[1][1]) if n > 1 else 0.0
        # The path it takes: (point, tokens drafted there, tokens the drafter read first).
        self.path: list[tuple[int, int, int]] = []
        i, behind = 1, 1
        while i < n:
            plain_v = t1 + (value[i + 1][behind + 1] if i + 1 < n else 0.0)
            drafted = read[behind] + draft_value[i]
            if drafted < plain_v:
                self.path.append((i, choice[i], behind))
                i, behind = after(i, choice[i])
            else:
                self.path.append((i, 0, 0))
                i, behind = i + 1, behind + 1

    @property
    def gain(self) -> float:
        """Speed over plain decoding."""
        return self.plain_s / self.seconds if self.seconds > 0 else 1.0


def read_curve(recording: dict[str, Any]) -> dict[str, dict[int, float]]:
    """A recording's curve: milliseconds by batch size, of verification and of the drafter's decode."""
    return {key: {int(n): float(ms) for n, ms in recording["curve"][key].items()}
            for key in ("verify_ms", "draft_ms")}


def ordered(replies: list[Recorded], seed: int) -> list[Recorded]:
    """The replies in the order a run answers them: as recorded (``seed`` 0, categories one after another),
    or shuffled by ``seed``. What a policy learns on one reply (its calibration, the costs, the verdicts)
    carries to the next, so one order is one sample of a policy's figures, not the figures."""
    out = list(replies)
    if seed:
        random.Random(seed).shuffle(out)
    return out


def replay(args: argparse.Namespace) -> None:
    import localchat.engine.speculative  # noqa: F401  (imported before the clock is replaced)

    if args.hold:
        from localchat.engine import adaptive as policies

        tokens, margin, *sure = args.hold.split(",")
        policies.HOLD_TOKENS, policies.HOLD_MARGIN = int(tokens), float(margin)
        if sure:
            policies.LOOK_CONFIDENCE = float(sure[0])
    data = json.loads(Path(args.recording).read_text())
    curve_src = json.loads(Path(args.curve).read_text()) if args.curve else data
    curve = read_curve(curve_src)
    fixed = [int(x) for x in args.fixed.split(",") if x]
    adaptive = [a for a in args.adaptive.split(",") if a]
    arms = _arms(fixed, adaptive)
    eogs = {p["eog"] for p in data["prompts"] if p["eog"] is not None} | {data["eos"]}
    fallback = data["eos"]
    replies = [Recorded(p, fallback) for p in data["prompts"]]
    replies = ordered(select(replies, args.only.split(",") if args.only else None, args.limit), args.order)
    clock = Clock()
    real = time.perf_counter
    time.perf_counter = clock
    speed: dict[str, dict[str, float]] = defaultdict(dict)
    steps: dict[str, list[tuple[str, Any]]] = defaultdict(list)  # per adaptive arm: (category, StepRecord)
    chose_lookup: dict[str, bool] = {}  # per reply: the engine's choice of lookup alone ("adaptive")
    switched: dict[str, str] = {}
    adaptive_saved: Any = None  # the profile the adaptive mode started from (``--saved``)
    switch = [float(x) for x in args.switch.split(",")] if args.switch else None
    if switch is not None and (len(switch) != 3 or "adaptive" not in adaptive):
        raise SystemExit("--switch takes N,H,MARGIN (e.g. 24,64,1.3) and needs the adaptive mode 'adaptive'")
    try:
        for arm in arms:
            calibration = curve_src["curve"]["calibration"]
            saved = None
            if args.saved:  # a first run over the prompts leaves the profile this run starts from
                from localchat.engine import profile

                first = Pipeline(arm, curve, calibration, data["n_vocab"], eogs, clock)
                for r in replies:
                    first.answer(r, data["max_tokens"])
                if first.cost.calibrated or profile.measured_enough(first.cost, "draft"):  # what is saved
                    saved = profile.measured_from(first.cost, "draft", first.md.decode_seconds)
            pipe = Pipeline(arm, curve, calibration, data["n_vocab"], eogs, clock, saved)
            if arm == "adaptive":
                adaptive_saved = saved
            if (args.positions or args.losses) and arm in adaptive:
                from localchat.engine.decision_trace import DecisionTrace

                pipe.trace = DecisionTrace()
            for r in replies:
                toks, secs, _drafted, _accepted = pipe.answer(r, data["max_tokens"])
                if arm == "adaptive":
                    chose_lookup[r.id] = pipe.choice.lookup_alone
                if pipe.trace is not None:
                    steps[arm].extend((r.category, s) for s in pipe.trace.steps)
                    pipe.trace.clear()
                if toks != r.reply[: len(toks)] or len(toks) < min(len(r.reply), data["max_tokens"]):
                    print(f"  {arm} {r.id}: the replay wrote another text", file=sys.stderr)
                speed[arm][r.id] = len(toks) / secs if secs > 0 else math.nan
        if switch is not None:
            base = Pipeline("adaptive", curve, curve_src["curve"]["calibration"], data["n_vocab"], eogs,
                            clock, adaptive_saved)  # as the adaptive mode started: fresh or saved
            study = Switch(base, int(switch[0]), int(switch[1]), switch[2])
            for r in replies:
                toks, secs, switched[r.id] = study.answer(r, data["max_tokens"], chose_lookup[r.id])
                speed[SWITCH][r.id] = len(toks) / secs if secs > 0 else math.nan
            adaptive = [*adaptive, SWITCH]
    finally:
        time.perf_counter = real
    extra = []
    if "adaptive/model" in speed and "adaptive/lookup" in speed:
        adaptive = [*adaptive, EITHER]
        lookup = speed["adaptive/lookup"]
        speed[EITHER] = {pid: max(v, lookup[pid]) for pid, v in speed["adaptive/model"].items()}
    if args.bound:
        from localchat.settings.options import DRAFT_TOKENS_MAX

        extra = ["hindsight"]
        verify, draft = _cost(curve["verify_ms"]), _cost(curve["draft_ms"])
        for r in replies:
            h = Hindsight(r, data["max_tokens"], verify, draft, DRAFT_TOKENS_MAX)
            speed["hindsight"][r.id] = speed["off"][r.id] * h.gain
    report(speed, replies, curve, curve_src["curve"].get("label", ""), data, fixed, adaptive, extra)
    if switched:
        print()
        print(f"{SWITCH}: " + ", ".join(f"{pid} {what}" for pid, what in switched.items()))
    for arm, kept in steps.items() if args.losses else ():
        print()
        print(f"{arm}: time lost against plain decoding writing the same tokens, by kind of step, in % of "
              f"plain decoding's time (negative: time saved; steps in brackets)")
        for line in losses_table(kept, curve["verify_ms"][1] / 1000):
            print(line)
    for arm, kept in steps.items() if args.positions else ():
        print()
        print(f"{arm}: the stop rule's kept tokens by draft position (floor's left out): the chance it gave "
              f"that every token up to there is accepted, against how often they were")
        for line in positions_table(kept):
            print(line)
        print(f"{arm}: the same tokens, each one's own chance against how often it was accepted when every "
              f"token before it was")
        for line in positions_table(kept, given_earlier=True):
            print(line)


# The kinds of step of ``losses_table``, in its order.
LOSS_KINDS = ("drafted", "lookup", "probe", "declined", "look back", "plain")


def step_kind(step: Any) -> str:
    """What a recorded step (``decision_trace.StepRecord``) spent its time on: "drafted" (the draft model
    drafted), "lookup" (lookup alone drafted), "probe" (drafting that ends a pause), "declined" (the drafter
    was asked and drafted nothing: a catch-up and a look for nothing), "look back" (the catch-up that ends a
    pause), "plain" (a plain step: the drafter was not asked)."""
    if step.state == "look back":
        return "look back"
    if not step.source:
        return "plain"
    if step.explore:
        return "probe"
    if step.drafted == 0:
        return "declined"
    return "drafted" if step.source == "draft" else "lookup"


def losses_table(steps: Sequence[tuple[str, Any]], plain_s: float) -> list[str]:
    """Per category: the seconds each kind of step (``step_kind``) took beyond plain decoding's for the
    tokens it wrote (one plain pass, ``plain_s``, per token), in % of plain decoding's time for all the
    category's tokens; where speculation lost on a text, and what to. A plain step loses nothing in a replay
    (its pass is priced at ``plain_s``); in a measured run it shows the noise."""
    lost: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0]))
    plain: dict[str, float] = defaultdict(float)
    for category, step in steps:
        tokens = step.accepted + 1
        plain[category] += tokens * plain_s
        cell = lost[category][step_kind(step)]
        cell[0] += step.draft_s + step.catch_up_s + step.verify_s - tokens * plain_s
        cell[1] += 1
    lines = [f"{'category':12s}{'all':>9s}" + "".join(f"{k:>16s}" for k in LOSS_KINDS)]
    for category in sorted(plain):
        base = plain[category] / 100
        seen = lost[category]
        cells = [f"{seen[k][0] / base:6.1f} ({seen[k][1]})" if k in seen else "-" for k in LOSS_KINDS]
        total = sum(s for s, _ in seen.values()) / base
        lines.append(f"{category:12s}{total:9.1f}" + "".join(f"{c:>16s}" for c in cells))
    return lines


def positions_table(steps: Sequence[tuple[str, Any]], most: int = 4,
                    given_earlier: bool = False) -> list[str]:
    """Per category and draft position (1-based, up to ``most``): the tokens the stop rule kept on its own
    (not the floor's), the mean of the chance it gave that all tokens up to there are accepted, and the
    share that were (a bias here moves every close decision).

    ``given_earlier``: each token's own calibrated chance against the share accepted among those whose
    earlier tokens were all accepted, which tells a token priced too likely for its confidence at that
    position from a draft whose earlier tokens were."""
    seen: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0, 0.0, 0])
    for category, step in steps:
        for d in step.decisions:
            if d.kind == "take" and d.kept and not d.floor and d.position < most:
                if given_earlier and step.accepted < d.position:
                    continue  # an earlier token was declined: this one was never judged
                row = seen[(category, d.position)]
                row[0] += 1
                row[1] += d.chance if given_earlier else d.all_chance
                row[2] += step.accepted > d.position
    lines = [f"{'category':12s}" + "".join(f"{'position ' + str(k + 1):>24s}" for k in range(most))]
    for category in sorted({c for c, _ in seen}):
        cells = []
        for k in range(most):
            n, chance, hits = seen.get((category, k), (0, 0.0, 0))
            cells.append(f"{chance / n:.2f} / {hits / n:.2f} ({int(n)})" if n else "-")
        lines.append(f"{category:12s}" + "".join(f"{c:>24s}" for c in cells))
    return lines


def _short(arm: str) -> str:
    """A column's heading: 8 characters ("adaptive/lookup" as "ad/looku")."""
    return arm if len(arm) <= 8 else arm.replace("adaptive", "ad")[:8]


def _gmean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def report(speed: dict[str, dict[str, float]], replies: Sequence[Recorded],
           curve: dict[str, dict[int, float]], label: str, data: dict[str, Any], fixed: Sequence[int],
           adaptive: Sequence[str], extra: Sequence[str] = ()) -> None:
    """Per prompt and per category (geometric means): each mode over plain decoding, and each adaptive
    mode over the best fixed choice per prompt (plain decoding or a fixed length); ``extra``: columns
    shown over plain decoding only (the hindsight bound)."""
    v, d = curve["verify_ms"], curve["draft_ms"]
    print(f"curve: {label}; plain pass {v[1]:.1f} ms, drafter pass {d[1] / v[1]:.2f}x, "
          f"t(2) {v[2] / v[1]:.2f}x, t(9) {v[9] / v[1]:.2f}x t(1); "
          f"text: {data['model']} with {data['draft']}")
    fixed_arms = ["off", *(f"auto:{n}" for n in fixed)]
    shown = [*fixed_arms[1:], *adaptive, *extra]

    def plain(arm: str, pid: str) -> float:
        return speed[arm][pid] / speed["off"][pid]

    def oracle(arm: str, pid: str) -> float:
        return speed[arm][pid] / max(speed[b][pid] for b in fixed_arms)

    print(f"{'prompt':28s}" + "".join(f"{_short(a):>9s}" for a in shown) + f"{'best':>9s}"
          + "".join(f"{'/' + _short(a):>10s}" for a in adaptive))
    by_cat: dict[str, list[str]] = defaultdict(list)
    for r in replies:
        by_cat[r.category].append(r.id)
        best = max(fixed_arms, key=lambda a, pid=r.id: speed[a][pid])  # type: ignore[misc]
        print(f"{r.id[:28]:28s}" + "".join(f"{plain(a, r.id):9.3f}" for a in shown) + f"{best:>9s}"
              + "".join(f"{oracle(a, r.id):10.3f}" for a in adaptive))
    print()
    print(f"{'category (geometric means)':28s}" + "".join(f"{_short(a):>9s}" for a in shown)
          + "".join(f"{'/' + _short(a):>10s}" for a in adaptive))
    for cat, ids in [*sorted(by_cat.items()), ("all", [r.id for r in replies])]:
        print(f"{cat:28s}" + "".join(f"{_gmean([plain(a, i) for i in ids]):9.3f}" for a in shown)
              + "".join(f"{_gmean([oracle(a, i) for i in ids]):10.3f}" for a in adaptive))


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("record", help="record replies, the drafter's answers and this machine's curve")
    r.add_argument("--model", required=True)
    r.add_argument("--draft", required=True)
    r.add_argument("--prompts", default="heldout2", help="a shipped set's name or a JSON Lines file")
    r.add_argument("--limit", type=int, default=0, help="prompts per category (0: all)")
    r.add_argument("--max-tokens", type=int, default=96)
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--out", required=True)
    p = sub.add_parser("replay", help="replay policies on a recording")
    p.add_argument("recording")
    p.add_argument("--curve", help="the cost curve of another recording")
    p.add_argument("--fixed", default="1,2,3,4,5,6,7,8")
    p.add_argument("--adaptive", default="adaptive",
                   help="adaptive modes, each maybe with '/model' or '/lookup': that drafter for every reply "
                        "instead of the engine's choice (with both: adaptive/either, the faster per reply), "
                        "or '/first': every reply starts with lookup alone and the draft model may take over")
    p.add_argument("--only", help="categories to replay (comma-separated)")
    p.add_argument("--limit", type=int, default=0, help="the first N prompts per category (0: all)")
    p.add_argument("--order", type=int, default=0, metavar="SEED",
                   help="answer the prompts shuffled by this seed (0: as recorded, category by category)")
    p.add_argument("--saved", action="store_true",
                   help="start each mode from the profile that a first run over the prompts saved")
    p.add_argument("--positions", action="store_true",
                   help="also print, per category and draft position, the stop rule's predicted chance of "
                        "acceptance against the share accepted (adaptive modes)")
    p.add_argument("--losses", action="store_true",
                   help="also print, per category, the time each kind of step (drafting, a look that drafted "
                        "nothing, a look back, a probe) lost against plain decoding (adaptive modes)")
    p.add_argument("--switch", metavar="N,H,MARGIN",
                   help="also replay adaptive/switch (class Switch), a rule the engine does not have: where "
                        "the engine chose lookup alone, the draft model after N tokens if they show drafting "
                        "paying by MARGIN and H tokens of that gain pay the catch-up")
    p.add_argument("--hold", metavar="TOKENS,MARGIN[,SURE]",
                   help="the hold of a reply that starts with lookup alone (adaptive.HOLD_TOKENS, "
                        "HOLD_MARGIN, LOOK_CONFIDENCE) instead of the engine's, for every adaptive mode")
    p.add_argument("--bound", action="store_true",
                   help="also print the hindsight bound: the fastest any policy drafting with this drafter "
                        "could have been (class Hindsight)")
    args = ap.parse_args(argv)
    record(args) if args.command == "record" else replay(args)


if __name__ == "__main__":
    main()
