"""Compare (speculation off, then on) on the real test pair: in the session, in the window, and the
target's top-two logits that explain a greedy divergence."""
from __future__ import annotations

import dataclasses

from dataclasses import asdict, replace

import numpy as np
import pytest
from PySide6.QtCore import Qt

from desktop_app.chat import compare as compare_module
from desktop_app.chat.compare import (NEAR_TIE, CompareRun, compare, compare_prompt, first_difference,
                                      greedy_reason)
from desktop_app.chat.history import HistoryStore
from desktop_app.chat.session import ChatSession, GenerationOptions
from desktop_app.engine import GREEDY, FinishEvent, LoadOptions, ModelPair, SamplingParams, SpecSettings
from desktop_app.engine.events import TokenEvent
from desktop_app.engine.number_text import duration_text, rate_number, rate_text
from desktop_app.engine.process.client import EngineProcess

from engine_helpers import run
from test_ui_window import TIMEOUT_MS, load, stored, type_and_send, wait_idle

pytestmark = pytest.mark.network      # every test here needs a fetched model

OPTIONS = GenerationOptions(sampling=GREEDY, spec=SpecSettings(drafter="model", draft_max=4), max_tokens=32)
LOAD = LoadOptions(n_ctx=2048, n_threads=2)
COMPARE_TIMEOUT_MS = 3 * TIMEOUT_MS   # two replies on a shared, busy machine


@pytest.fixture(scope="module")
def pair(test_model_path, q2k_draft_path):
    with ModelPair.load(test_model_path, q2k_draft_path, LOAD) as p:
        yield p


@pytest.fixture
def session(pair, tmp_path):
    store = HistoryStore(tmp_path / "history.db")
    yield ChatSession(pair, store, flush_interval_s=0.0)
    store.close()


def consume(events):
    return [e for e in events if isinstance(e, FinishEvent)][-1]


def snapshot(store, cid):
    conv = store.conversation(cid)
    return (conv.title, conv.system_prompt, conv.first_turn, [asdict(m) for m in conv.messages])


def assert_explained_if_different(result):
    """Greedy texts may part only at a near-tie of the target's top two logits (batch rounding); the
    result must then say where and show that tie."""
    if result.identical:
        assert result.first_difference is None and result.off.text == result.on.text
        return
    d = result.first_difference
    assert d is not None and d.gap is not None and d.gap <= NEAR_TIE and "near-tie" in d.reason, d


def test_compare_reruns_the_last_message_off_then_on_and_stores_nothing(session, pair, monkeypatch):
    store = session.store
    cid = store.create_conversation(system_prompt="You are a helpful assistant.")
    first = consume(session.send(cid, "What is the capital of France?", OPTIONS))
    consume(session.send(cid, "Name three rivers in Europe.", OPTIONS))
    before = snapshot(store, cid)
    stored_reply = store.messages(cid)[-1]
    said, ended = [], []

    monkeypatch.setattr(compare_module, "TICK_S", 0.0)      # (each token: at most once a second in the window)
    result = compare(session, cid, OPTIONS, progress=said.append, run_done=ended.append)

    assert not result.cancelled and result.off.finished and result.on.finished
    steps = [m for m in said if ": " not in m]
    assert len(steps) >= 3 and "Reading" in steps[0] and "without" in steps[1] and "with speculation" in steps[2]
    # and how far each run has got, as it goes: a bare "Running …" over empty panes for minutes read as hung
    ticks = [m for m in said if m.startswith("Running without speculation (off): ")]
    assert ticks[0].startswith(f"Running without speculation (off): 1 of at most {OPTIONS.max_tokens} tokens, ")
    assert len(ticks) == result.off.stats.n_tokens
    assert ended == [result.off, result.on]                   # each run reported as it ended
    # both runs find the prompt read, so their times to first token compare like with like (the first
    # used to read it all and the second reuse it)
    assert result.off.stats.n_prompt_evaluated == result.on.stats.n_prompt_evaluated == 1
    # the prompt is the conversation up to its last user message: the stored reply's own prompt
    prompt = compare_prompt(session, store.conversation(cid))
    assert result.n_prompt == len(prompt) == result.on.stats.n_prompt_tokens == result.off.stats.n_prompt_tokens
    conv = store.conversation(cid)
    assert prompt == session.prompt_tokens(replace(conv, messages=conv.messages[:-1]))   # (the last reply left out)
    assert session.prompt_tokens(conv)[:len(prompt) + len(stored_reply.token_ids)] == prompt + stored_reply.token_ids
    assert any(prompt[i:i + len(first.tokens)] == list(first.tokens) for i in range(len(prompt)))   # turn 1 in it
    # speculation off drafted nothing; on drafted with the model, and the runs share one seed
    assert result.off.stats.n_drafted == 0 and result.off.stats.n_plain_rounds == result.off.stats.n_rounds > 0
    assert result.on.stats.n_drafted > 0 and result.on.spec.speculating and result.on.spec.drafter == "model"
    assert result.on.first_gamma == OPTIONS.spec.draft_max and result.off.first_gamma == 0   # (its first round)
    assert result.sampling.seed is not None
    for r in (result.off, result.on):
        s = r.stats
        assert s.n_tokens == len(r.tokens) > 0 and s.tokens_per_s > 0 and s.t_total_s > 0 and 0 < s.ttft_s <= s.t_total_s
        assert r.text and r.stop_reason in ("eos", "max_tokens")
    assert result.speedup == pytest.approx(result.on.stats.tokens_per_s / result.off.stats.tokens_per_s)
    # greedy: identical (or a near-tie, explained), answering the message the stored reply answers
    assert_explained_if_different(result)
    assert result.identical, result.first_difference
    assert list(result.on.tokens[:3]) == stored_reply.token_ids[:3]
    # nothing was written: the same messages, contents and count
    assert snapshot(store, cid) == before
    # the conversation goes on, reusing its cache: the next turn evaluates its new tokens only
    n_before = pair.target_ctx.n_evaluated
    reply = consume(session.send(cid, "Thanks!", OPTIONS))
    assert reply.stats.n_prompt_evaluated <= len(session.prompt_tokens(store.conversation(cid))) - len(prompt)
    assert pair.target_ctx.n_evaluated - n_before < len(prompt)
    assert [m.role for m in store.messages(cid)] == ["user", "assistant"] * 3


class CancelMidRun:
    """The pair, but the session's controls are cancelled (as the worker's Stop does) once the run with
    speculation has emitted its fourth token."""

    def __init__(self, session):
        self.session, self.pair = session, session.pair

    def __getattr__(self, name):
        return getattr(self.pair, name)

    def generate(self, prompt, sampling, controls, *args):
        for event in self.pair.generate(prompt, sampling, controls, *args):
            yield event
            if isinstance(event, TokenEvent) and controls.settings.speculating and event.index == 3:
                self.session.controls.cancel()


def test_compare_is_cancelled_by_the_sessions_controls(session, pair):
    cid = session.store.create_conversation()
    session.add_user_message(cid, "Write a long story about a dragon.")
    before = snapshot(session.store, cid)
    session.pair = CancelMidRun(session)
    try:
        result = compare(session, cid, replace(OPTIONS, max_tokens=64))
    finally:
        session.pair = pair
    assert result.cancelled and result.off.finished and len(result.off.tokens) == 64
    assert not result.on.finished and result.on.stop_reason == "cancelled"
    assert 4 <= result.on.stats.n_tokens < 4 + OPTIONS.spec.draft_max + 1      # stopped within the round
    assert result.first_difference is None and not result.identical
    assert snapshot(session.store, cid) == before
    # the next compare starts afresh
    result = compare(session, cid, replace(OPTIONS, max_tokens=8))
    assert not result.cancelled and len(result.off.tokens) == 8


def test_a_sampled_compare_says_the_texts_differ_by_chance(session):
    cid = session.store.create_conversation()
    session.add_user_message(cid, "Write a short poem about the sea.")
    sampling = SamplingParams(temperature=1.0, seed=7)
    result = compare(session, cid, replace(OPTIONS, sampling=sampling, max_tokens=48))
    assert result.sampling.seed == 7
    if result.identical:                 # (possible by chance: then nothing needs explaining)
        assert result.first_difference is None
        return
    d = result.first_difference
    assert result.off.tokens[:d.position] == result.on.tokens[:d.position]
    assert "by chance" in d.reason and "seed 7" in d.reason and d.gap is None
    assert "to see identical texts" not in d.reason and "nearly tied" in d.reason   # (greedy texts can part too)


# -- top_logits: the target's two best tokens, and a forced divergence explained with them

def top_logit_checks(pair, prompt, tokens):
    """top_logits along a plain greedy reply: two tokens, best first, the best being the token greedy
    decoding chose (unless those two are within batch rounding of each other)."""
    clear = 0
    for i in range(0, len(tokens), 3):
        top = pair.top_logits(prompt + list(tokens[:i]), 2)
        assert len(top) == 2 and top[0][0] != top[1][0] and top[0][1] >= top[1][1]
        if top[0][1] - top[1][1] > 1e-3:
            assert top[0][0] == tokens[i], f"position {i}: top {top}, greedy chose {tokens[i]}"
            clear += 1
    assert clear >= len(range(0, len(tokens), 3)) - 1


def plain_run(pair, prompt, max_tokens=24):
    rounds, token_events, finish = run(pair, prompt, GREEDY, max_tokens=max_tokens, enabled=False)
    r = CompareRun("off", SpecSettings(enabled=False), finish.text, tuple(finish.tokens), stats=finish.stats,
                   stop_reason=finish.stop_reason.value, rounds=len(rounds), finished=True)
    text = ""
    for t in token_events:
        r.offsets.append(len(text))
        text += t.text
    return r


def test_top_logits_give_the_greedy_choice_and_explain_a_forced_divergence(session, pair):
    cid = session.store.create_conversation()
    session.add_user_message(cid, "List five facts about the Moon.")
    prompt = compare_prompt(session, session.store.conversation(cid))
    off = plain_run(pair, prompt)
    assert len(off.tokens) >= 12
    logits = pair.top_logits(prompt, 5)
    assert [v for _, v in logits] == sorted((v for _, v in logits), reverse=True)
    top_logit_checks(pair, prompt, off.tokens)

    # force a divergence: from position 6 the "on" run took the target's second-best token
    p = 6
    top = pair.top_logits(prompt + list(off.tokens[:p]), 2)
    assert top[0][0] == off.tokens[p]
    on = CompareRun("on", SpecSettings(), off.text[:off.offsets[p]] + "X", off.tokens[:p] + (top[1][0],),
                    off.offsets[:p + 1], finished=True)
    d = first_difference(pair, prompt, off, on, GREEDY)
    assert d.position == p and (d.off_token, d.on_token) == (top[0][0], top[1][0])
    assert [(t, v) for t, v, _ in d.top] == [(t, pytest.approx(v, abs=1e-4)) for t, v in top]
    assert d.gap == pytest.approx(top[0][1] - top[1][1], abs=1e-4) and d.gap >= 0
    assert d.top[0][2] == pair.target.special_piece(top[0][0]).decode("utf-8", "replace") == d.off_piece
    assert d.before == off.text[:off.offsets[p]][-40:] and d.on_after == "X"
    assert d.off_after == off.text[off.offsets[p]:off.offsets[p] + 40]
    assert f"{d.gap:.4f}" in d.reason
    assert ("near-tie" in d.reason) == (d.gap <= NEAR_TIE) and ("unexpected" in d.reason) == (d.gap > NEAR_TIE)

    # the words for a near-tie, and for a gap rounding cannot explain
    tie = ((5, 12.3456, " cat"), (9, 12.3311, " dog"))
    said = greedy_reason(tie, 0.0145, 5, 9, " cat", " dog")
    assert "near-tie" in said and "0.0145" in said and "“ cat”" in said and "batch" in said
    assert "unexpected" in greedy_reason(((5, 14.0, " cat"), (9, 12.0, " dog")), 2.0, 5, 9, " cat", " dog")

    # a divergence at the reply's end: one run stopped where the other went on
    shorter = CompareRun("on", SpecSettings(), off.text[:off.offsets[p]], off.tokens[:p], off.offsets[:p],
                         stop_reason="eos", finished=True)
    d = first_difference(pair, prompt, off, shorter, GREEDY)
    assert d.position == p and d.on_token is None and d.off_token == off.tokens[p] and d.on_piece == "(end of reply)"


def test_the_engine_process_answers_top_logits_as_the_pair_does(pair, test_model_path, q2k_draft_path):
    engine = EngineProcess()
    try:
        remote = engine.load(test_model_path, q2k_draft_path, LOAD, LOAD)
        from desktop_app.chat.template import ChatTemplate, Message

        prompt = ChatTemplate(remote.target).tokenize([Message("user", "Name one animal.")])
        _, _, finish = run(remote, prompt, GREEDY, max_tokens=16, enabled=False)
        top_logit_checks(remote, prompt, finish.tokens)
        for i in (0, 5):
            here, there = pair.top_logits(prompt + list(finish.tokens[:i]), 2), \
                remote.top_logits(prompt + list(finish.tokens[:i]), 2)
            assert [t for t, _ in here] == [t for t, _ in there]
            assert np.allclose([v for _, v in here], [v for _, v in there], atol=0.05)
    finally:
        engine.shutdown()


# -- the window

def test_the_compare_button_shows_both_runs_side_by_side(qtbot, window, test_model_path, q2k_draft_path):
    w = window
    assert not w.compare_button.isEnabled() and not w.compare_action.isEnabled()
    load(qtbot, w, test_model_path, q2k_draft_path)
    # the draft model at a fixed γ, so that the "on" run drafts on any machine: a fresh install's Auto
    # drafts only where this machine's costs say it pays (it drafted nothing in one CI run here)
    qtbot.mouseClick(w.spec_bar.drafter_buttons["model"], Qt.LeftButton)
    w.settings_panel.temperature.setValue(0.0)
    w.settings_panel.max_tokens.setValue(32)
    w.new_conversation()
    assert not w.compare_button.isEnabled()                  # no user message yet
    type_and_send(qtbot, w, "What is the capital of France?")
    wait_idle(qtbot, w)
    assert w.compare_button.isEnabled() and w.compare_action.isEnabled()
    assert w.compare_action.shortcut().toString() == "Ctrl+Shift+K"
    before_db = [asdict(m) for m in stored(w)]
    before_view = [(m.role, m.text) for m in w.chat.messages]
    results = []
    w.worker.compared.connect(results.append)                # (on the worker's thread: a list append)

    qtbot.mouseClick(w.compare_button, Qt.LeftButton)
    dialog = w.compare_dialog
    assert dialog is not None and dialog.isVisible() and not dialog.isModal()
    assert w.busy and not w.compare_button.isEnabled() and not w.regenerate_button.isEnabled()
    shown = []                         # each run as the dialog shows it, and whether the result had come
    show_run = dialog.show_run
    dialog.show_run = lambda run: (shown.append((run.label, dialog.result is None)), show_run(run))
    try:
        qtbot.waitUntil(lambda: dialog.result is not None and not w.busy, timeout=COMPARE_TIMEOUT_MS)
    except Exception:
        raise AssertionError(f"no result: {dialog.status.text()!r}, busy {w.busy}")

    result = dialog.result
    assert results and results[0] is result
    # each run showed as soon as it ended, before the result (it showed nothing until both had: over
    # a minute on a slow machine, a user's try)
    assert shown[:2] == [("off", True), ("on", True)]
    assert not result.cancelled
    assert dialog.headers["on"].text() == f"<b>Speculation on (draft model, γ = {result.on.spec.draft_max})</b>"
    assert_explained_if_different(result)
    assert result.identical, result.first_difference
    assert dialog.verdict.text().startswith("Identical texts") and f"{len(result.on.tokens)} tokens" in dialog.verdict.text()
    for c, r in (("off", result.off), ("on", result.on)):
        s = r.stats
        assert dialog.cells["ttft"][c].text() == duration_text(s.ttft_s)
        assert dialog.cells["speed"][c].text() == rate_text(s.tokens_per_s)
        assert dialog.cells["total"][c].text() == duration_text(s.t_total_s)
        assert dialog.cells["tokens"][c].text() == str(len(r.tokens)) and len(r.tokens) > 0
        assert dialog.texts[c].toPlainText() == r.text and dialog.texts[c].isReadOnly()
    assert dialog.cells["drafts"]["off"].text() == "–" and result.on.stats.n_drafted > 0
    assert f"{result.on.stats.n_accepted} of {result.on.stats.n_drafted}" in dialog.cells["drafts"]["on"].text()
    assert f"{result.speedup:.2f}×" in dialog.speedup.text()
    assert f"({rate_number(result.on.stats.tokens_per_s)} against {rate_text(result.off.stats.tokens_per_s)})" \
        in dialog.speedup.text()
    # a gain with no draft kept is the machine's noise, and says so (4.33× with 0 of 3 kept read as one)
    on_stats = result.on.stats
    lucky = dataclasses.replace(result, on=dataclasses.replace(result.on, stats=dataclasses.replace(
        on_stats, n_accepted=0, tokens_per_s=2 * result.off.stats.tokens_per_s)))
    dialog.show_result(lucky)
    assert dialog.speedup.text().startswith("Speed-up with speculation, measured in this compare: 2.00×")
    assert "No draft was kept, so speculation cannot have made this reply faster" in dialog.speedup.text()
    dialog.show_result(result)
    assert "No draft was kept" not in dialog.speedup.text()
    # runs on different thread counts (automatic threads, other work busy) are not like for like
    busy = dataclasses.replace(
        result, off=dataclasses.replace(result.off, stats=dataclasses.replace(result.off.stats, threads=1, threads_most=2)),
        on=dataclasses.replace(result.on, stats=dataclasses.replace(on_stats, threads=2, threads_most=2)))
    dialog.show_result(busy)
    assert ("llama.cpp ran on fewer threads for some of this compare (without speculation 1 thread of 2, with "
            "it 2 threads): the two runs are not like for like") in dialog.speedup.text()

    def threads(n, mixed=False):
        return {run: dataclasses.replace(getattr(result, run), stats=dataclasses.replace(
            getattr(result, run).stats, threads=n, threads_most=2, threads_mixed=mixed and run == "on"))
            for run in ("off", "on")}

    assert "fewer threads" not in dataclasses.replace(result, **threads(1)).caveat   # (both alike: one thread)
    assert "(without speculation 1 thread of 2, with it 1 thread of 2 for part of it)" in \
        dataclasses.replace(result, **threads(1, mixed=True)).caveat
    dialog.show_result(result)
    # one speed-up in the dialog: the table's is the summary's (not each run's against a plain rate timed apart)
    assert dialog.cells["vs_off"]["off"].text() == "1.00×" and dialog.cells["vs_off"]["on"].text() == f"{result.speedup:.2f}×"
    # the conversation, shown and stored, is as it was; the reply is the one the compare reproduced
    assert [asdict(m) for m in stored(w)] == before_db
    assert [(m.role, m.text) for m in w.chat.messages] == before_view
    assert list(result.on.tokens[:3]) == before_db[-1]["token_ids"][:3]
    # and the chat goes on
    type_and_send(qtbot, w, "And of Italy?")
    wait_idle(qtbot, w)
    db = stored(w)
    assert [m.role for m in db] == ["user", "assistant"] * 2 and db[-1].complete and db[-1].content
    assert w.chat.messages[-1].text == db[-1].content


def test_the_on_column_says_what_auto_may_draft_with_and_when_it_drafted_nothing():
    """Auto's column said "Speculation on (draft model, auto)" over a run that drafted nothing (a user's
    try): auto chooses round by round, and the setting's drafter is only what it may use."""
    from desktop_app.engine.metrics import GenerationStats
    from desktop_app.ui.compare_dialog import spec_words

    auto = SpecSettings(drafter="model", auto=True)
    assert spec_words(CompareRun("on", auto)) == "Speculation on (auto: draft model or prompt lookup, round by round)"
    nothing = CompareRun("on", auto, stats=GenerationStats(n_tokens=40, n_drafted=0))
    assert spec_words(nothing).endswith("round by round; it drafted nothing)")
    drafted = CompareRun("on", auto, stats=GenerationStats(n_tokens=40, n_drafted=12, n_accepted=9))
    assert "drafted nothing" not in spec_words(drafted)
    fixed = CompareRun("on", SpecSettings(drafter="lookup", draft_max=6))
    assert spec_words(fixed) == "Speculation on (prompt lookup, γ = 6)"
    assert spec_words(CompareRun("off", SpecSettings(enabled=False))) == "Speculation off"
    # speculation off in the chat: the run with it uses the bar's last setting, and says so (silently: a
    # new user's try)
    assert spec_words(fixed, off_in_chat=True) == "Speculation on (off in the chat; its last setting: prompt lookup, γ = 6)"
    assert spec_words(CompareRun("off", SpecSettings(enabled=False)), off_in_chat=True) == "Speculation off"


def test_a_sampled_compares_status_says_its_replies_are_new_ones(qtbot):
    """A user's try: Compare's speculation-off run wrote another answer than the chat's (553 tokens against
    236), and nothing said that a sampled compare draws new replies rather than timing the one shown."""
    from desktop_app.chat.compare import CompareResult
    from desktop_app.engine.metrics import GenerationStats
    from desktop_app.ui.compare_dialog import CompareDialog

    def result(sampling):
        runs = [CompareRun(label, SpecSettings(enabled=label == "on"), "text", (1, 2), [0, 2],
                           GenerationStats(n_tokens=2, tokens_per_s=10.0, t_total_s=0.3), "eos", 2, True)
                for label in ("off", "on")]
        return CompareResult(1, 10, sampling, 48, *runs, identical=True)

    dialog = CompareDialog()
    qtbot.addWidget(dialog)
    dialog.show_result(result(SamplingParams(temperature=0.8, seed=5)))
    assert ("sampled at temperature 0.8, seed 5 for both runs: two new replies, not the one in the chat"
            in dialog.status.text())
    dialog.show_result(result(SamplingParams(temperature=0.0)))
    assert "greedy (temperature 0)" in dialog.status.text() and "new replies" not in dialog.status.text()
    # (its plain run was faster than the chat's plain rate: a user's try; the window's drawing is why)
    assert "Neither run is shown while it is written" in dialog.status.text()



def test_a_run_stop_cut_short_shows_its_numbers_beside_its_text(qtbot):
    """A new user's try: Stop during the run with speculation left its text shown and every number "–"."""
    from desktop_app.chat.compare import CompareResult
    from desktop_app.engine.metrics import GenerationStats
    from desktop_app.ui.compare_dialog import CompareDialog

    off = CompareRun("off", SpecSettings(enabled=False), "done text", (1, 2, 3), [0, 4, 6],
                     GenerationStats(n_tokens=3, tokens_per_s=10.0, t_total_s=0.4, stop_reason="eos"), "eos", 3, True)
    on = CompareRun("on", SpecSettings(), "part", (1,), [0],
                    GenerationStats(n_tokens=1, tokens_per_s=12.0, t_total_s=0.2, stop_reason="cancelled"),
                    "cancelled", 1, False)
    dialog = CompareDialog()
    qtbot.addWidget(dialog)
    dialog.start()
    dialog.show_result(CompareResult(1, 10, SamplingParams(temperature=0.0), 48, off, on, cancelled=True))
    cells = {key: row["on"].text() for key, row in dialog.cells.items()}
    assert (cells["tokens"], cells["stop"], cells["total"]) == ("1", "the Stop button", "200 ms")
    assert cells["vs_off"] == "–" and dialog.cells["vs_off"]["off"].text() == "1.00×"   # (a part of a reply: no
    assert dialog.texts["on"].toPlainText() == "part" and dialog.status.text().startswith("Cancelled")   # ratio)


def test_total_times_are_called_shorter_or_longer_only_for_replies_of_one_length():
    """A user's try: "1.36 s against 3.00 s, shorter with speculation", of a sampled reply of 156 tokens
    against 343 at 1.01× the speed."""
    from desktop_app.chat.compare import CompareResult
    from desktop_app.engine.metrics import GenerationStats
    from desktop_app.ui.compare_dialog import total_times

    def result(on_tokens, on_s):
        off = CompareRun("off", SpecSettings(enabled=False), "", (), [],
                         GenerationStats(n_tokens=343, tokens_per_s=114.3, t_total_s=3.0), "eos", 343, True)
        on = CompareRun("on", SpecSettings(), "", (), [],
                        GenerationStats(n_tokens=on_tokens, tokens_per_s=on_tokens / on_s, t_total_s=on_s), "eos", 1, True)
        return CompareResult(1, 10, SamplingParams(temperature=0.8, seed=5), 512, off, on)

    different = total_times(result(156, 1.36))
    assert "shorter" not in different and "156 tokens against 3.00 s for 343" in different
    assert different.endswith("3.00 s for 343: replies of different lengths.")
    assert total_times(result(343, 2.5)).endswith("2.50 s against 3.00 s, shorter with speculation.")
    assert total_times(result(343, 3.5)).endswith("longer with speculation.")


def test_replies_of_different_lengths_are_compared_over_the_tokens_they_share(qtbot):
    """A pass slows as the reply grows: a sampled reply of 362 tokens against one of 1024 read "1.37×"
    from their tokens per second, where over the first 362 tokens of each it was about 1.13× (a new
    user's try). Here every token costs 0.75 of plain decoding's at the same point of the reply."""
    from desktop_app.chat.compare import CompareResult, Difference
    from desktop_app.engine.metrics import GenerationStats
    from desktop_app.ui.compare_dialog import CompareDialog

    def pass_s(k):
        return 0.010 * (1 + k / 500)

    def run(label, n, share, per_round):
        clock, seconds = [], 0.0
        for start in range(0, n, per_round):
            end = min(n, start + per_round)
            seconds += share * sum(pass_s(k) for k in range(start, end))
            clock.append((end, seconds))
        stats = GenerationStats(n_tokens=n, tokens_per_s=n / seconds, t_total_s=seconds + 0.1, n_rounds=len(clock))
        return CompareRun(label, SpecSettings(enabled=label == "on"), "x" * n, tuple(range(n)), list(range(n)),
                          stats, "max_tokens", len(clock), True, 0, clock)

    off, on = run("off", 1024, 1.0, 1), run("on", 362, 0.75, 8)
    result = CompareResult(1, 10, SamplingParams(temperature=0.8, seed=5), 1024, off, on,
                           first_difference=Difference(3, 3, 9, "a", "b", "xxx", "a", "b", "sampled"))
    assert on.stats.tokens_per_s / off.stats.tokens_per_s > 1.6           # (what it said)
    assert result.common == 362 and result.speedup == pytest.approx(1 / 0.75)
    dialog = CompareDialog()
    qtbot.addWidget(dialog)
    dialog.show_run(off)
    dialog.show_run(on)
    dialog.show_result(result)
    assert dialog.speedup.text().startswith("Speed-up with speculation, measured in this compare: 1.33× over the "
                                            "first 362 tokens of each reply")
    assert dialog.cells["vs_off"]["on"].text() == "1.33× (first 362 tokens)"
    # shown empty first, as the window shows it, then the result: the notes get the height they need, up to
    # half, and the texts, what a user opens Compare to see, keep TEXT_LINES lines under however many
    # notes (three paragraphs of them left four lines each: a new user's try); the rest of the notes scroll
    from desktop_app.ui.compare_dialog import TEXT_LINES
    shown = CompareDialog()
    qtbot.addWidget(shown)
    shown.resize(980, 720)
    shown.show()
    qtbot.waitExposed(shown)
    shown.show_run(off)
    shown.show_run(on)
    shown.show_result(result)
    notes = shown.notes.widget()
    assert shown.notes.height() >= notes.heightForWidth(shown.notes.viewport().width()) > 60   # (all of them)
    long = replace(result, first_difference=replace(result.first_difference, reason="A long note. " * 300))
    shown.show_result(long)
    qtbot.wait(20)
    for box in shown.texts.values():
        assert box.viewport().height() >= (TEXT_LINES - 1) * box.fontMetrics().lineSpacing()
    assert shown.notes.verticalScrollBar().maximum() > 0
    assert abs(shown.notes.height() - sum(shown.split.sizes()) / 2) <= 2
    # a long heading wraps: the dialog fits a 1024-px screen (one line of it ran the dialog off one, its Close
    # button cut, a new user's try)
    shown.headers["on"].setText("<b>Speculation on (auto: draft model or prompt lookup, round by round; it drafted "
                                "nothing)</b>")
    qtbot.wait(20)
    assert shown.headers["on"].minimumSizeHint().width() < 450 and shown.minimumSizeHint().width() < 900
    # replies of one length: their tokens per second, as before
    same = CompareResult(1, 10, SamplingParams(temperature=0.8, seed=5), 1024, off, run("on", 1024, 0.75, 8))
    assert same.common is None and same.speedup == pytest.approx(same.on.stats.tokens_per_s / off.stats.tokens_per_s)


def test_a_short_compare_quotes_both_runs_lengths():
    """A new user's try: runs of 20 and 25 tokens were "One short run each (20 tokens)"."""
    from desktop_app.chat.compare import CompareResult
    from desktop_app.engine.metrics import GenerationStats

    def result(n_off, n_on):
        off = CompareRun("off", SpecSettings(enabled=False), "", tuple(range(n_off)), [],
                         GenerationStats(n_tokens=n_off, tokens_per_s=10.0, threads=2), "eos", n_off, True)
        on = CompareRun("on", SpecSettings(), "", tuple(range(n_on)), [],
                        GenerationStats(n_tokens=n_on, tokens_per_s=14.0, n_drafted=12, n_accepted=9, threads=2),
                        "eos", 8, True)
        return CompareResult(1, 10, GREEDY, 32, off, on)

    assert "One short run each (20 tokens without speculation, 25 with):" in result(20, 25).caveat
    assert "One short run each (20 tokens):" in result(20, 20).caveat
    assert result(40, 40).caveat == ""


def test_a_later_first_token_with_speculation_is_explained():
    """With speculation a first token at 492 ms against 84 ms, both prompts read already, was left
    unexplained (a new user's try): it comes at the end of the first round."""
    from desktop_app.chat.compare import CompareResult
    from desktop_app.engine.metrics import GenerationStats
    from desktop_app.ui.compare_dialog import first_token_note

    def result(on_ttft, first_gamma=5):
        off = CompareRun("off", SpecSettings(enabled=False), "", (1,) * 20, [],
                         GenerationStats(n_tokens=20, tokens_per_s=10.5, ttft_s=0.084), "eos", 20, True)
        on = CompareRun("on", SpecSettings(), "", (1,) * 25, [],
                        GenerationStats(n_tokens=25, tokens_per_s=7.5, ttft_s=on_ttft, n_drafted=35, n_accepted=19),
                        "eos", 12, True, first_gamma)
        return CompareResult(1, 95, GREEDY, 1024, off, on)

    assert first_token_note(result(0.492)) == (
        " The first token took 492 ms with speculation against 84 ms: it comes at the end of the first round, after "
        "its 5 drafts and their check, where plain decoding's comes after one pass.")
    assert first_token_note(result(0.1)) == ""
    assert first_token_note(result(0.492, first_gamma=0)) == ""     # (a first round that drafted nothing: not that)


def test_the_compare_table_says_how_a_run_ended_and_its_kept_share_as_the_panel_does():
    """"Stopped by: eos" was jargon, and "2 of 3 (67%)" beside the panel's "2/3 (67 %)" (a new user's try)."""
    from desktop_app.chat.compare import CompareRun
    from desktop_app.engine.events import GenerationStats
    from desktop_app.engine.settings import SpecSettings
    from desktop_app.ui.compare_dialog import run_cells
    stats = GenerationStats(n_tokens=3, n_drafted=3, n_accepted=2, acceptance_rate=2 / 3, stop_reason="eos")
    cells = run_cells(CompareRun("on", SpecSettings(), stats=stats), 0.0)
    assert cells["drafts"] == "2 of 3 (67 %)" and cells["stop"] == "its end (the model's end token)"
    cut = run_cells(CompareRun("on", SpecSettings(), stats=GenerationStats(n_tokens=9, stop_reason="max_tokens")), 0.0)
    assert cut["stop"] == "Max tokens" and cut["drafts"] == "–"


def test_the_compare_quotes_a_token_s_text_as_text_not_as_python():
    """"with it ':\\n\\n'" was Python's repr on screen (a new user's try)."""
    from desktop_app.chat.compare import END_OF_REPLY, shown
    assert shown(":\n\n") == "“:⏎⏎”" and shown("\tx") == "“⇥x”" and shown("()") == "“()”"
    assert shown(END_OF_REPLY) == "(end of reply)"


def test_a_reply_that_ends_where_the_other_goes_on_is_said_to_end(qtbot):
    """Where one reply ends at the place the two part, its text from there is nothing: "Then, without: “…”"
    read as text left out (a new user's try)."""
    from desktop_app.chat.compare import END_OF_REPLY, CompareResult, Difference
    from desktop_app.engine.metrics import GenerationStats
    from desktop_app.ui.compare_dialog import CompareDialog

    stats = GenerationStats(n_tokens=3, tokens_per_s=10.0, t_total_s=0.4, stop_reason="eos")
    off = CompareRun("off", SpecSettings(enabled=False), "abc", (1, 2, 3), [0, 1, 2], stats, "eos", 3, True)
    on = CompareRun("on", SpecSettings(), "abcde", (1, 2, 3, 4, 5), [0, 1, 2, 3, 4],
                    replace(stats, n_tokens=5), "eos", 3, True)
    d = Difference(3, None, 4, END_OF_REPLY, "d", "abc", "", "de", "why")
    dialog = CompareDialog()
    qtbot.addWidget(dialog)
    dialog.show_result(CompareResult(1, 10, SamplingParams(temperature=0.0), 48, off, on, first_difference=d))
    said = dialog.verdict.text()
    assert "Then, without: nothing more: the reply ends there\nThen, with: “de…”" in said, said


def test_quotes_of_code_stay_on_one_line_each(qtbot):
    """The quotes around the place the texts part keep their line breaks as ⏎: "Before it: “… mean}",
    then "```", then "This function”" on lines of their own read as several quotes (a new user's try)."""
    from desktop_app.chat.compare import CompareResult, Difference
    from desktop_app.engine.metrics import GenerationStats
    from desktop_app.ui.compare_dialog import CompareDialog

    stats = GenerationStats(n_tokens=3, tokens_per_s=10.0, t_total_s=0.4, stop_reason="eos")
    off = CompareRun("off", SpecSettings(enabled=False), "x}\n```\n\nA b", (1, 2, 3), [0, 1, 2], stats, "eos", 3, True)
    on = CompareRun("on", SpecSettings(), "x}\n```\n\nA c", (1, 2, 4), [0, 1, 2], stats, "eos", 3, True)
    d = Difference(2, 3, 4, " b", " c", "x}\n```\n\nA", " b\n\tz", " c", "why")
    dialog = CompareDialog()
    qtbot.addWidget(dialog)
    dialog.show_result(CompareResult(1, 10, SamplingParams(temperature=0.0), 48, off, on, first_difference=d))
    lines = dialog.verdict.text().split("\n")
    assert lines[1:] == ["Before it: “…x}⏎```⏎⏎A”", "Then, without: “ b⏎⇥z…”", "Then, with: “ c…”"], lines
