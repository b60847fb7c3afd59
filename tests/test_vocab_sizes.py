"""Vocabularies of different sizes in the sampling chain and the rule, as pure functions: a draft's
logits cut to the ids the target has still give a q on the target's vocabulary, and the rule stays
exact when p has mass on ids q can never have (a bigger target's padding ids)."""
from __future__ import annotations

import numpy as np
import pytest

from desktop_app.engine.rejection import accept_sampled, residual_sample
from desktop_app.engine.sampling import Distribution, SamplingParams, process

from stats_helpers import chi2_gof

V_TARGET, V_DRAFT = 8, 6          # the target has two ids the draft lacks
N = 40_000


def test_q_from_cut_logits_lives_on_the_target_vocabulary():
    logits = np.random.default_rng(1).normal(size=V_TARGET + 2).astype(np.float32)   # a bigger draft's
    prm = SamplingParams(temperature=0.7, top_k=0, top_p=0.9, min_p=0.0)
    q = process(logits[:V_TARGET], prm, V_TARGET)
    assert q.n_vocab == V_TARGET and q.dense().shape == (V_TARGET,)
    smaller = process(logits[:V_DRAFT], prm, V_TARGET)                               # a smaller draft's
    assert smaller.dense().shape == (V_TARGET,) and smaller.dense()[V_DRAFT:].sum() == 0.0
    assert np.allclose(smaller.dense()[:V_DRAFT], process(logits[:V_DRAFT], prm).dense())
    with pytest.raises(ValueError, match="do not fit"):
        process(logits, prm, V_TARGET)


def test_rule_is_exact_when_p_has_mass_the_draft_cannot_have():
    rng = np.random.default_rng(7)
    p = Distribution.from_dense(np.array([0.10, 0.05, 0.20, 0.05, 0.10, 0.05, 0.25, 0.20]))   # 45 % on ids 6, 7
    q = process(np.log(np.array([0.3, 0.1, 0.1, 0.2, 0.2, 0.1], dtype=np.float32)),
                SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0), V_TARGET)
    bonus = Distribution.from_dense(np.ones(V_TARGET))
    counts = np.zeros(V_TARGET)
    for _ in range(N):
        x = q.sample(rng.random())
        v = accept_sampled([x], [q], [p, bonus], rng)
        counts[x if v.n_accepted else v.next_token] += 1
    assert chi2_gof(counts, p.dense())[2] > 1e-3
    assert counts[V_DRAFT:].sum() > 0.4 * N                  # only the residual can emit them


def test_residual_refuses_distributions_on_different_vocabularies():
    p = Distribution.from_dense(np.ones(V_TARGET))
    q = Distribution.from_dense(np.ones(V_DRAFT))
    with pytest.raises(ValueError, match="target's vocabulary"):
        residual_sample(p, q, 0, np.random.default_rng(0))
