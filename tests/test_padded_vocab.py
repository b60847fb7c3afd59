"""Pairs whose vocabularies differ in size by padding ids, as real pairs' do (Qwen2.5-7B 152064,
Qwen2.5-0.5B 151936), in both directions, on padded copies of the test models.

The padded rows copy the rows of tokens the tests' prompts make likely, slightly boosted (see
gguf_padding.py), so the padded ids carry real probability mass: a bigger target emits them (and its
draft cannot read them), a bigger draft would propose them (and its target does not have them)."""
from __future__ import annotations

import numpy as np
import pytest

from desktop_app.engine import GREEDY, LoadOptions, ModelPair, SamplingParams, check_pair
from desktop_app.engine.auto_policy import AutoPolicy
from desktop_app.engine.compat import VOCAB_MAX_SIZE_DIFFERENCE
from desktop_app.engine.drafters import ModelDrafter

from engine_helpers import (ANIMAL_PROMPT, first_divergence_gap, first_token_law, first_tokens, max_batch_deviation,
                            prompt_tokens, run)
from gguf_padding import pad_vocabulary
from stats_helpers import chi2_gof

pytestmark = pytest.mark.network      # every test here needs the fetched test model

N_PAD = VOCAB_MAX_SIZE_DIFFERENCE     # the most llama.cpp allows
BOOST = 1.01                          # padded copies win the argmax where their originals would
N = 1500                              # sampled first tokens per direction
GREEDY_FROM = 16                      # the padded target first emits a padded id about here


def params(seed: int) -> SamplingParams:
    return SamplingParams(temperature=1.0, top_k=12, top_p=1.0, min_p=0.0, seed=seed)   # as test_engine_sampling


def likely_tokens(model_path: str) -> list[int]:
    """The rows to copy: the target's possible first tokens after the animal prompt (the support of
    the sampling test), and the first token new to the plain greedy reply to the code prompt from
    GREEDY_FROM tokens on, so that a padded target's greedy reply drafts for a while before it emits
    a padded id."""
    with ModelPair.load(model_path, None, LoadOptions(n_ctx=512, n_threads=2)) as plain:
        law = first_token_law(plain.target, prompt_tokens(plain.target, ANIMAL_PROMPT), params(0))
        reply = run(plain, prompt_tokens(plain.target), GREEDY, max_tokens=GREEDY_FROM + 8, enabled=False)[2].tokens
    later = next(t for i, t in enumerate(reply) if i >= GREEDY_FROM and t not in reply[:i])
    return [int(t) for t in np.flatnonzero(law)] + [later]


@pytest.fixture(scope="module")
def padded(test_model_path, q2k_draft_path, tmp_path_factory):
    """Padded copies of the test target and of its Q2_K draft (vocabulary + 128), written once."""
    copies = likely_tokens(test_model_path)
    folder = tmp_path_factory.mktemp("padded")
    return (copies, pad_vocabulary(test_model_path, folder / "target-padded.gguf", N_PAD, copies, BOOST),
            pad_vocabulary(q2k_draft_path, folder / "q2k-padded.gguf", N_PAD, copies, BOOST))


@pytest.fixture(scope="module")
def bigger_target(padded, q2k_draft_path):
    with ModelPair.load(str(padded[1]), q2k_draft_path, LoadOptions(n_ctx=512, n_threads=2)) as p:
        yield p


@pytest.fixture(scope="module")
def bigger_draft(padded, test_model_path):
    with ModelPair.load(test_model_path, str(padded[2]), LoadOptions(n_ctx=512, n_threads=2)) as p:
        yield p


@pytest.fixture(scope="module", params=["bigger_target", "bigger_draft"])
def pair(request):
    return request.getfixturevalue(request.param)


def test_padded_files_are_real_padded_vocabularies(padded, test_model_path, q2k_draft_path, bigger_target,
                                                   bigger_draft):
    copies, target, draft = padded
    assert check_pair(str(target), q2k_draft_path).ok and check_pair(test_model_path, str(draft)).ok
    for big, small in ((bigger_target.target, bigger_target.draft), (bigger_draft.draft, bigger_draft.target)):
        n = small.n_vocab
        assert big.n_vocab == n + N_PAD
        assert big.token_text(n) == f"[PAD{n}]".encode() and big.token_text(n + N_PAD - 1) == f"[PAD{n + N_PAD - 1}]".encode()
        assert big.piece(n) == b""                         # padding renders as no text
    # the padded rows matter: much of the padded target's first-token mass is on copies (zero rows get none)
    prompt = prompt_tokens(bigger_target.target, ANIMAL_PROMPT)
    p = first_token_law(bigger_target.target, prompt, params(0))
    n = bigger_draft.target.n_vocab
    assert p[n:].sum() > 0.4
    assert set(np.flatnonzero(p[n:]) + n) <= {n + i for i in range(len(copies))}


@pytest.mark.parametrize("spec", [dict(draft_max=4), dict(draft_max=6, draft_p_min=0.5, draft_min=2),
                                  dict(draft_max=8, auto=True)], ids=["gamma4", "p-min", "auto"])
def test_greedy_speculation_equals_plain_greedy(pair, spec, monkeypatch):
    """As in test_engine_greedy: identical, or parting only where the plain run's top-2 logits are
    within what batching can move. Auto mode gets costs under which drafting with the model pays."""
    if spec.get("auto"):
        costs = pair.decoder.costs
        monkeypatch.setattr(costs, "verify_s", {1: 0.030, 2: 0.031, 3: 0.032, 5: 0.034, 9: 0.038, 17: 0.046})
        monkeypatch.setattr(costs, "draft_step_s", {"model": 0.001})
        monkeypatch.setattr(pair.decoder, "policy", AutoPolicy(costs))   # (what this test teaches stays with it)
        monkeypatch.setattr(costs, "record_verify", lambda *a: None)
        monkeypatch.setattr(costs, "record_draft", lambda *a: None)
    prompt = prompt_tokens(pair.target)
    _, _, plain = run(pair, prompt, GREEDY, max_tokens=60, enabled=False)
    rounds, _, spec_out = run(pair, prompt, GREEDY, max_tokens=60, drafter="model", **spec)
    n_target, n_draft = pair.target.n_vocab, pair.draft.n_vocab
    drafted = [x for r in rounds for x in r.drafted]
    assert drafted and max(drafted) < n_target
    assert any(r.drafter == "model" and r.accepted for r in rounds)
    if n_target > n_draft:
        # the target emits padded ids; from the first on, the draft cannot read the text and drafts nothing
        first = next(i for i, t in enumerate(plain.tokens) if t >= n_draft)
        assert first >= 8, "the test wants model rounds before the first padded id"
        seen = 0
        for r in rounds:
            assert not (seen > first and r.drafter == "model")
            seen += len(r.emitted)
    divergence = first_divergence_gap(pair.target, prompt, plain.tokens, spec_out.tokens)
    if divergence is not None:
        at, gap = divergence
        deviation = max_batch_deviation(pair.target)
        assert gap <= 2 * deviation + 1e-6, (f"outputs differ at token {at} where the plain top-2 gap is "
                                             f"{gap:.4f}, more than batching can explain ({deviation:.4f})")
    else:
        assert plain.text == spec_out.text


def test_bigger_draft_never_proposes_an_id_the_target_lacks(bigger_draft):
    """The draft's own argmax is a padded id here; it proposes the best id the target has instead, and
    its q lives on the target's vocabulary."""
    pair = bigger_draft
    drafter: ModelDrafter = pair.decoder.drafters["model"]
    n_target = pair.target.n_vocab
    prompt = prompt_tokens(pair.target, ANIMAL_PROMPT)
    own = first_token_law(pair.draft, prompt, GREEDY)
    assert int(np.argmax(own)) >= n_target
    cut = first_token_law(pair.draft, prompt, GREEDY, n_target)
    assert drafter.draft(prompt, 1, GREEDY, np.random.default_rng(0)).tokens == [int(np.argmax(cut))]
    rng = np.random.default_rng(0)
    for seed in range(20):
        proposal = drafter.draft(prompt, 3, params(seed), rng)
        assert len(proposal.tokens) == 3 and max(proposal.tokens) < n_target
        assert all(q.n_vocab == n_target and q.ids.max() < n_target for q in proposal.q)


def test_model_drafter_proposes_nothing_after_an_id_the_draft_lacks(bigger_target):
    pair = bigger_target
    drafter: ModelDrafter = pair.decoder.drafters["model"]
    padding = pair.draft.n_vocab                     # the first id the draft lacks
    prompt = prompt_tokens(pair.target)
    rng = np.random.default_rng(0)
    pair.draft_ctx.clear()
    assert len(drafter.draft(prompt, 4, GREEDY, rng).tokens) == 4
    held = prompt + [padding] + prompt[-3:]
    drafter.begin(held)
    for sampling in (GREEDY, params(1)):
        proposal = drafter.draft(held, 4, sampling, rng)
        assert proposal.tokens == [] and proposal.n_steps == 0
    assert padding not in pair.draft_ctx.tokens
    assert len(drafter.draft(prompt + [prompt[-1]], 4, GREEDY, rng).tokens) == 4     # a text without it drafts again
    # through the decoder: a prompt holding a padded id makes every round a plain step
    rounds, _, finish = run(pair, held, GREEDY, max_tokens=12, drafter="model", draft_max=4)
    assert len(finish.tokens) == 12 and all(r.gamma == 0 for r in rounds)


def test_sampled_first_token_follows_the_target(pair):
    """γ = 1 and two tokens wanted, so that the first round drafts: its first token is a kept draft or
    a correction from the residual, and must follow the target's p over the target's vocabulary."""
    n_target, n_draft = pair.target.n_vocab, pair.draft.n_vocab
    prompt = prompt_tokens(pair.target, ANIMAL_PROMPT)
    p = first_token_law(pair.target, prompt, params(0))
    q = first_token_law(pair.draft, prompt, params(0), n_target)
    padded = slice(min(n_target, n_draft), None)
    if n_target > n_draft:
        assert p[padded].sum() > 0.4                     # the draft can never propose this mass
    else:
        assert first_token_law(pair.draft, prompt, params(0))[padded].sum() > 0.4   # the draft's own q would
    counts = np.zeros(n_target)
    corrections = 0
    for seed in range(N):
        first_round, (token,) = first_tokens(pair, prompt, params(seed))
        corrections += first_round.accepted == 0
        counts[token] += 1
    assert corrections > N / 10, "the residual should be drawn from often"
    stat, df, pvalue = chi2_gof(counts, p)
    assert pvalue > 1e-3, f"speculative first tokens do not follow p (χ²={stat:.1f}, df={df})"
    # the same samples would expose a rule that resampled p on rejection instead of the residual
    overlap = np.minimum(p, q)
    assert chi2_gof(counts, overlap + (1 - overlap.sum()) * p)[2] < 1e-6
    if n_target > n_draft:
        assert counts[padded].sum() > N / 5              # padded ids came from the residual
