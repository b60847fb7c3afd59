"""The processed distribution (top-k, top-p, min-p, temperature) against a plain reference."""
from __future__ import annotations

import numpy as np
import pytest

from desktop_app.engine.sampling import GREEDY, Distribution, SamplingParams, process, softmax_prob


def reference(logits: np.ndarray, prm: SamplingParams) -> dict[int, float]:
    """llama.cpp's chain written out naively: sort everything, cut, renormalise, apply temperature."""
    lg = logits.astype(np.float64)
    order = np.argsort(-lg, kind="stable")
    if prm.top_k > 0:
        order = order[:prm.top_k]
    p = np.exp(lg[order] - lg[order].max())
    p /= p.sum()
    keep = len(order)
    if prm.top_p < 1:
        keep = min(keep, int(np.searchsorted(np.cumsum(p), prm.top_p)) + 1)
    if prm.min_p > 0:
        keep = min(keep, int((p >= prm.min_p * p[0]).sum()))
    ids = order[:keep]
    w = np.exp((lg[ids] - lg[ids].max()) / prm.temperature)
    return dict(zip(ids.tolist(), (w / w.sum()).tolist()))


@pytest.fixture(scope="module")
def logits():
    rng = np.random.default_rng(0)
    lg = (rng.standard_normal(50_000) * 2).astype(np.float32)
    lg[:40] += 10 + rng.standard_normal(40)          # a peaked head, as real models have
    return lg


@pytest.mark.parametrize("prm", [
    SamplingParams(),
    SamplingParams(top_k=0),
    SamplingParams(top_k=0, min_p=0.0),
    SamplingParams(top_k=0, top_p=1.0, min_p=0.0, temperature=1.0),
    SamplingParams(top_k=20, top_p=0.5, min_p=0.0),
    SamplingParams(temperature=1.5, top_k=100, top_p=0.9, min_p=0.01),
    SamplingParams(temperature=0.3, top_k=5, top_p=1.0, min_p=0.2),
])
def test_process_matches_reference(logits, prm):
    d = process(logits, prm)
    got = dict(zip(d.ids.tolist(), d.probs.tolist()))
    want = reference(logits, prm)
    assert got.keys() == want.keys()
    assert max(abs(got[k] - want[k]) for k in got) < 1e-12


def test_top_p_on_a_flat_distribution_falls_back_to_a_full_sort():
    lg = np.zeros(5000, dtype=np.float32)
    lg[:3] = [0.5, 0.4, 0.3]
    prm = SamplingParams(top_k=0, top_p=0.9, min_p=0.0, temperature=1.0)
    assert dict(zip(*map(np.ndarray.tolist, (process(lg, prm).ids, process(lg, prm).probs)))).keys() \
        == reference(lg, prm).keys()


def test_greedy_is_a_point_mass_on_the_argmax(logits):
    d = process(logits, GREEDY)
    assert d.ids.tolist() == [int(np.argmax(logits))] and d.probs.tolist() == [1.0]


def test_distribution_sample_and_prob():
    d = Distribution(np.array([3, 9, 4]), np.array([0.2, 0.5, 0.3]), 10)
    assert d.prob(9) == 0.5 and d.prob(0) == 0.0
    assert [d.sample(u) for u in (0.0, 0.19, 0.21, 0.69, 0.71, 0.999)] == [3, 3, 9, 9, 4, 4]
    assert d.dense()[[3, 9, 4]].tolist() == [0.2, 0.5, 0.3]


def test_softmax_prob(logits):
    p = np.exp(logits.astype(np.float64) - logits.max())
    p /= p.sum()
    token = int(np.argsort(logits)[-2])
    got, top = softmax_prob(logits, token)
    assert got == pytest.approx(p[token], rel=1e-5) and top == pytest.approx(p.max(), rel=1e-5)
