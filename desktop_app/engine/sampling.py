"""Turning logits into the processed distribution that both p (target) and q (draft) use.

The chain follows llama.cpp's default order: top-k on the logits, then top-p and min-p on the
softmax at temperature 1, then the temperature on what is left. Temperature <= 0 means greedy:
the distribution is a point mass on the argmax. Applying the same chain to target and draft logits
is what keeps speculative sampling exact (Leviathan et al. 2022, Chen et al. 2023).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TOP_P_FIRST_GUESS = 512    # without top-k or min-p, top-p first looks among this many best tokens


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.8
    top_k: int = 40            # 0: off
    top_p: float = 0.95        # 1.0: off
    min_p: float = 0.05        # 0.0: off
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


GREEDY = SamplingParams(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0)


class Distribution:
    """A probability distribution over token ids, stored sparsely (support ids and their probabilities)."""

    __slots__ = ("ids", "probs", "n_vocab", "_dense", "_cdf")

    def __init__(self, ids: np.ndarray, probs: np.ndarray, n_vocab: int):
        self.ids = ids
        self.probs = probs
        self.n_vocab = n_vocab
        self._dense: np.ndarray | None = None
        self._cdf: np.ndarray | None = None

    @classmethod
    def point(cls, token: int, n_vocab: int) -> "Distribution":
        return cls(np.array([token]), np.array([1.0]), n_vocab)

    @classmethod
    def from_dense(cls, dense: np.ndarray) -> "Distribution":
        ids = np.flatnonzero(dense > 0)
        d = cls(ids, dense[ids] / dense[ids].sum(), len(dense))
        return d

    def dense(self) -> np.ndarray:
        if self._dense is None:
            self._dense = np.zeros(self.n_vocab)
            self._dense[self.ids] = self.probs
        return self._dense

    def prob(self, token: int) -> float:
        if self._dense is not None:
            return float(self._dense[token])
        hit = np.flatnonzero(self.ids == token)
        return float(self.probs[hit[0]]) if len(hit) else 0.0

    def sample(self, u: float) -> int:
        """The token at quantile u in [0, 1) (inverse-CDF sampling)."""
        if self._cdf is None:
            self._cdf = np.cumsum(self.probs)
        i = int(np.searchsorted(self._cdf, u * self._cdf[-1], side="right"))
        return int(self.ids[min(i, len(self.ids) - 1)])


def process(logits: np.ndarray, params: SamplingParams, n_vocab: int | None = None) -> Distribution:
    """The processed distribution for one position's logits (which are not modified).

    top-k, top-p and min-p each keep a prefix of the tokens in descending logit order, so the
    result is the shortest of the three prefixes; top-p's mass is measured on the softmax over the
    top-k survivors, as in llama.cpp's chain. Only the candidates that can survive are sorted.

    logits: [n] for ids 0..n-1. The distribution lives on n_vocab >= n ids (default n): a draft whose
    logits were cut to the ids the target has still gives a q over the target's vocabulary.
    """
    n = len(logits)
    n_vocab = n if n_vocab is None else n_vocab
    if n_vocab < n:
        raise ValueError(f"{n} logits do not fit a vocabulary of {n_vocab}")
    if params.greedy:
        return Distribution.point(int(np.argmax(logits)), n_vocab)
    if 0 < params.top_k < n:
        base = np.argpartition(logits, -params.top_k)[-params.top_k:]
        lg = logits[base].astype(np.float64)
    else:
        base = None
        lg = logits.astype(np.float64)
    e = np.exp(lg - lg.max())          # unnormalised probabilities at temperature 1
    z = e.sum()
    if params.min_p > 0.0:             # p >= min_p * p_max  <=>  e >= min_p (p_max has e = 1)
        idx = np.flatnonzero(e >= params.min_p)
    elif params.top_p < 1.0 and base is None and n > TOP_P_FIRST_GUESS:
        idx = np.argpartition(lg, -TOP_P_FIRST_GUESS)[-TOP_P_FIRST_GUESS:]
        if e[idx].sum() < params.top_p * z:
            idx = np.arange(n)             # a flat distribution: sort everything
    else:
        idx = np.arange(len(lg))
    if params.top_p < 1.0:
        idx = idx[np.argsort(-lg[idx], kind="stable")]
        cum = np.cumsum(e[idx]) / z
        idx = idx[:int(np.searchsorted(cum, params.top_p, side="left")) + 1]
    ids = idx if base is None else base[idx]
    w = np.exp((lg[idx] - lg[idx].max()) / params.temperature)
    return Distribution(ids, w / w.sum(), n_vocab)


def softmax_prob(logits: np.ndarray, token: int) -> tuple[float, float]:
    """(probability of `token`, top probability) under the plain softmax at temperature 1.

    Used to show p and q in greedy mode and for the draft's p-min test, without building a distribution.
    """
    m = float(logits.max())
    z = float(np.exp(logits - m).sum())
    return float(np.exp(float(logits[token]) - m) / z), 1.0 / z
