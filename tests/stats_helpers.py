"""Chi-square goodness of fit without SciPy (the survival function of the chi-square distribution)."""
from __future__ import annotations

import math

import numpy as np


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for X ~ chi-square(df): the regularised upper incomplete gamma Q(df/2, x/2)."""
    a, z = df / 2.0, x / 2.0
    if z <= 0:
        return 1.0
    if z < a + 1:                                   # series for P, then Q = 1 - P
        term = total = 1.0 / a
        n = a
        for _ in range(10_000):
            n += 1
            term *= z / n
            total += term
            if term < total * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(-z + a * math.log(z) - math.lgamma(a)))
    b = z + 1 - a                                   # continued fraction for Q (Lentz)
    c, d = 1e300, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return h * math.exp(-z + a * math.log(z) - math.lgamma(a))


def chi2_gof(counts: np.ndarray, probs: np.ndarray, min_expected: float = 5.0) -> tuple[float, int, float]:
    """Chi-square statistic, degrees of freedom and p-value of `counts` against `probs`.

    Categories expected to hold fewer than `min_expected` samples are pooled into one."""
    counts = np.asarray(counts, dtype=float)
    probs = np.asarray(probs, dtype=float)
    n = counts.sum()
    expected = probs * n
    big = expected >= min_expected
    obs = list(counts[big])
    exp = list(expected[big])
    if (~big).any():
        obs.append(counts[~big].sum())
        exp.append(expected[~big].sum())
    obs, exp = np.array(obs), np.array(exp)
    keep = exp > 0
    if (obs[~keep] > 0).any():
        return math.inf, len(obs) - 1, 0.0          # a sample where the law puts no mass
    obs, exp = obs[keep], exp[keep]
    stat = float(((obs - exp) ** 2 / exp).sum())
    df = len(obs) - 1
    return stat, df, chi2_sf(stat, df)


def chi2_two_sample(a: dict, b: dict, min_expected: float = 5.0) -> tuple[float, int, float]:
    """Do two samples of categories (category -> count) come from the same law? (2 x K table)."""
    na, nb = sum(a.values()), sum(b.values())
    cats = sorted(set(a) | set(b), key=lambda c: -(a.get(c, 0) + b.get(c, 0)))
    rows, rest = [], [0, 0]
    for c in cats:
        ca, cb = a.get(c, 0), b.get(c, 0)
        if (ca + cb) * min(na, nb) / (na + nb) >= min_expected:
            rows.append((ca, cb))
        else:
            rest[0] += ca
            rest[1] += cb
    if sum(rest):
        rows.append(tuple(rest))
    stat = 0.0
    for ca, cb in rows:
        total = ca + cb
        ea, eb = total * na / (na + nb), total * nb / (na + nb)
        stat += (ca - ea) ** 2 / ea + (cb - eb) ** 2 / eb
    df = len(rows) - 1
    return stat, df, chi2_sf(stat, df) if df > 0 else 1.0
