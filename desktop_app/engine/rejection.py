"""The acceptance rule of speculative decoding, as pure functions.

Sampling (Leviathan et al. 2022, Chen et al. 2023): the draft proposed x_i ~ q_i. Keep x_i with
probability min(1, p_i(x_i) / q_i(x_i)); at the first rejection, sample from the residual
norm(max(0, p_i - q_i)); if all γ are kept, sample a bonus token from p_γ. The emitted tokens are
then distributed exactly as if the target had sampled them one by one.

Greedy is the limit at temperature 0: keep while the target's argmax equals the drafted token; the
first mismatch is replaced by the target's argmax, and when all match the argmax after the last
draft is the bonus.

A drafter that copies tokens (prompt lookup) proposes a point mass: q_i = 1 on x_i, so x_i is kept
with probability p_i(x_i) and the residual is p_i with x_i removed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from desktop_app.engine.sampling import Distribution


@dataclass(frozen=True)
class Verdict:
    n_accepted: int        # how many drafted tokens were kept (a prefix)
    next_token: int        # the correction (if n_accepted < γ) or the bonus token
    corrected: bool        # True when next_token replaces a rejected draft


def accept_greedy(drafted: Sequence[int], target_top: Sequence[int]) -> Verdict:
    """target_top[i] is the target's argmax after the prefix plus drafted[:i] (len γ+1)."""
    n = 0
    while n < len(drafted) and drafted[n] == target_top[n]:
        n += 1
    return Verdict(n, int(target_top[n]), n < len(drafted))


def accept_sampled(drafted: Sequence[int], q: Sequence[Distribution | None], p: Sequence[Distribution],
                   rng: np.random.Generator) -> Verdict:
    """q[i]: the draft's processed distribution at i (None: a point mass on drafted[i]);
    p[i]: the target's processed distribution at i, len(p) == len(drafted) + 1. Every p[i] and q[i]
    lives on the target's vocabulary ([n_vocab_target] when dense), whatever the draft's size."""
    for i, x in enumerate(drafted):
        p_x = p[i].prob(x)
        q_x = 1.0 if q[i] is None else q[i].prob(x)
        if q_x <= 0.0:
            raise ValueError(f"draft token {x} has zero probability under its own distribution")
        if rng.random() * q_x < p_x:          # u < min(1, p/q) without dividing
            continue
        return Verdict(i, residual_sample(p[i], q[i], x, rng), True)
    return Verdict(len(drafted), p[len(drafted)].sample(rng.random()), False)


def residual_sample(p: Distribution, q: Distribution | None, x: int, rng: np.random.Generator) -> int:
    """Sample from norm(max(0, p - q)); q None means a point mass on x. p and q both live on the
    target's vocabulary (a draft's q is built there even when the draft's own vocabulary differs)."""
    if q is None:
        residual = p.dense().copy()                        # [n_vocab_target]
        residual[x] = 0.0
    else:
        if q.n_vocab != p.n_vocab:
            raise ValueError(f"q covers {q.n_vocab} ids but p covers {p.n_vocab}: "
                             "a draft's q must be built on the target's vocabulary")
        residual = np.maximum(p.dense() - q.dense(), 0.0)  # [n_vocab_target]
    if residual.sum() <= 0.0:
        # p <= q everywhere yet x was rejected: only possible through rounding; p is then the answer.
        return p.sample(rng.random())
    return Distribution.from_dense(residual).sample(rng.random())
