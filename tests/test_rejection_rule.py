"""The acceptance rule as a pure function: whatever q is, the emitted token is distributed as p."""
from __future__ import annotations

import numpy as np
import pytest

from desktop_app.engine.rejection import Verdict, accept_greedy, accept_sampled
from desktop_app.engine.sampling import Distribution

from stats_helpers import chi2_gof, chi2_sf

N = 200_000
V = 8


def _dist(probs) -> Distribution:
    return Distribution.from_dense(np.asarray(probs, dtype=float))


def _first_token_counts(p, q, rng, n=N, gamma=1, wrong_residual=False):
    """Run the rule n times on one position (plus a bonus position) and count the first emitted token."""
    pd, qd = _dist(p), _dist(q)
    bonus = _dist(np.ones(V) / V)
    counts = np.zeros(V)
    for _ in range(n):
        x = qd.sample(rng.random())
        drafted = [x] * gamma
        if wrong_residual:       # a broken rule: on rejection, sample p itself instead of the residual
            p_x, q_x = pd.prob(x), qd.prob(x)
            token = x if rng.random() * q_x < p_x else pd.sample(rng.random())
        else:
            v = accept_sampled(drafted, [qd] * gamma, [pd] * gamma + [bonus], rng)
            token = x if v.n_accepted > 0 else v.next_token
        counts[token] += 1
    return counts


def test_chi2_sf_matches_known_values():
    assert chi2_sf(24.32, 7) == pytest.approx(0.001, rel=0.02)
    assert chi2_sf(3.841, 1) == pytest.approx(0.05, rel=0.01)
    assert chi2_sf(100.0, 60) == pytest.approx(0.00089, rel=0.05)


@pytest.mark.parametrize("case", ["random", "q_mass_where_p_has_none", "p_mass_where_q_has_none"])
def test_emitted_token_is_distributed_as_p(case):
    rng = np.random.default_rng(1234)
    p = rng.dirichlet(np.ones(V))
    q = rng.dirichlet(np.ones(V))
    if case == "q_mass_where_p_has_none":
        p[[0, 1]] = 0.0
        q[[0, 1]] *= 6                          # the draft loves tokens the target never emits
    elif case == "p_mass_where_q_has_none":
        q[[2, 3]] = 0.0                         # tokens only the residual can produce
    p, q = p / p.sum(), q / q.sum()
    counts = _first_token_counts(p, q, rng)
    stat, df, pvalue = chi2_gof(counts, p)
    assert pvalue > 1e-3, f"χ²={stat:.1f} df={df}: emitted tokens do not follow p"
    assert counts[p == 0].sum() == 0


def test_the_check_has_the_power_to_catch_a_wrong_residual():
    """Same samples size, a rule that resamples from p instead of norm(max(0, p - q)): rejected."""
    rng = np.random.default_rng(99)
    p = rng.dirichlet(np.ones(V))
    q = rng.dirichlet(np.ones(V))
    counts = _first_token_counts(p, q, rng, wrong_residual=True)
    _, _, pvalue = chi2_gof(counts, p)
    assert pvalue < 1e-6


def test_point_mass_draft_copy_is_exact():
    """Prompt lookup proposes a copied token with q = 1: kept with probability p(x), else p without x."""
    rng = np.random.default_rng(7)
    p = rng.dirichlet(np.ones(V))
    pd = _dist(p)
    x = int(np.argmin(p))                       # copies an unlikely token
    counts = np.zeros(V)
    bonus = _dist(np.ones(V) / V)
    for _ in range(N):
        v = accept_sampled([x], [None], [pd, bonus], rng)
        counts[x if v.n_accepted else v.next_token] += 1
    _, _, pvalue = chi2_gof(counts, p)
    assert pvalue > 1e-3


def test_later_positions_and_bonus_follow_p():
    """γ = 3 with the same p and q at each position: the second emitted token also follows p."""
    rng = np.random.default_rng(5)
    p = rng.dirichlet(np.ones(V))
    q = rng.dirichlet(np.ones(V))
    pd, qd = _dist(p), _dist(q)
    counts = np.zeros(V)
    for _ in range(N // 2):
        drafted = [qd.sample(rng.random()) for _ in range(3)]
        v = accept_sampled(drafted, [qd] * 3, [pd] * 4, rng)
        emitted = drafted[:v.n_accepted] + [v.next_token]
        if len(emitted) >= 2:
            counts[emitted[1]] += 1
        else:   # the round ended after one token; the next round would draw the second afresh
            counts[pd.sample(rng.random())] += 1
    _, _, pvalue = chi2_gof(counts, p)
    assert pvalue > 1e-3


def test_greedy_keeps_while_argmax_matches():
    assert accept_greedy([5, 6, 7], [5, 6, 9, 1]) == Verdict(2, 9, True)
    assert accept_greedy([5, 6, 7], [5, 6, 7, 1]) == Verdict(3, 1, False)
    assert accept_greedy([5], [4, 0]) == Verdict(0, 4, True)
    assert accept_greedy([], [3]) == Verdict(0, 3, False)
