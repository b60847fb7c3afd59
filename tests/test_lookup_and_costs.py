"""Prompt lookup (longest earlier match) and the cost model behind auto γ."""
import numpy as np
import pytest

from desktop_app.engine.costs import CostModel, expected_tokens, formula_speedup
from desktop_app.engine.drafters import PromptLookupDrafter
from desktop_app.engine.sampling import GREEDY


def test_lookup_copies_what_followed_the_longest_match():
    d = PromptLookupDrafter(ngram_min=2)
    #          0  1  2  3  4  5  6  7  8  9 10 11 12
    context = [1, 2, 3, 9, 9, 7, 2, 3, 4, 5, 6, 1, 2, 3]
    pos, length = d.find(context)
    assert (pos, length) == (3, 3)                      # [1, 2, 3] at 0..2 beats [2, 3] at 6..7
    proposal = d.draft(context, 4, GREEDY, np.random.default_rng(0))
    # without measured costs the draft is as long as the match (3), within the ceiling (4)
    assert proposal.tokens == [9, 9, 7] and proposal.q == [None] * 3 and proposal.q_token == [1.0] * 3


def test_lookup_prefers_the_latest_of_equal_matches_and_handles_growth_and_edits():
    d = PromptLookupDrafter(ngram_min=2)
    context = [5, 6, 1, 5, 6, 2, 0, 5, 6]
    assert d.find(context)[0] == 5                      # [5, 6] at 3..4 is later than at 0..1
    assert d.draft(context + [2, 0, 5], 3, GREEDY, None).tokens == [6, 2, 0]     # a 5-token match, ceiling 3
    assert d.draft([4, 4, 4], 2, GREEDY, None).tokens == [4]   # context replaced: index rebuilt
    assert d.draft([1, 2, 3], 2, GREEDY, None).tokens == []


def test_expected_tokens_formula():
    assert expected_tokens(0.0, 4) == 1.0
    assert expected_tokens(1.0, 4) == 5.0
    assert abs(expected_tokens(0.5, 2) - 1.75) < 1e-12
    assert abs(formula_speedup(0.8, 4, 0.1) - expected_tokens(0.8, 4) / 1.4) < 1e-12


def _costs(verify_ms: dict, draft_ms: float, alpha_rounds: list[tuple[int, int]]) -> CostModel:
    c = CostModel()
    for k, ms in verify_ms.items():
        c.record_verify(k, ms / 1000)
    c.record_draft("model", 1, draft_ms / 1000)
    for acc, drafted in alpha_rounds:
        c.record_round("model", drafted, acc)
    return c


def test_auto_drafts_nothing_when_no_gamma_beats_plain():
    # This machine's Qwen pair: 27 ms a target step, 17 ms a draft step, verify cost by batch size.
    verify = {1: 27, 2: 52, 3: 69, 5: 103, 9: 148, 17: 196}
    c = _costs(verify, 17, [(4, 4)] * 30)              # every draft kept
    assert c.choose_gamma("model", 16) == 0
    assert c.best_gamma(1.0, 16, 0.017) == 0                   # not even if every draft were kept


def test_auto_drafts_when_drafting_is_cheap_and_verify_flat():
    verify = {1: 30, 2: 31, 3: 32, 5: 34, 9: 38, 17: 46}
    c = _costs(verify, 2, [(8, 8)] * 30)
    g = c.choose_gamma("model", 16)
    assert g >= 4
    c_low = _costs(verify, 2, [(0, 4)] * 30)          # nothing is ever kept
    assert c_low.choose_gamma("model", 16) == 0


def test_auto_predicts_only_from_measured_costs():
    c = CostModel()
    assert c.choose_gamma("model", 8) == 0              # nothing measured: decode plainly
    c.record_verify(1, 0.03)
    assert c.choose_gamma("model", 8) == 0              # no verify batch measured yet
    c.record_verify(2, 0.031)
    c.record_verify(3, 0.032)
    c.record_draft("model", 1, 0.001)
    assert c.choose_gamma("model", 8) >= 1              # cheap drafts, flat verify: draft (extrapolated)


def test_auto_reprobes_after_a_long_plain_streak_only_if_drafting_could_pay():
    cheap = _costs({1: 30, 2: 31, 3: 32, 5: 34}, 2, [(0, 4)] * 10)     # could pay, but α is poor now
    for _ in range(23):
        assert cheap.choose_gamma("model", 4) == 0
        cheap.record_round("model", 0, 0)
    cheap.record_round("model", 0, 0)
    assert cheap.choose_gamma("model", 4) == 1
    hopeless = _costs({1: 27, 2: 52, 3: 69, 5: 103}, 17, [(0, 4)] * 10)  # loses even at α = 0.99
    for _ in range(100):
        hopeless.record_round("model", 0, 0)
        assert hopeless.choose_gamma("model", 4) == 0


def test_lookup_draft_length_follows_match_acceptance_and_verify_cost():
    from desktop_app.engine.drafters import match_bucket

    flat = _costs({1: 30, 2: 31, 3: 32, 5: 34, 9: 38, 17: 46}, 0, [])
    d = PromptLookupDrafter(flat)
    # long match, cheap checks: take all that the ramp allows (3 at first, doubling per kept round)
    d.last_match_len = 20
    lengths = []
    for _ in range(5):
        lengths.append(d.draft_length(20, 40))
        d.observe(lengths[-1], lengths[-1])
    assert lengths == [3, 7, 15, 31, 31]
    d.observe(31, 2)                                      # a miss starts the ramp again
    assert d.draft_length(20, 12) == 3
    steep = _costs({1: 27, 2: 52, 3: 69, 5: 103, 9: 148, 17: 196}, 0, [])
    d = PromptLookupDrafter(steep)
    for _ in range(20):                                   # short matches keep failing here
        d.last_match_len = 2
        d.observe(3, 0)
    assert d.draft_length(2, 8) == 0                      # not worth a verify batch
    for _ in range(20):                                   # long matches are always right
        d.last_match_len = 20
        d.observe(8, 8)
    assert d.draft_length(20, 16) >= 8
    assert match_bucket(3) == 0 and match_bucket(4) == 1 and match_bucket(15) == 2 and match_bucket(40) == 3


def test_machine_drift_moves_all_verify_sizes_and_keeps_auto_plain():
    # Calibrated at load; then hundreds of plain rounds on a machine that got 60 % slower.
    c = _costs({1: 27, 2: 52, 3: 69, 5: 103, 9: 148, 17: 196}, 17, [])
    ratio = c.verify_s[2] / c.verify_s[1]
    for _ in range(300):
        c.record_verify(1, 0.043)
        c.record_round("model", 0, 0)
        assert c.choose_gamma("model", 4) == 0          # no re-probe: drafting cannot pay at any α
    assert abs(c.verify_s[1] - 0.043) < 1e-3
    assert abs(c.verify_s[2] / c.verify_s[1] - ratio) < 1e-9     # the other sizes slowed down alike
    # rounds of one size correct that size's own cost, and only that
    for _ in range(60):
        c.record_verify(2, 0.060)
    assert abs(c.verify_s[2] - 0.060) < 2e-3 and abs(c.verify_s[1] - 0.043) < 1e-3


def test_verify_cost_interpolates_between_measured_sizes():
    c = _costs({1: 10, 5: 50, 9: 70}, 1, [])
    assert abs(c.verify_cost(3) - 0.030) < 1e-9
    assert abs(c.verify_cost(7) - 0.060) < 1e-9
    assert abs(c.verify_cost(13) - 0.090) < 1e-9       # extrapolated from the two largest


def test_copies_not_worth_checking_are_still_judged_by_what_came_next():
    """A copy too short to pay at its match length's acceptance is not drafted, so no verify pass
    ever measures that acceptance. It is judged instead by the tokens the round produced, and the
    estimate can rise until the copy pays (or fall further)."""
    steep = _costs({1: 27, 2: 52, 3: 69, 5: 103, 9: 148, 17: 196}, 0, [])
    d = PromptLookupDrafter(steep)
    context = [1, 2, 3, 9, 1, 2]                          # [1, 2] matched before, then came 3
    short = d.buckets[0]
    assert d.draft(context, 8, GREEDY, None).tokens == []     # at the prior, not worth a verify batch
    before = short.alpha
    d.draft(context + [3], 8, GREEDY, None)               # the round produced what the copy said
    assert short.alpha > before
    after_kept = short.alpha
    d.draft(context, 8, GREEDY, None)                     # a rolled-back context judges nothing
    assert short.alpha == after_kept
    rounds = 0
    while not d.draft(context, 8, GREEDY, None).tokens and rounds < 50:
        d.draft(context + [3], 8, GREEDY, None)
        rounds += 1
    assert 0 < rounds < 50 and d.draft(context, 8, GREEDY, None).tokens[0] == 3
    high = short.alpha
    d.draft(context + [7], 8, GREEDY, None)               # a copy that was wrong
    assert short.alpha < high


def test_copyable_runs_find_the_best_earlier_copy_and_stop_where_known_text_ends():
    from desktop_app.engine.lookup_ceiling import copyable_runs

    #          prompt: 7  1  2  3  4  5  8    reply: 1  2  3  4  9  2  3  4
    assert copyable_runs([7, 1, 2, 3, 4, 5, 8], [1, 2, 3, 4, 9, 2, 3, 4]) == [0, 0, 2, 1, 0, 0, 0, 1]
    # a copy of the reply itself ends where the text known at that point ends (as a lookup's does)
    assert copyable_runs([1, 2], [1, 2, 1, 2, 1, 2]) == [0, 0, 2, 2, 2, 1]
    assert copyable_runs([1, 2, 3], [1, 2, 3], ngram_min=3) == [0, 0, 0]


def test_lookup_ceiling_is_the_cheapest_way_through_the_reply():
    from desktop_app.engine.lookup_ceiling import copyable_runs as copyable_runs_of
    from desktop_app.engine.lookup_ceiling import lookup_ceiling

    prompt, reply = [7, 1, 2, 3, 4, 5, 8], [1, 2, 3, 4, 9, 2, 3, 4]      # copyable runs 0 0 2 1 0 0 0 1
    flat = lambda k: 1.0                                                 # noqa: E731 (a GPU-like verify)
    # rounds: 1, 2, [3 4 +9], 2, 3, 4 (the last copy would overrun the reply): 6 rounds for 8 tokens
    assert lookup_ceiling(prompt, reply, flat, draft_max=4) == 8 / 6
    assert lookup_ceiling(prompt, reply, flat, draft_max=1) == 8 / 7     # [3 +4] or [4 +9], not both
    assert lookup_ceiling(prompt, reply, lambda k: float(k), draft_max=4) == 1.0   # checking costs as much as decoding
    steep = lambda k: 1.0 + 0.8 * (k - 1)                                # noqa: E731
    assert lookup_ceiling(prompt, reply, steep, draft_max=4) == 8 / (5 + 2.6)
    assert lookup_ceiling(prompt, reply, lambda k: None if k > 2 else 1.0, draft_max=4) is None
    # a batch of 3 that costs less than a batch of 2: keeping 1 of a 2-token copy is the cheaper way
    assert copyable_runs_of([7, 1, 2, 3, 4, 5, 8], [1, 2, 3, 9, 9, 9, 9]) == [0, 0, 1, 0, 0, 0, 1]
    assert lookup_ceiling([7, 1, 2, 3, 4, 5, 8], [1, 2, 3, 9, 9, 9, 9], {1: 1.0, 2: 3.0, 3: 1.2}.get,
                          draft_max=2) == 7 / 6.2
    assert lookup_ceiling(prompt, [], flat, draft_max=4) is None


@pytest.mark.network
def test_no_lookup_run_beats_its_ceiling(test_model_path):
    """The ceiling is the best any copy policy can do on a reply. Priced with the same verify costs,
    a real lookup run stays at or under the ceiling of the reply it wrote; on a prompt the reply
    repeats, copying pays."""
    from desktop_app.engine import GREEDY, ModelPair
    from desktop_app.engine.lookup_ceiling import lookup_ceiling
    from tests.engine_helpers import run

    steep = lambda k: 1.0 + 0.5 * (k - 1)                                # noqa: E731
    text = "def area(w, h):\n    return w * h\n\n\ndef area(w, h):\n    return w * h\n\n\ndef area("
    with ModelPair.load(test_model_path) as pair:
        prompt = pair.target.tokenize(text, add_special=True, parse_special=False)   # a text that repeats
        rounds, _, lookup = run(pair, prompt, GREEDY, 32, drafter="lookup", draft_max=8)
    ceiling = lookup_ceiling(prompt, lookup.tokens, steep, draft_max=8)
    priced = len(lookup.tokens) / sum(steep(r.gamma + 1) for r in rounds)
    assert sum(r.accepted for r in rounds) > 0
    assert 1.0 < priced <= ceiling + 1e-9
