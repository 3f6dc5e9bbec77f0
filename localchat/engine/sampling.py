"""Token distributions from logits, and the speculative accept/resample step.

A distribution is kept sparse (the candidate ids and their probabilities):
with top-k on, only k entries survive, so the per-token cost is one
``argpartition`` over the vocabulary. The order of the transforms follows
llama.cpp's default sampler chain (penalties, top-k, top-p, min-p, then
temperature), and the target's and the drafter's logits go through the very
same function, so speculative sampling keeps the target's distribution.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from localchat.engine.types import SamplingParams

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Dist:
    """A normalised distribution over ``ids`` (sparse; absent ids have probability 0)."""

    ids: IntArray
    probs: FloatArray

    def prob(self, token: int) -> float:
        hit = np.nonzero(self.ids == token)[0]
        return float(self.probs[hit[0]]) if hit.size else 0.0

    def sample(self, rng: np.random.Generator) -> int:
        cdf = np.cumsum(self.probs)
        i = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
        return int(self.ids[min(i, len(self.ids) - 1)])

    def top(self) -> tuple[int, float]:
        i = int(np.argmax(self.probs))
        return int(self.ids[i]), float(self.probs[i])


def apply_repeat_penalty(
    logits: npt.NDArray[np.float32], history: Sequence[int], params: SamplingParams
) -> npt.NDArray[np.float32]:
    """Return logits with the repeat penalty applied (a copy only when it changes anything)."""
    if params.repeat_penalty == 1.0 or params.repeat_last_n == 0 or not history:
        return logits
    recent = np.unique(np.asarray(history[-params.repeat_last_n :], dtype=np.int64))
    out = logits.copy()
    vals = out[recent]
    out[recent] = np.where(vals > 0, vals / params.repeat_penalty, vals * params.repeat_penalty)
    return out


def greedy_token(logits: npt.NDArray[np.float32], history: Sequence[int], params: SamplingParams) -> int:
    return int(np.argmax(apply_repeat_penalty(logits, history, params)))


def restrict(logits: npt.NDArray[np.float32], allowed: BoolArray) -> npt.NDArray[np.float32]:
    """A copy of ``logits`` with every token ``allowed`` does not hold at -inf (a grammar's mask)."""
    return np.where(allowed, logits, np.float32(-np.inf))


def top_probability(logits: npt.NDArray[np.float32]) -> float:
    """Softmax probability of the argmax token (the drafter's confidence)."""
    m = float(logits.max())
    return 1.0 / float(np.exp(logits - m, dtype=np.float32).sum(dtype=np.float64))


def distribution(
    logits: npt.NDArray[np.float32], history: Sequence[int], params: SamplingParams
) -> Dist:
    """The sampling distribution for these logits under ``params`` (temperature > 0).

    Logits a grammar set to -inf (``restrict``) are no candidates: restricted before top-k, top-p
    and min-p, the distribution is the target's over what the grammar allows, renormalised, and a
    grammar never leaves the sampler without a candidate.
    """
    x = apply_repeat_penalty(logits, history, params)
    n = x.shape[0]
    k = params.top_k if 0 < params.top_k < n else n
    ids = np.argpartition(x, n - k)[n - k :] if k < n else np.arange(n)
    cand = x[ids].astype(np.float64)
    order = np.argsort(-cand, kind="stable")
    ids, cand = ids[order].astype(np.int64), cand[order]
    probs = np.exp(cand - cand[0])
    probs /= probs.sum()
    keep = len(ids)
    if params.top_p < 1.0:
        cum = np.cumsum(probs)
        keep = min(keep, int(np.searchsorted(cum, params.top_p, side="left")) + 1)
    if params.min_p > 0.0:
        keep = min(keep, max(1, int(np.count_nonzero(probs >= params.min_p * probs[0]))))
    ids, cand = ids[:keep], cand[:keep]
    if not np.isfinite(cand[-1]):  # tokens a grammar forbids (-inf, sorted last) are no candidates
        finite = np.isfinite(cand)
        ids, cand = ids[finite], cand[finite]
    scaled = (cand - cand[0]) / max(params.temperature, 1e-6)
    p = np.exp(scaled)
    p /= p.sum()
    return Dist(ids, p)


def point_mass(token: int) -> Dist:
    return Dist(np.array([token], dtype=np.int64), np.array([1.0]))


def speculative_accept(
    p: Dist, q: Dist, token: int, rng: np.random.Generator
) -> tuple[bool, int]:
    """One step of speculative sampling (Leviathan et al. 2023; Chen et al. 2023).

    ``token`` was drawn from q. Accept it with probability min(1, p(x)/q(x));
    otherwise draw from normalize(max(0, p - q)). Returns (accepted, token):
    the output is distributed exactly as p.
    """
    px, qx = p.prob(token), q.prob(token)
    if qx <= 0.0:  # cannot happen for a token drawn from q; be safe
        return False, p.sample(rng)
    if px >= qx or rng.random() < px / qx:
        return True, token
    q_on_p = np.zeros_like(p.probs)
    # Probability q assigns to each of p's candidates.
    qpos = {int(t): float(v) for t, v in zip(q.ids, q.probs, strict=True)}
    for i, t in enumerate(p.ids):
        q_on_p[i] = qpos.get(int(t), 0.0)
    resid = np.maximum(p.probs - q_on_p, 0.0)
    total = resid.sum()
    if total <= 0.0:
        return False, p.sample(rng)
    return False, Dist(p.ids, resid / total).sample(rng)
