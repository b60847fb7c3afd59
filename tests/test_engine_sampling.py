"""Sampling at temperature 1 on the real test model: speculation leaves the target's distribution intact."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from desktop_app.engine import LoadOptions, ModelPair, SamplingParams
from desktop_app.engine.backend import Context
from desktop_app.engine.sampling import process

from engine_helpers import first_tokens, prompt_tokens, run
from stats_helpers import chi2_gof, chi2_two_sample

pytestmark = pytest.mark.network      # every test here needs a fetched model

PROMPT = "<|im_start|>user\nName one animal.<|im_end|>\n<|im_start|>assistant\n"
N = 1500


def params(seed: int) -> SamplingParams:
    # top-k 12 keeps the categories few enough for a chi-square test with N samples
    return SamplingParams(temperature=1.0, top_k=12, top_p=1.0, min_p=0.0, seed=seed)


@pytest.fixture(scope="module")
def pair(test_model_path, q2k_draft_path):
    with ModelPair.load(test_model_path, q2k_draft_path, LoadOptions(n_ctx=512, n_threads=2)) as p:
        yield p


@pytest.fixture(scope="module")
def first_token_laws(pair):
    """p: the target's processed distribution of the first token (evaluated as the engine does);
    q: the draft's; and the law a broken rule (resampling from p on rejection) would give."""
    prompt = prompt_tokens(pair.target, PROMPT)
    ctx = Context(pair.target, 512, 2)
    ctx.eval(prompt[:-1], logits="none")
    ctx.eval(prompt[-1:])
    p = process(ctx.logits(-1), params(0)).dense()
    ctx.close()
    ctx = Context(pair.draft, 512, 2)
    ctx.eval(prompt)
    q = process(ctx.logits(-1), params(0)).dense()
    ctx.close()
    overlap = np.minimum(p, q)
    broken = overlap + (1 - overlap.sum()) * p
    return prompt, p, q, broken


def _first_tokens(pair, prompt, n, speculate: bool):
    """First tokens of n replies: from a round that drafted one token, or from plain decoding."""
    counts = np.zeros(pair.target.n_vocab)
    for seed in range(n):
        if speculate:
            token = first_tokens(pair, prompt, params(seed))[1][0]
        else:
            token = run(pair, prompt, params(seed), max_tokens=1, enabled=False)[2].tokens[0]
        counts[token] += 1
    return counts


def test_first_token_follows_the_target_with_and_without_speculation(pair, first_token_laws):
    prompt, p, q, broken = first_token_laws
    assert np.minimum(p, q).sum() < 0.8, "the draft should disagree with the target often"
    spec = _first_tokens(pair, prompt, N, speculate=True)
    stat, df, pvalue = chi2_gof(spec, p)
    assert pvalue > 1e-3, f"speculative first tokens do not follow p (χ²={stat:.1f}, df={df})"
    # The same samples would expose a wrong residual: they are far from that rule's law.
    assert chi2_gof(spec, broken)[2] < 1e-6
    plain = _first_tokens(pair, prompt, N // 2, speculate=False)
    assert chi2_gof(plain, p)[2] > 1e-3


def test_first_two_tokens_match_plain_sampling(pair):
    """γ = 3: the second token comes from an accepted draft, a correction or a bonus token."""
    prompt = prompt_tokens(pair.target, PROMPT)
    joint = {}
    for label in ("spec", "plain"):
        counts = Counter()
        for seed in range(N):
            if label == "spec":
                counts[first_tokens(pair, prompt, params(10_000 + seed), n=2, gamma=3)[1]] += 1
            else:
                counts[run(pair, prompt, params(10_000 + seed), max_tokens=2, enabled=False)[2].tokens] += 1
        joint[label] = counts
    stat, df, pvalue = chi2_two_sample(joint["spec"], joint["plain"])
    assert df >= 5
    assert pvalue > 1e-3, f"first-two-token laws differ (χ²={stat:.1f}, df={df})"


def test_same_seed_same_output_and_seeds_differ(pair):
    prompt = prompt_tokens(pair.target, PROMPT)
    a = run(pair, prompt, params(42), max_tokens=30, drafter="model", draft_max=4)[2]
    b = run(pair, prompt, params(42), max_tokens=30, drafter="model", draft_max=4)[2]
    assert a.tokens == b.tokens
    others = {run(pair, prompt, params(s), max_tokens=30, drafter="model", draft_max=4)[2].tokens
              for s in range(43, 48)}
    assert len(others | {a.tokens}) > 2
