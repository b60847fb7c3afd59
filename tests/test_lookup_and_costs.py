"""Prompt lookup (longest earlier match), the cost model, and the lookup ceiling."""
import dataclasses

import numpy as np
import pytest

from desktop_app.engine.costs import DIP_MAX, PRICED_AT_ONCE, CostModel, expected_tokens, speedup_curve
from desktop_app.engine.events import RoundEvent
from desktop_app.engine.metrics import StatsRecorder
from desktop_app.engine.drafters import PromptLookupDrafter
from desktop_app.engine.sampling import GREEDY


def test_lookup_copies_what_followed_the_longest_match():
    d = PromptLookupDrafter(ngram_min=2)
    #          0  1  2  3  4  5  6  7  8  9 10 11 12
    context = [1, 2, 3, 9, 9, 7, 2, 3, 4, 5, 6, 1, 2, 3]
    pos, length = d.find(context)
    assert (pos, length) == (3, 3)                      # [1, 2, 3] at 0..2 beats [2, 3] at 6..7
    proposal = d.draft(context, 4, GREEDY, np.random.default_rng(0))
    # a fixed setting copies γ tokens whenever there is a match, as llama.cpp's ngram-simple does
    assert proposal.tokens == [9, 9, 7, 2] and proposal.q == [None] * 4 and proposal.q_token == [1.0] * 4
    assert d.copy(context, 2) == ([9, 9], 3)


def test_lookup_counts_the_different_tokens_that_followed_the_tail():
    d = PromptLookupDrafter(ngram_min=2)
    assert d.followers([5, 6, 1, 5, 6, 1, 0, 5, 6]) == 1          # [5, 6] was followed by 1 twice
    assert d.followers([5, 6, 1, 5, 6, 2, 0, 5, 6]) == 2          # by 1, then by 2: a copy is a guess
    assert d.followers([5, 6, 1, 7, 8]) == 0 and d.followers([5]) == 0


def test_lookup_prefers_the_latest_of_equal_matches_and_handles_growth_and_edits():
    d = PromptLookupDrafter(ngram_min=2)
    context = [5, 6, 1, 5, 6, 2, 0, 5, 6]
    assert d.find(context)[0] == 5                      # [5, 6] at 3..4 is later than at 0..1
    assert d.draft(context + [2, 0, 5], 3, GREEDY, None).tokens == [6, 2, 0]     # a 5-token match, ceiling 3
    assert d.draft([4, 4, 4], 2, GREEDY, None).tokens == [4, 4]   # context replaced: index rebuilt (a loop)
    assert d.draft([1, 2, 3], 2, GREEDY, None).tokens == []


def test_expected_tokens_formula():
    assert expected_tokens(0.0, 4) == 1.0
    assert expected_tokens(1.0, 4) == 5.0
    assert abs(expected_tokens(0.5, 2) - 1.75) < 1e-12


def _round(drafter: str, gamma: int, kept: int, draft_s: float, verify_s: float) -> RoundEvent:
    return RoundEvent(index=0, drafter=drafter, drafted=tuple(range(gamma)), drafted_text=("x",) * gamma,
                      q=(1.0,) * gamma, p=(1.0,) * gamma, accepted=kept, emitted=tuple(range(kept + 1)),
                      emitted_text=("x",) * (kept + 1), kinds=(), target_top=(), t_draft_s=draft_s,
                      t_verify_s=verify_s, t_round_s=draft_s + verify_s, n_past=10)


def _predicted(rounds, costs: CostModel):
    rec = StatsRecorder(10, 10)
    for r, steps in rounds:
        rec.add_round(r, steps)
    s = rec.finish(sum(r.accepted + 1 for r, _ in rounds), 10.0, 0.0, 0.1, "max_tokens", costs)
    return s.predicted_speedup, s.predicted_speedup_measured


def test_predicted_speedup_is_the_papers_formula_when_every_round_drafts_the_same():
    # draft model, γ 4: three rounds kept 4, 2, 3 (two rejections, α = 9 / 11); a step 10 ms, c = 0.25
    rounds = [(_round("model", 4, k, 0.040, 0.100), 4) for k in (4, 2, 3)]
    flat, measured = _predicted(rounds, CostModel(verify_s={1: 0.040, 5: 0.100}))
    e = expected_tokens(9 / 11, 4)
    assert abs(flat - e / (1 + 4 * 0.25)) < 1e-9
    assert abs(measured - e * 0.040 / (4 * 0.010 + 0.100)) < 1e-9
    # a plain round among them counts as what it was: one token for one single-token pass (plus the
    # time it spent on a draft it then dropped, 4 ms here)
    flat, measured = _predicted(rounds + [(_round("none", 0, 0, 0.004, 0.040), 0)],
                                CostModel(verify_s={1: 0.040, 5: 0.100}))
    assert abs(flat - (3 * e + 1) / (3 * 2.0 + 1.1)) < 1e-9
    assert abs(measured - (3 * e + 1) * 0.040 / (3 * 0.140 + 0.044)) < 1e-9


def test_predicted_speedup_of_mixed_rounds_prices_each_as_it_ran():
    # auto mode: 6 plain rounds, two 15-token copies (kept 15 and 5), one 3-token copy (kept 3), and two
    # draft-model rounds of γ 4 (kept 1 and 0) at 10 ms a step. Before, such a reply was predicted as if
    # every round had drafted the mean γ at the pooled α, with no plain rounds: 1.06x beside a measured
    # 1.26x on the demo pair's edit prompt. Each drafter has its own α and drafting cost.
    costs = CostModel(verify_s={1: 0.060, 4: 0.150, 5: 0.180, 16: 0.500})
    rounds = ([(_round("none", 0, 0, 0.0, 0.060), 0)] * 6
              + [(_round("lookup", 15, 15, 0.0, 0.5), 0), (_round("lookup", 15, 5, 0.0, 0.5), 0),
                 (_round("lookup", 3, 3, 0.0, 0.15), 0),
                 (_round("model", 4, 1, 0.040, 0.18), 4), (_round("model", 4, 0, 0.040, 0.18), 4)])
    flat, measured = _predicted(rounds, costs)
    copied = 2 * expected_tokens(23 / 24, 15) + expected_tokens(23 / 24, 3)     # lookup: α 23 / 24
    modelled = 2 * expected_tokens(1 / 3, 4)                                    # the model: α 1 / 3
    tokens = 6 + copied + modelled
    assert abs(flat - tokens / (6 + 3 + 2 * (1 + 4 * 0.010 / 0.060))) < 1e-9
    assert abs(measured - tokens * 0.060 / (6 * 0.060 + 2 * 0.5 + 0.15 + 2 * (0.040 + 0.180))) < 1e-9
    # (pooling α across the drafters would predict about 1.00x here)
    pooled = 6 + 2 * expected_tokens(24 / 27, 15) + expected_tokens(24 / 27, 3) + 2 * expected_tokens(24 / 27, 4)
    assert abs(measured - pooled * 0.060 / (6 * 0.060 + 2 * 0.5 + 0.15 + 2 * (0.040 + 0.180))) > 0.05


def test_measured_prices_are_the_cost_models_multiples_of_this_replys_single_pass():
    # The cost model was timed on an idle machine (single pass 20 ms, a 3-token check 30 ms); this
    # reply ran on a busy one (its plain rounds took 60 ms). Its checks are priced at 1.5 of its own
    # single pass, not at 30 ms, which is half a single pass here: a prediction with measured costs
    # above the flat-cost one (a 3-token check cheaper than one token's pass) cannot come out.
    costs = CostModel(verify_s={1: 0.020, 3: 0.030})
    rounds = [(_round("none", 0, 0, 0.0, 0.060), 0)] * 4 + [(_round("lookup", 2, k, 0.0, 0.090), 0) for k in (2, 1, 0)]
    flat, measured = _predicted(rounds, costs)
    tokens = 4 + 3 * expected_tokens(3 / 5, 2)
    assert measured == pytest.approx(tokens / (4 + 3 * 1.5)) and measured <= flat


def test_the_pay_curve_prices_checks_at_this_replys_pace():
    # prices timed on an idle machine (single pass 20 ms, a 3-token check 30 ms), a reply at 60 ms a
    # token: the curve's check of 2 drafts costs 1.5 of the reply's passes, as the reply's prediction has it
    alpha = 0.6
    curve = speedup_curve(alpha, 0.0, {1: 0.020, 3: 0.030}, 0.060, [2])
    assert curve[0] == pytest.approx(expected_tokens(alpha, 2) / 1.5)


def _costs(verify_ms: dict) -> CostModel:
    c = CostModel()
    for k, ms in verify_ms.items():
        c.record_verify(k, ms / 1000)
    return c


def test_machine_drift_moves_all_verify_sizes_alike():
    # Calibrated at load; then hundreds of plain rounds on a machine that got 60 % slower.
    c = _costs({1: 27, 2: 52, 3: 69, 5: 103, 9: 148, 17: 196})
    ratio = c.verify_s[2] / c.verify_s[1]
    for _ in range(300):
        c.record_verify(1, 0.043)
    assert abs(c.verify_s[1] - 0.043) < 1e-3
    assert abs(c.verify_s[2] / c.verify_s[1] - ratio) < 1e-9     # the other sizes slowed down alike
    # rounds of one size correct that size's own cost, and only that (in a run of fewer than STALE_TOKENS
    # tokens: past that, the yardstick is stale, test_a_long_run_without_a_single_pass_moves_every_price_alike)
    for _ in range(60):
        c.record_verify(2, 0.060)
    assert abs(c.verify_s[2] - 0.060) < 2e-3 and abs(c.verify_s[1] - 0.043) < 1e-3


def test_a_long_run_without_a_single_pass_moves_every_price_alike():
    # Every pass slows as the context grows (here a single-token pass by 1 % every 8 tokens), and a check
    # of k tokens costs its ratio to it throughout. Fifty rounds copy 16 tokens each, all kept, with no
    # single-token pass among them: the 17-token check keeps its ratio (but for the first STALE_PASSES
    # rounds' creep), and the single pass's price follows the context without one being timed.
    from desktop_app.engine.costs import STALE_PASSES, STALE_TOKENS

    ratios = {1: 1.0, 5: 3.9, 17: 13.2, 33: 22.8}
    single = lambda context: 0.010 * (1 + context / 800)            # noqa: E731
    c = CostModel(verify_s={k: r * single(50) for k, r in ratios.items()})
    context = 50
    for _ in range(50):
        c.record_verify(17, ratios[17] * single(context))
        context += 17
    assert context > 800 and 50 * 17 > STALE_TOKENS and 50 > STALE_PASSES
    assert c.verify_s[17] / c.verify_s[1] == pytest.approx(13.2, rel=0.1)     # (it had crept to 25, and the
    # single pass stayed at its price before the run, half what it costs by the end)
    assert c.verify_s[33] / c.verify_s[1] == pytest.approx(22.8, rel=1e-6)
    assert c.verify_s[1] == pytest.approx(single(context), rel=0.15)     # (its moving average, a few rounds behind)


def test_plain_decoding_is_priced_at_the_context_each_token_was_written():
    # A reply that loops: 40 plain steps at its start, then 30 copies of 32 tokens, all kept, as the
    # context grows from 50 to 1080 tokens and every pass slows with it (a single-token pass from 10.5 to
    # 20.8 ms here; 14 to 26 ms on a 2-core AMD EPYC for the test model's poem). Priced at its plain
    # steps' mean, plain decoding read as fast as the reply ("0.99x plain" in the window, "1.00x" on the
    # command line) where plain decoding of the same reply ran at 0.71 of its speed. The tokens of a round
    # that drafted are priced at the plain steps' mean, times the engine's price of a pass as the round
    # ended over its price at the plain steps: that price moves with the checks once no plain step has
    # timed one for a while (test above). The live estimate is priced as the end.
    from desktop_app.engine.metrics import plain_rate_so_far

    single = lambda context: 0.010 * (1 + context / 1000)             # noqa: E731
    costs = CostModel(verify_s={1: single(50), 33: 22.8 * single(50)})
    recorder, rounds = StatsRecorder(50, 50), []
    context = 50
    plain_s = reply_s = 0.0
    for gamma in [0] * 40 + [32] * 30:
        verify_s = (22.8 * single(context + 16)) if gamma else single(context)
        costs.record_verify(gamma + 1, verify_s)
        r = dataclasses.replace(_round("lookup" if gamma else "none", gamma, gamma, 0.0, verify_s),
                                index=len(rounds), n_past=context, plain_step_s=costs.verify_s[1])
        recorder.add_round(r, 0)
        rounds.append(r)
        plain_s += sum(single(context + k) for k in range(gamma + 1))
        reply_s += verify_s
        context += gamma + 1
    stats = recorder.finish(context - 50, reply_s, 0.0, 0.01, "max_tokens", costs)
    truth = plain_s / reply_s
    assert truth > 1.4 and stats.t_target_step_s * (context - 50) / reply_s < 1.0   # (the plain steps' mean)
    assert stats.measured_speedup == pytest.approx(truth, abs=0.25)     # (1.22: the price lags the context a
    assert stats.measured_speedup > 1.2                                 # few checks, test above)
    assert plain_rate_so_far(rounds) == pytest.approx(stats.plain_tokens_per_s)
    # the engine's price moves it, whatever its level: a price 30 % low throughout (the ratios between
    # check sizes timed at load off) gives the same, where the reply timed plain steps of its own
    low = [dataclasses.replace(r, plain_step_s=0.7 * r.plain_step_s) for r in rounds]
    assert plain_rate_so_far(low) == pytest.approx(stats.plain_tokens_per_s)
    # and a round that came without a price is left out of it, not the reply's pricing with it
    unpriced = rounds[:50] + [dataclasses.replace(rounds[50], plain_step_s=0.0)] + rounds[51:]
    assert plain_rate_so_far(unpriced) == pytest.approx(stats.plain_tokens_per_s, rel=0.02)
    # a reply decoded plainly throughout is priced at its own passes: exactly 1.00x
    plain_only = StatsRecorder(50, 50)
    for r in rounds[:40]:
        plain_only.add_round(r, 0)
    stats = plain_only.finish(40, sum(r.t_round_s for r in rounds[:40]), 0.0, 0.01, "max_tokens", costs)
    assert stats.measured_speedup == pytest.approx(1.0)


def test_a_size_first_timed_in_a_long_run_moves_only_its_own_price_until_established():
    # A review's case: the yardstick stale, a size never timed before is first timed while the machine
    # held it up (twice its cost), then timed right. Moving every price with it, it had halved them all
    # (the single pass at 5 ms where it costs 10). It moves its own price until timed ESTABLISHED times.
    from desktop_app.engine.costs import ESTABLISHED, STALE_PASSES

    c = CostModel(verify_s={1: 0.010, 33: 0.250})
    for _ in range(STALE_PASSES):
        c.record_verify(33, 0.250)
    c.record_verify(12, 0.200)                     # 0.100 when not held up
    for _ in range(30):
        c.record_verify(12, 0.100)
    assert c.verify_s[12] == pytest.approx(0.100, rel=0.01)
    assert c.verify_s[1] > 0.0085                  # (most of its error gone before it counts: ESTABLISHED)
    assert c.verify_s[33] / c.verify_s[1] == pytest.approx(25.0)
    before = dict(c.verify_s)
    other = c.for_another_count()                  # another thread count: its own rounds correct its prices
    other.record_verify(33, 1.5 * c.verify_s[33])
    assert other.verify_s[33] / other.verify_s[1] > 1.05 * c.verify_s[33] / c.verify_s[1] and c.verify_s == before
    held = CostModel(verify_s={1: 0.010, 33: 0.250})   # ... and a size timed once, held up, is no better
    held.record_verify(12, 0.200)                      # established there (a review: it counted as priced
    other = held.for_another_count()                   # at load, and halved every price)
    for _ in range(STALE_PASSES):
        other.record_verify(33, 0.250)
    for _ in range(ESTABLISHED - 2):
        other.record_verify(12, 0.100)
    assert other.verify_s[1] == pytest.approx(0.010)


def test_a_yardstick_timed_wrong_is_corrected_by_the_first_pass_that_shows_it():
    # A load calibrated while the machine was swamped: every pass priced 45× too dear, or the single-
    # token pass alone too dear. Noise only slows a pass, so one pass far faster than its price, or a
    # check of 5 tokens faster than one token is priced, moves every size at once.
    right = {1: 70, 2: 100, 5: 160, 9: 230}
    swamped = _costs({k: 45 * ms for k, ms in right.items()})
    swamped.record_verify(5, 0.160)                      # a draft-model round: no plain step to correct it
    for k, ms in right.items():
        assert swamped.verify_s[k] == pytest.approx(ms / 1000)
    single_only = _costs({**right, 1: 3190})
    single_only.record_verify(5, 0.160)
    assert single_only.verify_s[1] <= 0.160 and single_only.verify_s[5] == pytest.approx(0.160)
    assert all(single_only.verify_s[k] >= single_only.verify_s[1] for k in right)
    # one size alone timed during a burst (priced above 5 single passes): only its own price was wrong
    one_size = _costs({**right, 5: 45 * 160})
    one_size.record_verify(5, 0.160)
    assert one_size.verify_s == pytest.approx({k: ms / 1000 for k, ms in right.items()})
    both = _costs({**{k: 45 * ms for k, ms in right.items()}, 5: 100 * 160})   # and the yardstick too
    both.record_verify(5, 0.160)
    assert both.verify_s[5] == both.verify_s[1] == pytest.approx(0.160)   # (at most what 5 tokens took)
    assert both.verify_s[9] / both.verify_s[2] == pytest.approx(230 / 100)   # the others keep their ratios
    # a slow pass is only noise: it moves the cost a fifth of the way, as one 1.5 times its cost would
    steady = _costs(right)
    steady.record_verify(5, 0.200)
    assert steady.verify_s[5] == pytest.approx(0.8 * 0.160 + 0.2 * 0.200) and steady.verify_s[1] == 0.070
    steady.record_verify(5, 0.480)
    assert steady.verify_s[5] == pytest.approx(0.8 * 0.168 + 0.2 * 1.5 * 0.168)


def test_one_pass_held_up_moves_the_costs_little_and_the_draft_step_moves_with_the_machine():
    """A new user's try of the window: after a reply that drafted with the model at 0.50 of a pass, the
    next reply, decoded plainly, priced a step at 0.10 of a pass, and auto's reason for not drafting
    rested on it. A pass held up by another program for a moment had moved every verify price by
    EMA's share of it (a tenfold pass: 2.8 times), and the draft model's step, held still, read cheap."""
    c = _costs({1: 70, 2: 100, 5: 160})
    c.record_draft("model", 4, 4 * 0.035)
    c.record_prefill("model", 64, 0.035 + 64 * 0.005)
    c.record_verify(1, 0.700)                            # one plain step held up tenfold
    assert c.verify_s[1] == pytest.approx(0.070 * 1.1) and c.verify_s[5] / c.verify_s[1] == pytest.approx(160 / 70)
    for _ in range(100):                                 # then a machine twice as slow, for a while
        c.record_verify(1, 0.140)
    assert c.verify_s[1] == pytest.approx(0.140, rel=1e-3)
    assert c.draft_step_s["model"] / c.verify_s[1] == pytest.approx(0.5)      # a step is still half a pass
    assert c.prefill_s["model"] == pytest.approx(0.010, rel=1e-3)            # and a token read, as dear
    c.record_draft("model", 1, 1.0)                      # a draft step held up: a tenth of the way at most
    assert c.draft_step_s["model"] == pytest.approx(0.070 * 1.1, rel=1e-3)
    c.record_draft("model", 1, 1.0)                      # and again: no moment's hold-up, so it counts whole
    assert c.draft_step_s["model"] == pytest.approx(0.8 * 0.077 + 0.2 * 1.0, rel=1e-3)
    read = c.prefill_s["model"]
    c.record_prefill("model", 64, c.draft_step_s["model"] + 64 * 10 * read)   # one slow read: 10 % at most
    assert c.prefill_s["model"] == pytest.approx(1.1 * read)
    prices = (dict(c.verify_s), dict(c.draft_step_s), dict(c.prefill_s))
    for seconds in (0.0, -0.01, float("nan")):           # a clock's slip moves nothing
        c.record_verify(1, seconds)
        c.record_verify(2, seconds)
        c.record_prefill("model", 64, seconds)
    assert (c.verify_s, c.draft_step_s, c.prefill_s) == prices


def test_a_draft_steps_price_keeps_its_ratio_through_a_busy_spell_and_after_it():
    """A spell of 0.6-4 s passes on a 60 ms machine (a compile job beside it): the draft step, held
    still, read 0.03 of a pass in it; moved by the slow updates alone, 10.2 passes after it, when the
    spell's first fast pass lowered every verify size at once (FAR_BELOW) and not the step. It keeps
    its 0.58 through both. And a single pass timed wrong at load, found so by a faster check, takes
    the step (priced as a ratio to it) down with it."""
    c = _costs({1: 60, 2: 80, 5: 130})
    c.record_draft("model", 1, 0.035)
    for k in range(40):
        c.record_verify(1, 0.6 + 3.4 * (k % 7) / 6)
        assert c.draft_step_s["model"] / c.verify_s[1] == pytest.approx(0.035 / 0.060)
    assert c.verify_s[1] > 20 * 0.060
    c.record_verify(1, 0.060)                            # the spell is over
    assert c.verify_s[1] == pytest.approx(0.060) and c.draft_step_s["model"] == pytest.approx(0.035)
    burst = _costs({1: 45 * 70, 2: 45 * 100, 5: 100 * 160})   # every size timed in a burst, and 5 above 5
    burst.draft_step_s["model"] = 0.58 * 45 * 0.070             # single passes: found so by one check
    burst.record_verify(5, 0.160)
    assert burst.verify_s[5] == burst.verify_s[1] == pytest.approx(0.160)
    assert burst.draft_step_s["model"] == pytest.approx(0.58 * 0.160)
    mistimed = _costs({1: 3000, 2: 80, 5: 130})          # the single pass timed while the machine was swamped
    mistimed.draft_step_s["model"] = 0.58 * 3.0
    mistimed.record_verify(5, 0.130)
    assert mistimed.verify_s[1] == pytest.approx(0.080) and mistimed.draft_step_s["model"] == pytest.approx(0.58 * 0.080)


def test_prompt_passes_are_timed_per_token():
    c = CostModel()
    c.record_prefill("model", 4, 1.0)                   # too few tokens to say
    assert "model" not in c.prefill_s
    c.record_prefill("model", 100, 0.5)
    assert abs(c.prefill_s["model"] - 0.005) < 1e-12


def test_a_catch_up_is_priced_as_a_step_plus_its_tokens():
    """Timed on a 2-core Xeon (demo draft, 2026-12-05): a catch-up of 12 tokens took 99.5 ms, of 33
    tokens 218 ms and of 64 tokens 379 ms, with a 34 ms step. Priced from the 64-token pass at a
    token's share of it (5.9 ms), 12 tokens were 71 ms; as the step plus a share of the rest, each is
    within 3 % of its timing. A few tokens ride along in the first draft pass: their share only. A
    step timed slow leaves a token at least half its share of the whole pass."""
    c = CostModel(draft_step_s={"model": 0.034})
    c.record_prefill("model", 64, 0.379)
    for n, ms in ((12, 99.5), (33, 218.0), (64, 379.0)):
        assert c.prefill_cost("model", n) == pytest.approx(ms / 1000, rel=0.03)
    assert c.prefill_cost("model", 3) == pytest.approx(3 * (0.379 - 0.034) / 64)
    assert c.prefill_cost("model", 0) == 0.0
    c.verify_s[1] = 0.080                               # the target reads even 3 tokens in a pass of its own
    c.record_prefill("target", 64, 0.080 + 64 * 0.004)
    assert c.prefill_cost("target", 3) == pytest.approx(0.080 + 3 * 0.004)
    slow = CostModel(draft_step_s={"model": 0.300})
    slow.record_prefill("model", 64, 0.379)
    assert slow.prefill_s["model"] == pytest.approx(0.379 / 2 / 64)


def test_verify_cost_interpolates_between_measured_sizes():
    c = _costs({1: 10, 5: 50, 9: 70})
    assert abs(c.verify_cost(3) - 0.030) < 1e-9
    assert abs(c.verify_cost(7) - 0.060) < 1e-9
    assert abs(c.verify_cost(13) - 0.090) < 1e-9       # extrapolated from the two largest


def test_every_size_is_repriced_when_a_measured_price_moves():
    """Every size's price is worked out once per state of the measured ones (CostModel.verify_costs,
    what auto reads two or three times a round): a timing, a price moved in place (the yardstick) and
    a size timed for the first time must each re-price every size in between at once."""
    c = _costs({1: 10, 5: 50, 9: 70})
    assert c.verify_costs()[7] == pytest.approx(0.060) == c.verify_cost(7)
    c.record_verify(9, 0.080)                          # 70 ms moves a fifth of the way to 80
    assert c.verify_cost(7) == pytest.approx(0.050 + 0.5 * 0.022) == c.verify_costs()[7]
    c.verify_s[1] *= 2                                 # moved in place, as a busy machine moves every price
    assert c.verify_cost(3) == pytest.approx(0.035) and c.verify_cost(1) == pytest.approx(0.020)
    del c.verify_s[5]                                  # (a size no longer priced)
    assert c.verify_cost(3) == pytest.approx(0.020 + 2 * 0.052 / 8)
    c.record_verify(17, 0.100)                         # a size timed for the first time
    assert c.verify_cost(17) == pytest.approx(0.100) and c.verify_cost(13) == pytest.approx(0.086)
    assert c.verify_cost(40) == pytest.approx(0.072 + 31 * 0.028 / 8)   # past the sizes priced together
    assert CostModel().verify_costs() == (None,) * (PRICED_AT_ONCE + 1)   # nothing timed: nothing known


def test_a_check_is_never_priced_at_a_fraction_of_a_smaller_one():
    """A timing taken while the machine was busy priced a 33-token check at 1.7 single passes where 17
    tokens cost 8.6 (a user's load): the price is floored at DIP_MAX of the nearest smaller size
    measured, and at a single-token pass. A small dip, as kernels' tiles make (16 tokens below 15),
    stands; a smaller size timed slow raises only the next one. And no check is priced above as many
    single passes as it has tokens: a load beside other jobs remembered a 3-token check at 8.6 single
    passes, and the "Does it pay?" curve dipped to 0.3x at γ 2, where it was about 0.9x."""
    c = _costs({1: 10, 15: 80, 16: 70, 17: 86, 33: 17})
    assert c.verify_cost(16) == pytest.approx(0.070)
    assert c.verify_cost(33) == pytest.approx(DIP_MAX * 0.086)
    slow = _costs({1: 10, 4: 2000, 5: 15, 8: 30, 17: 86})           # 4 tokens timed while the machine was busy
    assert slow.verify_cost(4) == pytest.approx(0.040)              # at most 4 single passes
    assert slow.verify_cost(5) == pytest.approx(DIP_MAX * 0.040)    # (floored at its capped price)
    assert slow.verify_cost(8) == pytest.approx(0.030) and slow.verify_cost(17) == pytest.approx(0.086)
    assert slow.verify_cost(3) == pytest.approx(0.030)              # (interpolated towards it: capped too)
    burst = _costs({1: 37, 2: 55, 3: 37 * 8.65, 5: 100})
    curve = burst.speedup_curve(0.94, 0.026, 0.037, [1, 2, 3, 4])
    assert burst.verify_cost(3) == pytest.approx(3 * 0.037) and burst.verify_cost(4) == pytest.approx(3 * 0.037)
    assert curve[1] == pytest.approx(expected_tokens(0.94, 2) * 0.037 / (2 * 0.026 + 3 * 0.037))   # (0.28 priced as timed)
    busy = _costs({1: 100, 5: 20, 17: 30})                       # single passes timed on a swamped machine
    assert busy.verify_cost(17) == busy.verify_cost(5) == pytest.approx(0.100)   # (a "54× predicted")


def test_lookup_copies_a_loop_on_past_the_end_of_the_text():
    d = PromptLookupDrafter(ngram_min=2)
    # the tail [1, 2, 3, 1, 2] matches 3 tokens back over 5 tokens: the text is in a loop of 3
    assert d.copy([7, 1, 2, 3, 1, 2, 3, 1, 2], 8) == ([3, 1, 2, 3, 1, 2, 3, 1], 5)
    # a match shorter than the distance back to it is no loop: copied only as far as the text goes
    assert d.copy([1, 2, 3, 4, 5, 9, 4, 5], 8) == ([9, 4, 5], 2)


def test_copyable_runs_find_the_best_earlier_copy_and_copy_a_loop_on():
    from desktop_app.engine.lookup_ceiling import copyable_runs

    #          prompt: 7  1  2  3  4  5  8    reply: 1  2  3  4  9  2  3  4
    assert copyable_runs([7, 1, 2, 3, 4, 5, 8], [1, 2, 3, 4, 9, 2, 3, 4]) == [0, 0, 2, 1, 0, 0, 0, 1]
    # a copy of the reply itself goes on past the text known at that point as the loop it is in
    assert copyable_runs([1, 2], [1, 2, 1, 2, 1, 2]) == [0, 0, 4, 3, 2, 1]
    assert copyable_runs([5, 1, 2, 3], [1, 2, 9]) == [0, 0, 0]
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


@pytest.mark.network
def test_a_copy_stops_at_the_end_of_a_turn(test_model_path):
    """A reply whose last words match the end of the user's message: the copy ran on through the chat
    template (<|im_end|>, <|im_start|>assistant, ...), and auto checked 16 tokens of which at most two
    could be kept (a user's try of the window). A copy now ends with the first end-of-generation token."""
    from desktop_app.engine import ModelPair

    prompt = ("<|im_start|>user\nAdd type hints: def mean(xs): return total(xs) / len(xs)<|im_end|>\n"
              "<|im_start|>assistant\n")
    with ModelPair.load(test_model_path) as pair:
        model = pair.target
        context = model.tokenize(prompt, add_special=True, parse_special=True)
        context += model.tokenize("def mean(xs: list[float]) -> float:\n    return total(xs) / len(xs",
                                  add_special=False, parse_special=False)
        ends = [i for i, t in enumerate(context) if model.is_eog(t)]
        assert ends, "the chat template's end-of-turn token is an end-of-generation token"
        unbounded, length = PromptLookupDrafter().copy(context, 16)
        assert length >= 4 and len(unbounded) == 16          # on through the template: what it did
        copy, same_length = PromptLookupDrafter(ends=model.is_eog).copy(context, 16)
        assert same_length == length
        assert copy == unbounded[:len(copy)] and model.is_eog(copy[-1])
        assert not any(model.is_eog(t) for t in copy[:-1]) and len(copy) <= 3
        # the decoder's own prompt lookup is the bounded one
        assert pair.decoder.drafters["lookup"].copy(context, 16) == (copy, length)


def test_the_copies_auto_passed_over_are_told_with_what_a_check_costs():
    """explain.passed_copies: how much of the copies auto passed over the target wrote, out of how many
    plain steps, and what a copy is weighed against: where every check costs a single-token pass or more
    per token no copy can pay, elsewhere the price of a one-token copy's check; one copy is told as one,
    and nothing where none."""
    from desktop_app.engine.events import GenerationStats
    from desktop_app.engine.explain import passed_copies

    some = dict(n_tokens=120, n_plain_rounds=90, n_copies_passed=40, n_copies_passed_right=26, n_copies_passed_kept=112)
    head = ("In 40 of its 90 plain steps auto passed over a copy of earlier text: the target then wrote the copy's "
            "first token in 26 of them, and on average 2.8 tokens of each copy")
    weighed = (", and auto drafts a copy only where the copies kept so far in the reply make it likely to pay (a copy "
               "of one token is checked in a 2-token pass, here {} single-token passes).")
    costs = {"steep": ({1: 0.03, 2: 0.057, 5: 0.12, 17: 0.26, 33: 0.5}, weighed.format("1.9")),
             "cheap": ({1: 0.03, 2: 0.033, 5: 0.036, 17: 0.045}, weighed.format("1.1")),
             "linear": ({1: 0.03, 2: 0.06, 5: 0.15, 17: 0.51, 33: 0.99},
                        ", and no copy can pay here: every check costs a single-token pass or more per token it checks."),
             "unknown": ({}, ".")}
    for verify, tail in costs.values():
        assert passed_copies(GenerationStats(**some, verify_s_by_batch=verify)) == head + tail
    one = dict(some, n_copies_passed=1, n_copies_passed_right=1, n_copies_passed_kept=7)
    assert passed_copies(GenerationStats(**one)) == ("In one of its 90 plain steps auto passed over a copy of earlier "
                                                     "text: the target then wrote 7 tokens of it.")
    assert passed_copies(GenerationStats(**dict(one, n_copies_passed_kept=0))).endswith("then wrote none of it.")
    assert passed_copies(GenerationStats(**dict(some, n_copies_passed=0))) == ""


def test_a_reply_s_repeated_share_counts_its_own_runs_not_the_prompt_s():
    """metrics.repeated_share: the tokens that end a run of REPEAT_RUN the reply had written before."""
    from desktop_app.engine.metrics import REPEAT_RUN, repeated_share

    line = list(range(10))
    assert repeated_share(line) == 0.0 and repeated_share([]) == 0.0
    assert repeated_share(line * 3) == pytest.approx(13 / 30)     # the second line from its 8th token, all the third
    assert repeated_share([7] * (REPEAT_RUN + 4)) == pytest.approx(4 / (REPEAT_RUN + 4))
