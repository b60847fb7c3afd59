"""Greedy speculative decoding on the real test model: exact up to batch rounding, with rollback."""
from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest

from desktop_app.engine import (GREEDY, Controls, LoadOptions, ModelPair, RoundEvent, SpecSettings, StopReason,
                                TokenEvent, TokenKind)
from desktop_app.engine.backend import Context

from engine_helpers import max_batch_deviation, prompt_tokens, run

PROMPTS = [
    None,   # the code prompt
    "<|im_start|>user\nList five facts about the Moon.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nRepeat exactly: the cat sat on the mat, the dog lay on the rug, the bird flew over "
    "the house.<|im_end|>\n<|im_start|>assistant\n",
]


@pytest.fixture(scope="module")
def pair(test_model_path, q2k_draft_path):
    with ModelPair.load(test_model_path, q2k_draft_path, LoadOptions(n_ctx=1024, n_threads=2)) as p:
        yield p


@pytest.fixture(scope="module")
def deviation(pair):
    return max_batch_deviation(pair.target)


def replay_argmax(model, prompt, rounds):
    """Re-run the engine's batches in a fresh context from the emitted tokens alone: each round's
    verify batch is [last token, drafts...] after everything before it. Returns, per round, the
    argmax at each verified position."""
    ctx = Context(model, 1024, 2)
    tokens = list(prompt)
    ctx.eval(tokens[:-1], logits="none")
    out = []
    for r in rounds:
        assert r.n_past == len(tokens)
        ctx.truncate(len(tokens) - 1)
        ctx.eval([tokens[-1], *r.drafted], logits="all")
        out.append([int(np.argmax(ctx.logits(i))) for i in range(r.gamma + 1)])
        tokens += r.emitted
    ctx.close()
    return out


@pytest.mark.parametrize("which", range(len(PROMPTS)))
@pytest.mark.network
def test_every_emitted_token_is_the_verifying_batch_argmax(pair, which):
    prompt = prompt_tokens(pair.target, *( [PROMPTS[which]] if PROMPTS[which] else []))
    pair.target_ctx.clear()
    pair.draft_ctx.clear()
    rounds, _, finish = run(pair, prompt, GREEDY, max_tokens=80, drafter="model", draft_max=4)
    assert sum(r.gamma for r in rounds) >= 8
    if which == 0:   # the long answer exercises both outcomes
        assert any(r.accepted < r.gamma for r in rounds), "the Q2_K draft should be rejected sometimes"
        assert any(r.accepted == r.gamma > 0 for r in rounds)
    replayed = replay_argmax(pair.target, prompt, rounds)
    for r, tops in zip(rounds, replayed):
        assert list(r.target_top) == tops
        assert list(r.emitted) == tops[:len(r.emitted)]            # kept drafts and the correction/bonus
        assert list(r.drafted[:r.accepted]) == tops[:r.accepted]
        if r.end and r.kinds[-1] == TokenKind.ACCEPTED:      # the reply ended on a kept draft: cut there
            assert r.accepted == r.gamma == len(r.emitted)
        elif r.accepted < r.gamma:
            assert r.drafted[r.accepted] != tops[r.accepted]
            assert r.kinds[-1] == TokenKind.CORRECTION
        elif r.gamma:
            assert r.kinds[-1] == TokenKind.BONUS
    assert [r.end for r in rounds[:-1]] == [""] * (len(rounds) - 1) and rounds[-1].end
    # nothing past the reply's end: the rounds emit exactly the reply, plus an end-of-generation token
    emitted = [t for r in rounds for t in r.emitted]
    assert emitted[:len(finish.tokens)] == list(finish.tokens)
    assert len(emitted) == len(finish.tokens) + (rounds[-1].end == "eos")


@pytest.mark.parametrize("which", range(len(PROMPTS)))
@pytest.mark.network
def test_speculative_equals_plain_greedy_up_to_batch_rounding(pair, deviation, which):
    """Plain and speculative greedy may part only where the plain run's top-2 logit gap is within
    what batching can move: |gap| <= 2 * the largest batched-vs-single logit difference measured on
    this machine (a flip needs both logits to move towards each other). On a batch-invariant CPU
    build that bound is 0 and the outputs must be identical."""
    prompt = prompt_tokens(pair.target, *([PROMPTS[which]] if PROMPTS[which] else []))
    _, _, plain = run(pair, prompt, GREEDY, max_tokens=80, enabled=False)
    _, _, spec = run(pair, prompt, GREEDY, max_tokens=80, drafter="model", draft_max=4)
    if plain.tokens == spec.tokens:
        assert plain.text == spec.text
        return
    first = next(i for i, (a, b) in enumerate(zip(plain.tokens, spec.tokens)) if a != b)
    ctx = Context(pair.target, 1024, 2)
    ctx.eval(prompt[:-1], logits="none")                 # exactly as plain decoding evaluates
    for t in [prompt[-1], *plain.tokens[:first]]:
        ctx.eval([t], logits="last")
    top2 = np.sort(ctx.logits(-1))[-2:]
    ctx.close()
    assert top2[1] - top2[0] <= 2 * deviation + 1e-6, (
        f"outputs differ at token {first} where the plain top-2 gap is {top2[1] - top2[0]:.4f}, "
        f"more than batching can explain (max deviation {deviation:.4f})")


@pytest.mark.network
def test_rollback_leaves_exactly_the_accepted_tokens(pair, deviation):
    prompt = prompt_tokens(pair.target)
    rounds, _, finish = run(pair, prompt, GREEDY, max_tokens=120, drafter="model", draft_max=6)
    rejections = sum(r.accepted < r.gamma for r in rounds)
    assert rejections >= 5
    text = list(prompt) + list(finish.tokens)
    # The target holds everything but the last token; llama.cpp's own cache agrees.
    assert pair.target_ctx.tokens == text[:len(pair.target_ctx.tokens)]
    assert len(pair.target_ctx.tokens) == len(text) - 1
    assert pair.target_ctx.pos_max() == len(text) - 2
    assert pair.draft_ctx.tokens == text[:len(pair.draft_ctx.tokens)]
    assert pair.draft_ctx.pos_max() == len(pair.draft_ctx.tokens) - 1
    # Continuing gives the logits of a fresh evaluation of the same text. The fresh context takes the
    # prompt in one batch as the engine did (both models read all of it but its last token before the
    # first round) and the rest token by token: large batches round differently, batches of up to 17
    # tokens differ by at most `deviation`.
    for ctx, model, head in ((pair.target_ctx, pair.target, len(prompt) - 1),
                             (pair.draft_ctx, pair.draft, len(prompt) - 1)):
        ctx.sync(text, logits="last")
        continued = ctx.logits(-1).copy()
        fresh = Context(model, 1024, 2)
        fresh.eval(text[:head], logits="none")
        for t in text[head:]:
            fresh.eval([t], logits="last")
        assert np.abs(fresh.logits(-1) - continued).max() <= 2 * deviation + 1e-4
        fresh.close()


def test_reading_a_prompt_in_pieces_leaves_the_cache_holding_exactly_it(pair):
    """Context.sync_in_pieces is sync a piece at a time: the cache ends holding exactly the prompt, also
    where it held more (a regenerate reads a prompt its cache already holds, with the old reply after
    it), and the pieces are reported as they are read."""
    ctx = Context(pair.target, 256, 2)
    text = prompt_tokens(pair.target)
    ctx.eval(text, logits="none")
    assert list(ctx.sync_in_pieces(text[:5], 128)) == []
    assert ctx.tokens == text[:5] and ctx.pos_max() == 4
    assert list(ctx.sync_in_pieces(text, 8)) == [(k, len(text) - 5) for k in range(8, len(text) - 5, 8)]
    assert ctx.tokens == text and ctx.pos_max() == len(text) - 1
    ctx.close()


def test_a_draft_a_few_tokens_behind_reads_them_in_its_first_draft_pass_not_in_a_pass_of_their_own(
        pair, monkeypatch):
    """After a round of the draft model's own, all kept, it is one token behind (its last draft, never
    evaluated); after a plain or copied round, a few more. Auto's catch-up read them in a pass of their
    own before drafting, in nearly every model round (one token: 21 ms, then the 34 ms step, where the
    step's pass reading it too costs 43 ms; a 2-core Xeon), timed neither as drafting nor as a prompt
    pass. The first draft
    pass reads them with the text's last token, as fixed mode does; from CATCH_UP_MIN tokens on, a
    catch-up is a pass of its own (timed as a prompt pass)."""
    from desktop_app.engine.drafters import CATCH_UP_MIN, ModelDrafter

    ctx = pair.draft_ctx
    drafter = ModelDrafter(ctx, pair.target_ctx.n_vocab)
    text = prompt_tokens(pair.target)
    passes = []
    real_eval = ctx.eval
    monkeypatch.setattr(ctx, "eval", lambda tokens, *a, **k: passes.append(len(tokens)) or real_eval(tokens, *a, **k))
    ctx.clear()
    assert drafter.catch_up(text) == len(text) - 1 and passes == [len(text) - 1]
    context = text + [text[3]]                        # one token behind, and the last
    passes.clear()
    assert drafter.behind(context) == 1 and drafter.catch_up(context) == 0 and passes == []
    proposal = drafter.draft(context, 3, GREEDY, np.random.default_rng(0))
    assert passes == [2, 1, 1] and proposal.n_steps == 3 and len(proposal.tokens) == 3
    assert ctx.tokens == context + proposal.tokens[:2] and ctx.pos_max() == len(ctx.tokens) - 1
    assert 0.0 <= proposal.t_read_s < proposal.t_s    # (the first pass's share beyond a step: catch-up time)
    kept = context + proposal.tokens[:1]               # its first draft kept, the second rejected: none behind
    ctx.truncate(len(kept) - 1)
    passes.clear()
    again = drafter.draft(kept, 2, GREEDY, np.random.default_rng(0))
    assert passes == [1, 1] and again.t_read_s == 0.0 and ctx.tokens == kept + again.tokens[:1]
    other = [t for t in text if t != again.tokens[0]]         # (its draft replaced by other tokens)
    few, many = kept + other[:4], kept + other[:CATCH_UP_MIN + 1]     # (a copy's 3 tokens: 3 behind)
    passes.clear()
    assert drafter.behind(few) == 3 and drafter.catch_up(few) == 0 and passes == []
    drafter.draft(few, 1, GREEDY, np.random.default_rng(0))
    assert passes == [4] and ctx.tokens == few
    ctx.truncate(len(kept))
    passes.clear()
    assert drafter.catch_up(many) == CATCH_UP_MIN and passes == [CATCH_UP_MIN] and ctx.tokens == many[:-1]


@pytest.mark.network
def test_self_draft_accepts_nearly_everything(test_model_path):
    with ModelPair.load(test_model_path, test_model_path, LoadOptions(n_ctx=512, n_threads=2)) as p:
        rounds, _, finish = run(p, prompt_tokens(p.target), GREEDY, max_tokens=60, drafter="model", draft_max=5)
        assert finish.stats.acceptance_rate >= 0.95
        assert finish.stats.mean_accepted > 4


@pytest.mark.network
def test_prompt_lookup_accepts_copied_text(pair):
    # A fixed setting copies γ tokens wherever there is a match: deterministic, unlike auto mode's
    # choice made from timings (tested on given costs in test_auto_policy.py).
    prompt = prompt_tokens(pair.target, PROMPTS[2])
    rounds, _, finish = run(pair, prompt, GREEDY, max_tokens=40, drafter="lookup", draft_max=8)
    lookup = [r for r in rounds if r.drafter == "lookup"]
    assert lookup and sum(r.accepted for r in lookup) >= 8
    assert all(q == 1.0 for r in lookup for q in r.q)
    _, _, plain = run(pair, prompt, GREEDY, max_tokens=40, enabled=False)
    assert plain.tokens == finish.tokens


@pytest.mark.network
def test_auto_mode_copies_with_lookup_when_that_beats_the_draft_model(pair, monkeypatch):
    # Fixed costs (real rounds would move them): verify batches nearly free, a draft step dearer than a
    # target pass. No draft-model γ can pay then, but copying can, so auto mode copies; and the draft
    # model, never used, never reads the text (auto's lazy prefill).
    costs = pair.decoder.costs
    pair.draft_ctx.clear()
    monkeypatch.setattr(costs, "verify_s", {1: 0.030, 2: 0.031, 3: 0.032, 5: 0.034, 9: 0.038, 17: 0.046})
    monkeypatch.setattr(costs, "draft_step_s", {"model": 0.060})
    monkeypatch.setattr(costs, "record_verify", lambda *a: None)
    monkeypatch.setattr(costs, "record_draft", lambda *a: None)
    prompt = prompt_tokens(pair.target, PROMPTS[2])
    rounds, _, finish = run(pair, prompt, GREEDY, max_tokens=40, drafter="model", draft_max=8, auto=True)
    used = {r.drafter for r in rounds}
    assert "lookup" in used and "model" not in used
    assert pair.draft_ctx.tokens == []
    assert sum(r.accepted for r in rounds if r.drafter == "lookup") >= 8
    _, _, plain = run(pair, prompt, GREEDY, max_tokens=40, enabled=False)
    assert plain.tokens == finish.tokens
    # With checks as dear as this machine's, copying short matches does not pay and auto decodes plainly.
    monkeypatch.setattr(costs, "verify_s", {1: 0.030, 2: 0.090, 3: 0.130, 5: 0.200, 9: 0.400, 17: 0.800})
    rounds, _, _ = run(pair, prompt, GREEDY, max_tokens=40, drafter="model", draft_max=8, auto=True)
    assert {r.drafter for r in rounds} == {"none"}


@pytest.mark.network
def test_round_bookkeeping_adds_up(pair):
    rounds, tokens, finish = run(pair, prompt_tokens(pair.target), GREEDY, max_tokens=50, drafter="model")
    emitted = [t for r in rounds for t in r.emitted]
    assert emitted[:len(finish.tokens)] == list(finish.tokens)
    assert [t.token for t in tokens] == list(finish.tokens)
    assert "".join(t.text for t in tokens) + finish.tail == finish.text
    for r in rounds:
        kinds = list(r.kinds)
        assert kinds.count(TokenKind.ACCEPTED) == r.accepted <= r.gamma
        assert len(kinds) == len(r.emitted) == r.accepted + 1
        assert len(r.q) == len(r.p) == r.gamma == len(r.drafted_text)
    s = finish.stats
    assert s.n_drafted == sum(r.gamma for r in rounds) and s.n_accepted == sum(r.accepted for r in rounds)
    assert finish.stop_reason in (StopReason.MAX_TOKENS, StopReason.EOS)
    # `tandem generate --json`'s rounds read back (scripts/window_render_cost.py replays them)
    for r in rounds:
        back = RoundEvent.from_json(r.index, r.to_json(), r.drafter)
        assert back.to_json() == r.to_json() and back.kinds == r.kinds and back.drafter == r.drafter


def test_plain_decoding_spends_no_time_drafting_and_is_1_00x_plain(pair):
    """Plain decoding looks for no draft: its rounds' time outside the target's pass is the loop's own,
    as plain decoding's rate counts it. Counted as drafting, a moment the process waited for a core
    there made a plain reply read 0.99× plain (a test failed so, beside other work)."""
    rounds, _, finish = run(pair, prompt_tokens(pair.target), GREEDY, max_tokens=32, enabled=False)
    assert rounds and all(r.t_draft_s == 0.0 and not r.drafted for r in rounds)
    assert finish.stats.t_draft_s == 0.0 and finish.stats.measured_speedup == pytest.approx(1.0, abs=1e-9)
    # auto choosing to decode plainly did look: its choosing is timed as the draft side's
    rounds, _, finish = run(pair, prompt_tokens(pair.target), GREEDY, max_tokens=32, drafter="lookup", auto=True)
    assert finish.stats.t_draft_s > 0.0


@pytest.mark.network
def test_the_rounds_times_add_up_to_the_replys_time_with_a_slow_reader(pair):
    """The chart draws tokens per second from the rounds' times, the panel its speed from the reply's.
    A round's time ran from the loop's turn to the round's event, so what the reader of the events
    takes, and the bookkeeping between rounds, was in no round: a plain reply in the window charted
    at about 29 tok/s over a speed of 25.7. Here a reader spends 3 ms on every token event; the
    rounds' times must still add up to the reply's decode time (to the last round's event)."""
    controls = Controls(SpecSettings(drafter="model", draft_max=3))
    rounds, finish = [], None
    for ev in pair.generate(prompt_tokens(pair.target), GREEDY, controls, 40):
        if isinstance(ev, RoundEvent):
            rounds.append(ev)
        elif isinstance(ev, TokenEvent):
            time.sleep(0.003)
        else:
            finish = ev
    s = finish.stats
    decode_s = s.n_tokens / s.tokens_per_s
    total = sum(r.t_round_s for r in rounds)
    assert s.n_tokens >= 30 and total <= decode_s
    assert total >= decode_s - 0.003 * 4 - 0.02     # all but the last round's token events, and the end
    assert s.t_other_s >= 0.003 * (s.n_tokens - 4)   # (the reader's time is the loop's "other" time)


def test_explanation_of_a_mixed_reply_times_only_the_drafting_rounds():
    from desktop_app.engine.events import GenerationStats
    from desktop_app.engine.explain import explain
    # 10 rounds: 2 drafted 4 tokens each (kept 3 and 4) in 100 ms each, 8 plain steps of 30 ms.
    s = GenerationStats(n_tokens=17, n_rounds=10, n_plain_rounds=8, t_plain_s=0.240, n_drafted=8, n_accepted=7,
                        acceptance_rate=7 / 8, alpha=7 / 8, mean_accepted=3.5, mean_drafted=4.0,
                        t_draft_s=0.0, t_verify_s=0.440, t_target_step_s=0.030, c=0.0, tokens_per_s=17 / 0.44)
    text = explain(s)
    assert "giving 4.50 tokens in 100 ms" in text and "2 of 10 rounds drafted" in text
    # no time outside draft and verify: plain decoding is one 30 ms pass per token
    assert s.plain_tokens_per_s == pytest.approx(1 / 0.030) and s.measured_speedup == pytest.approx(1.16, abs=0.01)
    assert "beats plain decoding (33.3 tok/s, measured) by 1.16×" in text


def test_the_sentence_s_tokens_per_round_add_up_to_the_reply_where_a_draft_kept_its_end(pair):
    """A copy of the prompt's last sentence runs on into its end-of-turn token, which the target keeps:
    the reply ends there, and that round gives no token of the target's own. "kept 5.33, giving 6.33
    tokens" then did not add up (5 plain steps and 3 such rounds made 24 where the reply had 22 tokens
    and its end: a new user's sums, off by 2 in two replies); the tokens the rounds wrote do."""
    from desktop_app.engine.explain import explain

    rounds, _, finish = run(pair, prompt_tokens(pair.target, PROMPTS[2]), GREEDY, max_tokens=64,
                            drafter="lookup", draft_max=8)
    s, last = finish.stats, rounds[-1]
    assert last.end == "eos" and last.gamma and last.accepted == last.gamma    # its end was a kept draft
    drafting = s.n_rounds - s.n_plain_rounds
    assert s.n_plain_rounds + drafting * s.mean_written == pytest.approx(s.n_tokens + 1)    # the end included
    assert s.mean_written == pytest.approx(s.mean_accepted + 1 - 1 / drafting)
    assert (f"kept {s.mean_accepted:.2f}, giving {s.mean_written:.2f} tokens in " in explain(s)
            and "(the reply ended on a kept draft, its end: nothing came after it)." in explain(s))
    # where every round gave the target's own token, the kept mean as shown plus one, and no note (the two
    # means rounded apart read "kept 0.17, giving 1.18", with the note: a review)
    every = dataclasses.replace(s, n_accepted=7, mean_accepted=7 / 40, mean_drafted=2.0, mean_written=47 / 40)
    assert "kept 0.17, giving 1.17 tokens in " in explain(every) and "nothing came after it" not in explain(every)


def test_a_catch_up_that_lost_the_reply_s_time_is_named_as_its_cause():
    """A one-line answer (a new user's first message): auto drafted one round with the draft model at
    round 9, after it had read the prompt, 0.35 s in a 1.11 s reply; the sentence blamed the draft
    step's cost (0.04 s of drafting in all)."""
    from desktop_app.engine.events import GenerationStats
    from desktop_app.engine.explain import explain

    s = GenerationStats(n_tokens=8, n_rounds=9, n_plain_rounds=8, t_plain_s=8 * 0.078, n_drafted=1, n_accepted=1,
                        acceptance_rate=1.0, alpha=1.0, mean_accepted=1.0, mean_drafted=1.0, mean_written=1.0,
                        t_draft_s=0.04, t_verify_s=0.73, t_catch_up_s=0.35, t_other_s=0.35, t_target_step_s=0.078,
                        c=0.47, tokens_per_s=7.23, stop_reason="eos")
    text = explain(s)
    assert ("0.63× its speed, because catching the draft model up on text it had not read took 350 ms of the "
            "1.11 s spent writing this reply (auto has it read the text only once it drafts with it, and this reply "
            "did not repay that; without it, 0.93× plain's speed); a draft step costs 0.47") in text
    # where the catch-up lost all the time the reply lost, it is the one reason given
    alone = explain(dataclasses.replace(s, t_verify_s=0.68, tokens_per_s=8 / 1.07))
    assert "without it, 0.97× plain's speed)." in alone and "draft step costs" not in alone
    # where it lost less than half of that time, it is not named (40 ms of the 95 ms lost)
    brief = dataclasses.replace(s, t_catch_up_s=0.04, t_other_s=0.04, tokens_per_s=8 / 0.7965)
    assert "catching the draft model up" not in explain(brief) and "a draft step costs 0.47" in explain(brief)


def test_explanation_quotes_the_checks_of_its_own_rounds():
    from desktop_app.engine.events import GenerationStats
    from desktop_app.engine.explain import explain
    # 4 drafting rounds of 2 or 3 drafts (10 in all) and 6 plain steps of 30 ms, after 50 ms each of
    # looking for a draft that was dropped: the checks took 0.48 s (120 ms a round), drafting 0.2 s. The machine's cost model prices a 4-token check at 175 ms (its
    # load-time timing): the sentence quotes what this reply's rounds took, a part of the round time
    # it states, never a price that reads dearer than the whole round.
    s = GenerationStats(n_tokens=14, n_rounds=10, n_plain_rounds=6, t_plain_s=0.48, n_drafted=10, n_accepted=4,
                        acceptance_rate=0.4, alpha=0.5, mean_accepted=1.0, mean_drafted=2.5, t_draft_s=0.5,
                        t_verify_s=0.66, t_target_step_s=0.03, c=0.6, tokens_per_s=14 / 1.16,
                        verify_s_by_batch={1: 0.03, 4: 0.175})
    assert s.measured_speedup < 0.95
    text = explain(s)
    assert "giving 2.00 tokens in 170 ms" in text
    assert ("in this reply, checking a round's 3.50 tokens took 120 of the round's 170 ms, 4.0× a single-token pass "
            "(30 ms, without the time between passes)") in text
    # copies cost nothing to draft: the checks are the whole round, said once (it read "102 of those 102 ms")
    copies = dataclasses.replace(s, t_draft_s=0.0, t_plain_s=0.18, t_verify_s=0.18 + 4 * 0.17, c=0.0)
    assert "giving 2.00 tokens in 170 ms" in explain(copies)
    assert "checking a round's 3.50 tokens took all of the round's 170 ms, 5.7× a single-token pass" in explain(copies)
    # ... more than 3.5 single passes: only other work on the machine makes a check that dear (a user's try
    # read 133× a single pass for 9.6 tokens, and the sentence blamed speculation alone)
    assert "which a machine does only while other work slows it: this comparison" in explain(copies)
    assert "other work" not in text                        # (4.0× for 3.5 tokens: within what a check costs)


def test_the_draft_models_catch_up_is_not_counted_into_plain_decodings_rate():
    """Plain decoding's rate counts the loop's own time per round (sampling, text, events) as the reply
    spent it. The draft model's catch-up (auto mode reading the text into it) was counted there too, so
    a reply that caught the model up made plain look slower by as much: the live prime-function reply
    read 0.99× plain in the app, 0.92× against plain decoding from the command line. A reply that
    spends C more seconds catching up keeps plain's rate and loses C in its own."""
    from desktop_app.engine.events import GenerationStats

    base = dict(n_tokens=120, n_rounds=100, n_plain_rounds=95, n_drafted=30, n_accepted=20, t_draft_s=0.6,
                t_verify_s=9.0, t_target_step_s=0.08, stop_reason="eos")
    without = GenerationStats(**base, tokens_per_s=120 / 10.0, t_other_s=0.4)
    caught_up = GenerationStats(**base, tokens_per_s=120 / 11.3, t_other_s=1.7, t_catch_up_s=1.3)
    assert caught_up.plain_tokens_per_s == pytest.approx(without.plain_tokens_per_s)
    assert caught_up.measured_speedup == pytest.approx(without.measured_speedup * 10.0 / 11.3)
    stored = GenerationStats.from_json(caught_up.to_json())                  # (kept in the history)
    assert stored.t_catch_up_s == 1.3
    assert GenerationStats.from_json({**caught_up.to_json(), "t_catch_up_s": None}).t_catch_up_s == 0.0  # (old)


def test_an_unused_draft_model_is_explained_by_the_rounds_auto_waits_or_by_its_cost():
    """Auto first weighs the draft model in a reply's round FIRST_PROBE + 1 (AutoPolicy.begin): a reply of
    FIRST_PROBE rounds or fewer never weighed it, and the sentence says so rather than quote its cost."""
    from desktop_app.engine.auto_policy import FIRST_PROBE
    from desktop_app.engine.events import GenerationStats
    from desktop_app.engine.explain import explain

    def stats(rounds):
        return GenerationStats(n_tokens=rounds, n_rounds=rounds, n_plain_rounds=rounds, t_verify_s=0.08 * rounds,
                               t_target_step_s=0.08, tokens_per_s=12.5, unused_draft_c=0.48, stop_reason="eos")

    assert explain(stats(FIRST_PROBE)).endswith(f"it tries it only after a reply's first {FIRST_PROBE} rounds, "
                                                f"and this one had {FIRST_PROBE}.")
    assert "a step of it would cost 0.48 of a target pass here" in explain(stats(FIRST_PROBE + 1))
    assert "Auto did not draft" not in explain(GenerationStats(**{**stats(20).to_json(), "unused_draft_c": None}))



def test_a_plain_reply_that_looked_for_drafts_quotes_its_own_rate_beside_plain_decodings():
    """Auto drafting nothing still spends time choosing (looking for copies, weighing the draft model).
    The sentence quoted plain decoding's 20.9 tok/s beside the panel's Speed of 20.7 for the same reply
    (a window-shot): it now says what the search took and the reply's own rate, as the panel shows it."""
    from desktop_app.engine.events import GenerationStats
    from desktop_app.engine.explain import explain
    from desktop_app.engine.number_text import rate_text

    # 48 tokens and the end token in 49 passes of 46 ms, 0.1 s between passes, 20 ms choosing
    looked = GenerationStats(n_tokens=48, n_rounds=49, n_plain_rounds=49, t_verify_s=49 * 0.046, t_draft_s=0.02,
                             t_target_step_s=0.046, tokens_per_s=48 / (49 * 0.046 + 0.12), stop_reason="eos")
    text = explain(looked)
    assert rate_text(looked.plain_tokens_per_s) == "20.4 tok/s" and rate_text(looked.tokens_per_s) == "20.2 tok/s"
    assert text == ("Plain decoding: 48 tokens at 46 ms per target pass; counting the time between passes and the "
                    "pass that ended the reply, 20.4 tok/s. Looking for drafts took 20 ms more, so this reply ran "
                    f"at 20.2 tok/s, {looked.measured_speedup:.2f}× plain.")
    # plain decoding itself looks for nothing: its rate is the reply's, said once
    plain = dataclasses.replace(looked, t_draft_s=0.0, tokens_per_s=48 / (49 * 0.046 + 0.1))
    assert rate_text(plain.tokens_per_s) == rate_text(plain.plain_tokens_per_s)
    assert "Looking for drafts" not in explain(plain) and explain(plain).endswith("20.4 tok/s.")
    # plain decoding's few µs a round outside its passes, where its two rates fall either side of a
    # rounding step: no sentence ("took 0 ms more, so this reply ran at 21.2 tok/s, 1.00× plain", a review)
    step = (48 / 21.2501 - 0.1) / 49                  # plain's rate 21.2501 (21.3), the reply's 21.2483 (21.2)
    tiny = dataclasses.replace(plain, t_verify_s=49 * step, t_target_step_s=step, t_draft_s=0.0002,
                               tokens_per_s=48 / (49 * step + 0.1002))
    assert rate_text(tiny.tokens_per_s) != rate_text(tiny.plain_tokens_per_s)
    assert "Looking for drafts" not in explain(tiny)
