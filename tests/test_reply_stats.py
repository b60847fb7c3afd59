"""A reply's statistics from its rounds (metrics.from_rounds) and over two runs (metrics.continued, for
Continue): the same figures as one run of all its rounds would give."""
from __future__ import annotations

import pytest

from desktop_app.engine.costs import CostModel
from desktop_app.engine.events import RoundEvent
from desktop_app.engine.metrics import StatsRecorder, continued, from_rounds

COSTS = CostModel(verify_s={1: 0.040, 3: 0.070, 5: 0.100})


def _round(drafter: str, gamma: int, kept: int, draft_s: float, verify_s: float) -> RoundEvent:
    return RoundEvent(index=0, drafter=drafter, drafted=tuple(range(gamma)), drafted_text=("x",) * gamma,
                      q=(1.0,) * gamma, p=(1.0,) * gamma, accepted=kept, emitted=tuple(range(kept + 1)),
                      emitted_text=("x",) * (kept + 1), kinds=(), target_top=(), t_draft_s=draft_s,
                      t_verify_s=verify_s, t_round_s=draft_s + verify_s + 0.002, n_past=10)


def _run(rounds, prompt_s: float, ttft_s: float):
    """The statistics the decoder would give a run of `rounds` (draft-model rounds step once per token)."""
    rec = StatsRecorder(20, 20)
    for r in rounds:
        rec.add_round(r, r.gamma if r.drafter == "model" else 0)
    decode_s = sum(r.t_round_s for r in rounds)
    return rec.finish(sum(r.n_reply_tokens for r in rounds), prompt_s + decode_s, prompt_s, ttft_s, "max_tokens",
                      COSTS)


FIRST = [_round("model", 4, k, 0.040, 0.100) for k in (4, 1)] + [_round("none", 0, 0, 0.001, 0.040)] * 3
SECOND = [_round("model", 3, k, 0.030, 0.070) for k in (0, 3, 2)] + [_round("lookup", 2, 2, 0.0005, 0.055)]


def test_two_runs_add_up_to_the_whole_reply():
    first, second = _run(FIRST, 0.5, 0.6), _run(SECOND, 0.01, 0.08)
    whole = continued(first, second, FIRST + SECOND)
    one = _run(FIRST + SECOND, 0.5, 0.6)          # the same rounds as one run, its prompt the first's
    for name in ("n_tokens", "n_rounds", "n_plain_rounds", "n_drafted", "n_accepted", "acceptance_rate", "alpha",
                 "mean_accepted", "mean_drafted", "mean_written", "position_acceptance", "t_draft_s",
                 "t_verify_s", "t_other_s", "t_plain_s", "t_draft_step_s", "t_target_step_s", "tokens_per_s",
                 "ttft_s", "n_prompt_tokens"):
        assert getattr(whole, name) == pytest.approx(getattr(one, name)), name
    assert whole.t_total_s == pytest.approx(first.t_total_s + second.t_total_s)
    assert whole.c == pytest.approx(whole.t_draft_step_s / whole.plain_pass_s)
    assert whole.measured_speedup == pytest.approx(whole.tokens_per_s / whole.plain_tokens_per_s)
    low, high = sorted((first.predicted_speedup, second.predicted_speedup))
    assert low < whole.predicted_speedup < high


def test_a_run_without_statistics_is_counted_from_its_rounds():
    """An interrupted reply keeps no statistics: what its rounds say stands for them, plain rounds and
    time included (they read 0, and the footer said "drafted in 45 of 45 rounds" beside 40 plain ones)."""
    counted = from_rounds(FIRST)
    assert (counted.n_rounds, counted.n_plain_rounds) == (5, 3)
    assert counted.t_total_s == pytest.approx(sum(r.t_round_s for r in FIRST))
    assert counted.t_plain_s == pytest.approx(3 * 0.041)
    whole = continued(counted, _run(SECOND, 0.01, 0.08), FIRST + SECOND)
    assert (whole.n_rounds, whole.n_plain_rounds, whole.n_tokens) == (9, 3, 10 + 11)
    assert whole.ttft_s == 0.0                  # (not known: the panel says "–")
    assert whole.tokens_per_s == pytest.approx(whole.n_tokens / sum(r.t_round_s for r in FIRST + SECOND))
