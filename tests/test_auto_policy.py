"""Auto mode's policy (engine/auto_policy.py) on given costs: no model, no timing."""
import pytest

from desktop_app.engine.auto_policy import (AUTO_GAMMA_MAX, LOOKUP_PRIOR, PLAIN, AutoPolicy, Choice, Copy,
                                            ModelOption, reply_horizon)
from desktop_app.engine.cost_profiles import AVX2, GPU, STEEP, XEON
from desktop_app.engine.costs import CostModel


def _policy(profile, draft=True) -> AutoPolicy:
    costs = profile.cost_model()
    if not draft:
        costs.draft_step_s.pop("model")
    policy = AutoPolicy(costs)
    policy.begin()
    return policy


def _round(policy, context, choice, kept, seconds=0.05, confidence=None):
    policy.observe(choice, choice.gamma, kept, seconds, confidence)


def test_auto_decodes_plainly_until_a_cost_is_measured():
    policy = AutoPolicy(CostModel())
    policy.begin()
    copy = Copy(tuple(range(10, 26)), 40)
    assert policy.choose(list(range(50)), 16, copy, ModelOption(0), 100, 0) == PLAIN


def test_copies_are_judged_from_the_text_whether_drafted_or_not():
    """Copies after a two-token match that turn out wrong make such copies not worth a verify batch
    on a steep CPU, so they stop being drafted. They are still judged by the text that follows:
    once copies turn out right again, the estimate rises until copying pays again."""
    policy = _policy(STEEP, draft=False)
    copy = (7, 8, 9, 10)
    text = [1, 2]
    for _ in range(60):                           # every copy wrong at once
        choice = policy.choose(text, 8, Copy(copy, 2), None, 100, 0)
        _round(policy, text, choice, 0)
        text = text + [99, 1, 2]
    assert policy.choose(text, 8, Copy(copy, 2), None, 100, 0).drafter == "none"
    rounds = 0
    while True:
        text = text + list(copy) + [1, 2]         # the text went on as the copy said, then repeats the match
        choice = policy.choose(text, 8, Copy(copy, 2), None, 100, 0)
        _round(policy, text, choice, 0)
        rounds += 1
        if choice.drafter == "lookup" or rounds > 60:
            break
    assert choice.drafter == "lookup" and 1 <= choice.gamma <= len(copy) and 1 < rounds <= 60


def test_copies_that_fail_at_once_lower_the_estimates_of_longer_copies_too():
    """A copy that fails at its first token never reaches the bins of longer matches, so those stay
    at their priors however often copies fail here. On a flat verify curve that kept auto drafting
    16-token copies after two-token matches that nearly all failed at once (the demo pair's story,
    gpu profile). Such failures now scale every bin's prior down by the same ratio, and the drafts
    shorten or stop. Copies that are kept leave the priors as they are."""
    copy = tuple(range(10, 26))
    failing = _policy(GPU, draft=False)
    text = [1, 2]
    first = failing.choose(text, 16, Copy(copy, 2), None, 200, 0)
    for _ in range(12):                           # every copy wrong at its first token
        _round(failing, text, failing.choose(text, 16, Copy(copy, 2), None, 200, 0), 0)
        text = text + [99, 1, 2]
    later = failing.choose(text, 16, Copy(copy, 2), None, 200, 0)
    assert first.drafter == "lookup" and first.gamma >= 8
    assert later.drafter == "none" or later.gamma < first.gamma / 2
    assert failing.lookup["prompt"].keep(16) < 0.8 * LOOKUP_PRIOR["prompt"][6]     # the 16-token bin, never seen

    kept = _policy(GPU, draft=False)
    text = [1, 2]
    for _ in range(12):                           # every copy right
        _round(kept, text, kept.choose(text, 16, Copy(copy, 2), None, 200, 0), 0)
        text = text + list(copy) + [1, 2]
    assert kept.lookup["prompt"].shrink() == 1.0 and kept.lookup["prompt"].keep(64) >= LOOKUP_PRIOR["prompt"][-1]


def test_copy_length_follows_the_verify_costs():
    """The same copy after a long match: a long draft where checking is nearly free, a shorter one
    where each checked token costs most of a pass, never longer than the copy or the room."""
    copy = Copy(tuple(range(100, 132)), 40)
    context = list(range(60))
    flat = _policy(GPU, draft=False).choose(context, AUTO_GAMMA_MAX, copy, None, 200, 0)
    steep = _policy(STEEP, draft=False).choose(context, AUTO_GAMMA_MAX, copy, None, 200, 0)
    assert flat.drafter == steep.drafter == "lookup"
    assert flat.gamma > steep.gamma >= 1 and flat.gamma <= 32
    assert _policy(GPU, draft=False).choose(context, 5, copy, None, 200, 0).gamma <= 5


def test_the_draft_model_is_never_read_where_it_cannot_pay():
    """On the steep CPU a draft step costs 0.6 of a pass and a batch of 5 costs 3.6 passes: the draft
    model loses even if every guess were kept, so auto never explores it and never pays its
    catch-up (the prompt pass it would need)."""
    policy = _policy(STEEP)
    context = list(range(300))
    for i in range(400):
        choice = policy.choose(context, 32, None, ModelOption(len(context) - 1), 500, i)
        assert choice.drafter == "none"
        _round(policy, context, choice, 0)
        context = context + [i]


def _explore(policy, kept_of, rounds=60, behind=40, confidence=None):
    """Drive the policy on a text with no copies; the draft model keeps kept_of(γ) of γ drafts, and
    the target is as sure of its own tokens as `confidence` says (None: not told)."""
    context = list(range(1000, 1100))
    used = []
    for _ in range(rounds):
        choice = policy.choose(context, 32, None, ModelOption(behind), 400, len(context) - 100)
        kept = kept_of(choice.gamma) if choice.drafter == "model" else 0
        _round(policy, context, choice, kept, confidence=confidence)
        used.append(choice)
        if choice.drafter == "model":
            behind = 0
        context = context + [7] * (kept + 1)
    return used


def test_a_good_draft_model_is_explored_then_used_on_its_own_estimate():
    policy = _policy(GPU)
    used = _explore(policy, lambda g: g, confidence=0.97)   # every draft kept, on a text the target is sure of
    model = [c for c in used if c.drafter == "model"]
    assert model and any(not c.probe for c in model)        # chosen on what it showed
    assert model[-1].gamma >= 4 and model[-1].gamma > model[0].gamma     # longer as its drafts prove right
    assert sum(c.drafter == "model" for c in used[-20:]) >= 18


def test_a_poor_draft_model_costs_few_rounds_and_is_tried_again_when_the_text_changes():
    policy = _policy(GPU)
    for _ in range(5):                                      # five replies where the model is useless
        used = _explore(policy, lambda g: 0, rounds=100, confidence=0.6)
        assert sum(c.drafter == "model" for c in used) <= 6
        policy.begin()
    used = _explore(policy, lambda g: g, rounds=100, confidence=0.97)   # then a reply it predicts well
    assert sum(c.drafter == "model" for c in used[-40:]) >= 36


def _first_model_round(profile, behind, left, reply_len, rounds=40):
    """The first of `rounds` plain rounds (the target 90 % sure of its tokens) in which auto chooses
    the draft model, `behind` tokens behind, in a reply `reply_len` long with `left` tokens left by
    max_tokens; None: never."""
    policy = _policy(profile)
    costs = profile.cost_model()
    for i in range(rounds):
        choice = policy.choose(list(range(behind + 1)), 32, None, ModelOption(behind), left - i, reply_len + i)
        if choice.drafter == "model":
            return i
        policy.observe(choice, 0, 0, costs.verify_cost(1), 0.9)
    return None


def test_catching_the_draft_model_up_is_weighed_against_what_it_would_gain():
    """With a draft model worth exploring on a GPU, a short text is worth catching up on; a long one
    whose reply is nearly over is not: the catch-up is spread over the tokens left."""
    assert _first_model_round(GPU, 30, 200, 0) is not None
    assert _first_model_round(GPU, 3000, 8, 184, rounds=8) is None


def test_a_short_answer_does_not_pay_the_draft_model_s_catch_up_for_max_tokens_it_never_writes():
    """On the xeon profile, a draft model 121 tokens behind (a conversation it has not read) is worth
    catching up on in a long reply, but not in the first 48 tokens of one that max_tokens would let
    run to 1024 (it was, after 32: the catch-up was spread over 256 tokens that may never come):
    a reply that has run for n tokens is about as likely as not to end within n more, so its
    catch-up is spread over twice the reply so far, at least 64 tokens (reply_horizon)."""
    assert reply_horizon(1016, 8) == 64 and reply_horizon(1000, 200) == 256 and reply_horizon(20, 200) == 20
    assert _first_model_round(XEON, 121, 1000, 150) is not None
    assert _first_model_round(XEON, 121, 1016, 8) is None


def test_a_check_timed_while_the_machine_was_busy_is_not_bet_on():
    """A user's "Count from 1 to 30 in words": at "nineteen, twenty, twenty" the tail ", twenty"
    repeats the two tokens before it, a loop to lookup, which copies it on for 32 tokens. The load
    had timed a 33-token check at 1.7 single passes (17 tokens: 8.6), and auto checked all 32 on a
    two-token match: 13.6 passes for one token. Priced no lower than 0.75 of 17 tokens, it does not."""
    costs = AVX2.cost_model()
    costs.verify_s[33] = 1.69 * costs.verify_s[1]
    policy = AutoPolicy(costs)
    policy.begin()
    loop = Copy(tuple([11, 17073] * 16), 2)
    assert policy.choose(list(range(100)), 32, loop, None, 1000, 40).gamma < 8


def test_a_draft_model_judged_only_at_its_first_position_is_probed_at_most_twice_as_deep():
    """Kept at γ 1 (8 of 10), then unused for a while: the upper bounds of the positions never
    judged are their priors', near 1, and the probe was 14 tokens long; it goes twice as deep as the
    drafts were judged."""
    policy = _policy(XEON)
    context = list(range(1000, 1100))
    for i in range(10):
        policy.observe(Choice("model", 1, 1.0), 1, int(i % 5 != 0), 0.05, 0.8)
    for _ in range(20):
        policy.observe(PLAIN, 0, 0, 0.05, 0.8)
    choice = policy.choose(context, 32, None, ModelOption(0), 400, 100)
    assert choice.drafter == "model" and choice.probe and choice.gamma == 2


def test_a_draft_model_that_keeps_about_half_of_its_drafts_is_not_probed_round_after_round():
    """The window's defaults (auto, sampled at temperature 0.7) on a 2-core AMD EPYC, asked for a
    prime-checking function: the target was 97 % sure of its tokens, and a 16-token check cost about
    as much as a 9-token one (5 single passes), so auto probed the draft model at γ 15. It kept 15,
    then 1, 6, 15, 7, 11 and 0, and auto went on probing, each round on the upper bound of what the
    model had shown: 29 rounds drafted, and the reply ran at 0.81x plain. A probe is one round; after
    it the model drafts only where its estimate wins, and is probed again after a gap that doubles.
    Costs as that machine timed them; the same keep runs, from three places in the cycle."""
    ms = {1: 40.2, 2: 67.5, 3: 100.0, 4: 115.0, 5: 147.0, 8: 187.7, 9: 206.1, 16: 203.8, 17: 251.2, 33: 399.6}
    runs = [15, 1, 6, 15, 7, 11, 0]
    for start in range(3):
        costs = CostModel()
        costs.verify_s.update({k: v / 1000 for k, v in ms.items()})
        costs.draft_step_s["model"] = 0.0183
        costs.prefill_s["model"] = 0.0042
        policy = AutoPolicy(costs)
        policy.begin()
        cycle = iter((runs[start:] + runs) * 40)
        used = _explore(policy, lambda g: min(g, next(cycle)), rounds=150, behind=112, confidence=0.966)
        model = [c for c in used if c.drafter == "model"]
        assert model and model[0].probe and model[0].gamma >= 8     # it is tried, deep
        assert len(model) <= 8                                       # (12-94 of 150 when probes ran on)


def test_a_new_reply_does_not_trust_the_last_reply_s_draft_model():
    """After a reply where every draft was kept, the next reply starts with the draft model untried
    (how well it guesses is the text's): no long bet on the last reply's record in its first round,
    but a probe after eight rounds, and on a text where the draft is always wrong, few rounds lost. The
    last reply's confidence counts for only a few rounds."""
    policy = _policy(GPU)
    used = _explore(policy, lambda g: g, rounds=100, confidence=0.99)
    assert used[-1].drafter == "model" and used[-1].gamma >= 16
    policy.begin()
    assert policy.confidence > 0.95
    used = _explore(policy, lambda g: 0, rounds=40, confidence=0.9)
    model = [i for i, c in enumerate(used) if c.drafter == "model"]
    assert model and model[0] == 8 and used[model[0]].probe
    assert len(model) <= 4
    assert 0.89 < policy.confidence < 0.91


def test_a_short_match_that_was_followed_by_different_tokens_is_a_guess_of_its_own():
    """After a 3-token match whose last tokens were followed by different tokens before, the copy's
    first token is a guess between them (on the recorded traces kept 0.15 and 0.08 of the time after
    2 and 3 tokens, against 0.54 and 0.76 after unambiguous short matches). On the steep CPU auto copies after the unambiguous
    match and not after the ambiguous one. Such guesses failing says nothing of unambiguous copies,
    and guesses that turn out right are learnt from the text until they are drafted."""
    policy = _policy(STEEP, draft=False)
    copy = (7, 8, 9, 10)
    context = list(range(60))
    assert policy.choose(context, 8, Copy(copy, 3), None, 200, 0).drafter == "lookup"
    assert policy.choose(context, 8, Copy(copy, 3, ambiguous=True), None, 200, 0).drafter == "none"
    policy.drop_copies()                          # (that context is not the text below)
    text = [1, 2, 3]
    for _ in range(30):                           # every guess wrong at once
        choice = policy.choose(text, 8, Copy(copy, 3, ambiguous=True), None, 200, 0)
        _round(policy, text, choice, 0)
        text = text + [99, 1, 2, 3]
    policy.settle(text)
    assert policy.lookup_ambiguous.keep(1) < 0.1                              # (from its prior, 0.2)
    assert policy.lookup["prompt"].keep(3) == pytest.approx(LOOKUP_PRIOR["prompt"][1], abs=0.01)   # the unambiguous bins: untouched
    assert policy.choose(text, 8, Copy(copy, 3), None, 200, 0).drafter == "lookup"   # (nor of the guessed token)
    policy.drop_copies()                          # (judged only as guesses below)
    assert policy.lookup["prompt"].tried[2] == 0
    rounds = 0
    while True:                                   # now every guess is right
        text = text + list(copy) + [1, 2, 3]
        choice = policy.choose(text, 8, Copy(copy, 3, ambiguous=True), None, 200, 0)
        _round(policy, text, choice, 0)
        rounds += 1
        if choice.drafter == "lookup" or rounds > 80:
            break
    assert choice.drafter == "lookup" and 1 < rounds <= 80
    policy.settle(text)
    assert policy.lookup["prompt"].tried[2] > 0             # a right guess's next tokens: judged at L = 4, 5 as usual


def test_copies_of_the_reply_and_of_the_prompt_are_learnt_apart():
    """A copy of the reply's own earlier text is kept far less often than a copy of the prompt after
    a match as long (0.44 against 0.70 after two tokens on the recorded traces), so the two are learnt
    apart, each from its own prior: a reply whose copies of itself keep failing still copies the prompt
    (other tokens than those failing: a token the reply has replaced stops a copy of either source)."""
    from desktop_app.engine.drafters import PromptLookupDrafter

    prompt = [50, 51, 52, 53, 54, 55]
    reply = [60, 61, 62, 50, 51]                  # the reply repeats the prompt's start
    found = Copy.find(PromptLookupDrafter(), prompt + reply, 8, len(reply))
    assert found.source == "prompt" and found.tokens[:4] == (52, 53, 54, 55)
    reply = [60, 61, 62, 63, 60, 61]              # ... its own start
    found = Copy.find(PromptLookupDrafter(), prompt + reply, 8, len(reply))
    assert found.source == "reply" and found.tokens[:2] == (62, 63)

    policy = _policy(STEEP, draft=False)
    copy = (7, 8, 9, 10)
    text = [1, 2, 3]
    for _ in range(30):                           # every copy of the reply wrong at once
        choice = policy.choose(text, 8, Copy(copy, 3, source="reply"), None, 200, 0)
        _round(policy, text, choice, 0)
        text = text + [99, 1, 2, 3]
    policy.settle(text)
    assert policy.lookup["reply"].keep(3) < LOOKUP_PRIOR["reply"][1] - 0.2
    assert policy.lookup["prompt"].keep(3) == pytest.approx(LOOKUP_PRIOR["prompt"][1], abs=0.01)
    assert policy.choose(text, 8, Copy(copy, 3, source="reply"), None, 200, 0).drafter == "none"
    policy.drop_copies()
    other = (17, 18, 19, 20)                      # (not `copy`: its first token, replaced 30 times, is priced on its own record)
    assert policy.choose(text, 8, Copy(other, 3), None, 200, 0).drafter == "lookup"


def test_a_reply_copying_itself_starts_from_what_such_copies_kept_on_the_recorded_traces():
    """A copy of the reply's own text after a 5-token match, 15 tokens long, on the steep machine's
    curve (a 16-token check costs 5 single passes there, about what 9 tokens cost): at the prompt's
    priors (0.8-0.94 a token) it is predicted to pay, and auto drafted such copies in sampled answers
    and kept 1-3 of 15. From the reply's own priors (0.67 a token from 4 to 11) it does not pay, while
    the same copy of the prompt still does."""
    from desktop_app.engine.cost_profiles import CostProfile
    ratios = {1: 1.0, 2: 1.66, 3: 2.22, 4: 2.71, 5: 3.44, 8: 4.65, 9: 5.07, 16: 5.19, 17: 6.21, 33: 9.6}
    tiles = CostProfile("tiles", "scripts/check_costs.py, 2-core AMD EPYC", {k: 35.0 * r for k, r in ratios.items()}, 17.0)
    copy = tuple(range(100, 115))
    for source, drafts in (("reply", False), ("prompt", True)):
        policy = _policy(tiles, draft=False)
        choice = policy.choose([1, 2, 3, 4, 5], 32, Copy(copy, 5, source=source), None, 200, 20)
        assert (choice.drafter == "lookup") == drafts, (source, choice)


def test_a_copy_stops_before_a_token_the_reply_has_replaced():
    """A reply that renames a variable, or writes one-line code's ";" as line breaks, replaces the same
    prompt token wherever a copy reaches it. Once a copy has failed at a token, a later copy through that
    token is drafted up to it, not past it (a user's one-line rename ran at 0.89x plain in the window,
    its copies failing at ";" and ":"). A copy through a token never replaced is drafted past it, as
    before; a replaced token the reply then keeps again is trusted again."""
    policy = _policy(XEON, draft=False)
    text = [1, 2, 3]
    for r in range(6):                                # copies of the prompt, each right for 12 tokens
        body = tuple(range(100 + 20 * r, 112 + 20 * r))
        choice = policy.choose(text, 32, Copy(body, 6), None, 400, len(text))
        text = text + list(body)
        _round(policy, text, choice, min(choice.gamma, 12))
    choice = policy.choose(text, 32, Copy((30, 31, 7, 32, 33, 34), 6), None, 400, len(text))
    text = text + [30, 31, 8, 32, 33, 34]             # the reply has 8 where the prompt has 7
    _round(policy, text, choice, 2)

    def through(token):                               # a copy with `token` at its sixth place
        return Copy((40, 41, 42, 43, 44, token, 45, 46, 47, 48, 49, 50, 51, 52), 6)
    def gamma(copy):                                  # (a look only: the copy is not judged by the text below)
        choice = policy.choose(text, 32, copy, None, 400, len(text))
        policy.drop_copies()
        return choice.gamma
    assert gamma(through(7)) == 5
    assert gamma(through(99)) >= 12
    policy.choose(text, 32, through(7), None, 400, len(text))   # found twice at one place: judged once
    policy.choose(text, 32, Copy((40, 41, 42, 43, 44, 7, 53), 6), None, 400, len(text))
    assert policy.replaced(7) == (0, 1)
    policy.settle(text + [40, 41, 42, 43, 44, 8])
    assert policy.replaced(7) == pytest.approx((0, 1.7))
    policy.drop_copies()
    for r in range(8):                                # 7 is copied and kept again
        policy.choose(text, 32, Copy((60 + r, 7, 61 + r), 6), None, 400, len(text))
        text = text + [60 + r, 7, 61 + r]
    policy.settle(text)
    assert gamma(through(7)) >= 12
    for r in range(3):                                # ... replaced again; a new reply starts without that record
        policy.choose(text, 32, Copy((70 + r, 7, 71 + r), 6), None, 400, len(text))
        text = text + [70 + r, 8, 71 + r]
    policy.settle(text)
    assert gamma(through(7)) < 12
    policy.begin()
    assert policy.replaced(7) is None and gamma(through(7)) >= 12
