"""Live charts and "Does it pay?" (#13 items 5, 6), fed by a real greedy reply of the SmolLM2 pair."""
from __future__ import annotations

import dataclasses
import math
import re
import time

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtWidgets import QApplication, QLabel, QWidget

from desktop_app.chat.history import HistoryStore
from desktop_app.engine import (GREEDY, Controls, FinishEvent, LoadOptions, ModelPair, RoundEvent, SpecSettings,
                                TokenEvent)
from desktop_app.engine.costs import DIP_MAX, WIN_MARGIN
from desktop_app.engine.events import GenerationStats, StopReason, TokenKind
from desktop_app.engine.metrics import plain_rate_so_far
from desktop_app.engine.explain import measured_text
from desktop_app.engine.number_text import duration_text, rate_text, rates_finer
from desktop_app.ui.charts import PLAIN_EARLIER, PLAIN_ESTIMATE_MIN, LiveCharts, rolling_rate
from desktop_app.ui.spec_panel import SpecPanel
from desktop_app.ui.pay_curve import ABOVE_THE_CURVE, LABEL_INSET, PayCurve

from engine_helpers import prompt_tokens


@pytest.fixture(scope="module")
def pair(test_model_path, q2k_draft_path):
    with ModelPair.load(test_model_path, q2k_draft_path, LoadOptions(n_ctx=1024, n_threads=2)) as p:
        yield p


def generate_into(charts: LiveCharts | None, pair, qapp, max_tokens=64, **spec):
    """A greedy reply fed to the charts as the window feeds them, event by event; returns (rounds,
    stats, what the charts showed just before the finish: (plain rate, its label))."""
    pair.target_ctx.clear()
    pair.draft_ctx.clear()
    rounds, finish = [], None
    if charts:
        charts.begin()
    for ev in pair.generate(prompt_tokens(pair.target), GREEDY, Controls(SpecSettings(**spec)), max_tokens, ()):
        if isinstance(ev, RoundEvent):
            rounds.append(ev)
            if charts:
                charts.add_round(ev)
        elif isinstance(ev, FinishEvent):
            finish = ev
        else:
            assert isinstance(ev, TokenEvent)     # (the charts take a round's tokens from the round)
        qapp.processEvents()
    before_finish = charts.plain_rate() if charts else None
    if charts:
        charts.finish(finish.stats)
        deadline = time.monotonic() + 5
        while charts.pending and time.monotonic() < deadline:       # (drawn FINISH_MS later)
            qapp.processEvents()
        assert not charts.pending
    return rounds, finish.stats, before_finish


@pytest.fixture(scope="module")
def reply(pair, qapp):
    """γ 4 with the draft model, 64 tokens, through LiveCharts."""
    charts = LiveCharts()
    rounds, stats, before = generate_into(charts, pair, qapp, drafter="model", draft_max=4)
    return charts, rounds, stats, before


def plotted_bars(bars) -> tuple[list[float], list[float]]:
    return [float(x) for x in bars.opts["x"]], [float(h) for h in bars.opts["height"]]


def assert_charts_show(charts: LiveCharts, rounds, stats: GenerationStats, abs_time=1e-9):
    xs, heights = plotted_bars(charts.position_bars)
    assert xs == [float(i) for i in range(1, len(stats.position_acceptance) + 1)]
    assert heights == pytest.approx(stats.position_acceptance, abs=1e-12)
    x, y, colours = charts.kept_series()
    assert list(y) == [r.accepted for r in rounds] and list(x) == [r.index + 1 for r in rounds]   # the strip's #
    assert colours == ["#2ca02c" if r.drafter == "model" else "#8c8c8c" for r in rounds]
    _, split = plotted_bars(charts.split_bars)
    assert split == pytest.approx([stats.t_draft_s, stats.t_verify_s, stats.t_other_s], abs=abs_time)
    assert charts.plain_line.isVisible() and charts.plain_line.value() == pytest.approx(stats.plain_tokens_per_s)
    # the title quotes the dashed line's plain speed as the panel's "vs plain" does (measured_text): the same
    # digits; not a label on the line, which covered the curve near plain's rate (a new user's try)
    plain = rate_text(stats.plain_tokens_per_s, rates_finer(stats)).removesuffix(" tok/s")   # (the panel's digits)
    assert charts.speed_title.text() == f"Tokens/s over time (s); dashed: plain {plain}" and plain in measured_text(stats)
    assert getattr(charts.plain_line, "label", None) is None
    sx, sy = charts.speed_curve.getData()
    assert len(sx) > 3 and all(v > 0 for v in sy)


def test_charts_before_any_reply_show_no_negative_time(qtbot):
    charts = LiveCharts()
    qtbot.addWidget(charts)
    low, high = charts.split_plot.viewRange()[1]
    assert low == 0 and high > 0                     # (was -0.4 to 0.4 seconds around empty bars)


def test_count_axes_label_whole_numbers_only(reply, qtbot):
    charts = reply[0]
    charts.resize(600, 400)
    charts.show()
    qtbot.waitExposed(charts)
    for plot, name in ((charts.position_plot, "bottom"), (charts.kept_plot, "left"), (charts.kept_plot, "bottom")):
        axis = plot.getPlotItem().getAxis(name)
        low, high = axis.range
        levels = axis.tickValues(low, high, axis.geometry().width() if name == "bottom" else axis.geometry().height())
        values = [v for _, vs in levels for v in vs]
        assert values and all(v == round(v) for v in values), (name, values)     # (were 1, 1.5, 2 … on 0.4-4.6)
        labels = axis.tickStrings(values, 1.0, min(s for s, _ in levels))
        assert all("." not in label for label in labels), labels
    charts.hide()


def test_the_kept_chart_s_legend_stays_on_one_line_in_a_narrow_panel(reply, qapp, qtbot):
    """Three drafters' legend beside "Kept in each round" needs two lines in a panel 380 px wide (the
    window's at 1280 px); there the title is shortened so that it keeps to one."""
    _, rounds, stats, _ = reply
    mixed = [dataclasses.replace(r, drafter="lookup") if i % 3 == 1 else r for i, r in enumerate(rounds)]
    mixed.append(dataclasses.replace(rounds[-1], index=len(rounds), drafter="none", drafted=(), drafted_text=(),
                                     q=(), p=(), accepted=0))
    charts = LiveCharts()
    qtbot.addWidget(charts)
    charts.begin()
    for r in mixed:
        charts.add_round(r)
    charts.finish(stats)
    charts.show()
    qtbot.waitUntil(lambda: not charts.pending)
    title = charts.kept_title
    for width, head in ((380, "Kept"), (1000, "Kept in each round")):
        charts.resize(width, 400)
        qapp.processEvents()
        assert title.text().startswith(head + " ") and all(f"</span>{n}" in title.text() for n in ("model", "lookup", "plain"))
        assert title.heightForWidth(title.width()) < 1.5 * title.fontMetrics().lineSpacing(), (width, title.text())
    charts.hide()


def test_the_speed_chart_s_time_axis_names_its_unit(reply, qtbot):
    """Once the title names plain's rate it has no room for "over time (s)", and "0 5 10 20" under
    it could be tokens or rounds (as the chart beside it counts): its largest number says "s"."""
    charts = reply[0]
    charts.resize(380, 400)
    charts.show()
    qtbot.waitExposed(charts)
    axis = charts.speed_plot.getPlotItem().getAxis("bottom")
    low, high = axis.range
    levels = axis.tickValues(low, high, axis.geometry().width())
    values = [v for _, vs in levels for v in vs]
    labels = axis.tickStrings(values, 1.0, min(s for s, _ in levels))
    shown = QLabel.text(charts.speed_title)          # (what the narrow title shows: its text() is the whole)
    assert sum(label.endswith(" s") for label in labels) == 1 and "(s)" not in shown and "dashed: plain" in shown
    # the largest tick that has room for it: one at the axis's end is not drawn, and "1.5 s" went with it
    for end, unit_at in ((1.45, "1.0 s"), (1.5, "1.0 s"), (2.2, "2 s")):
        charts.speed_plot.setXRange(0, end, padding=0)
        low, high = axis.range
        levels = axis.tickValues(low, high, axis.geometry().width())
        labels = axis.tickStrings([v for _, vs in levels for v in vs], 1.0, min(s for s, _ in levels))
        assert [label for label in labels if label.endswith(" s")] == [unit_at], (end, labels)
    charts.hide()


def test_live_charts_show_the_rounds_of_a_real_reply(reply, qtbot, tmp_path):
    charts, rounds, stats, before = reply
    qtbot.addWidget(charts)
    assert stats.n_drafted and any(r.accepted < r.gamma for r in rounds) and max(r.gamma for r in rounds) == 4
    assert_charts_show(charts, rounds, stats)
    assert charts.rounds == rounds
    # the drafted reply had no plain round: until the finish, plain as the engine priced a pass before it
    if not any(r.gamma == 0 for r in rounds):
        assert before[1] == PLAIN_EARLIER and before[0] == pytest.approx(stats.plain_tokens_per_s, rel=0.05)
    # the same rounds as the history stores them, and the stats as its JSON, show the same
    stored = LiveCharts()
    qtbot.addWidget(stored)
    store = HistoryStore(str(tmp_path / "history.db"))
    cid = store.create_conversation()
    m = store.add_message(cid, "assistant", "reply")
    store.update_message(m.id, stats=stats.to_json(), rounds=[r.to_record() for r in rounds])
    back = store.messages(cid)[-1]
    store.close()
    stored.show_stored(back.rounds, back.stats)
    assert_charts_show(stored, rounds, stats, abs_time=1e-5 * len(rounds))
    assert stored.rounds == [RoundEvent.from_record(i, r) for i, r in enumerate(back.rounds)]
    # the tokens' times of a stored reply are its rounds' ends: the last rate is within the reply's range
    sx, sy = stored.speed_curve.getData()
    assert sx[-1] == pytest.approx(sum(r.t_round_s for r in rounds), abs=1e-4 * len(rounds))
    # and live: the tokens count at their rounds' ends on the engine's clock, not when they reached the window
    ex, ey = round_end_rates(rounds)
    lx, ly = charts.speed_curve.getData()
    assert list(lx) == pytest.approx(ex) and list(ly) == pytest.approx(ey)
    stored.clear()
    assert plotted_bars(stored.position_bars)[1] == [] and len(stored.kept_series()[0]) == 0
    assert not stored.plain_line.isVisible() and stored.speed_title.text() == "Tokens/s over time (s)"


def round_end_rates(rounds) -> tuple[list[float], list[float]]:
    """The tokens/s curve of `rounds`, each reply token timed at the end of its round (engine clock)."""
    times, t = [], 0.0
    for r in rounds:
        t += r.t_round_s
        times += [t] * r.n_reply_tokens
    return rolling_rate(times, 0.0, end=t)


def test_the_speed_curve_ends_at_the_replys_own_pace():
    """A reply's last round can write only the end-of-generation token, which is no reply token: the
    curve samples that round's end too, so it ends where the panel's speed is (in a user's window, 12
    tokens at 28.5 tok/s, whose curve ended near 31 without it; under a compile job, where that round
    took seconds, 2.4 against the panel's 1.46)."""
    times = [0.035 * (k + 1) for k in range(12)]      # 12 plain rounds of 35 ms, then the eos round
    xs, ys = rolling_rate(times, 0.0, end=0.455)
    assert xs[-1] == pytest.approx(0.455) and ys[-1] == pytest.approx(12 / 0.455)
    assert len(xs) == 13 and xs[:-1] == pytest.approx(times) and ys[-2] == pytest.approx(12 / 0.42)
    xs, ys = rolling_rate(times, 0.0, end=times[-1])   # the last round wrote tokens: nothing added
    assert len(xs) == 12 and ys[-1] == pytest.approx(12 / 0.42)
    long = [0.03 * (k + 1) for k in range(40)]
    xs, ys = rolling_rate(long, 0.0, end=1.5)          # past 16 tokens the window holds 16 of them
    assert ys[-1] == pytest.approx(16 / (1.5 - long[-17]))


def test_the_panel_charts_tokens_on_the_engines_clock_however_late_they_arrive(reply, qtbot):
    """In the window the tokens reach the panel after their rounds, in bursts on a busy machine: the
    chart and the live speed take their times from the rounds, so late arrivals change neither."""
    _, rounds, _, _ = reply
    panel = SpecPanel()
    qtbot.addWidget(panel)
    panel.begin("test")
    assert "drawn when the reply ends" in panel.pay.sentence.text()      # (not an empty tab meanwhile)
    panel._flush()
    assert panel.verdict.text() == "Reading the prompt…"                  # until the first token, then
    assert panel.labels["first"].text() == "–"
    time.sleep(0.05)
    for r in rounds:
        panel.add_round(r)
        for _ in range(r.n_reply_tokens):                # (when they arrive is not asked: only the rounds count)
            panel.add_token()
    qtbot.waitUntil(lambda: not panel.charts.pending, timeout=5000)
    panel._flush()
    ex, ey = round_end_rates(rounds)
    lx, ly = panel.charts.speed_curve.getData()
    assert list(lx) == pytest.approx(ex) and list(ly) == pytest.approx(ey)
    tokens = sum(r.n_reply_tokens for r in rounds)
    assert panel.labels["speed"].text() == rate_text(tokens / sum(r.t_round_s for r in rounds))
    assert panel.labels["tokens"].text() == f"{tokens} in {len(rounds)} rounds"     # (the strip numbers the rounds)
    # the first token's time as it reached the panel, until the engine's own comes with the end
    first = panel.labels["first"].text()
    assert first.startswith("≈ ") and first.removeprefix("≈ ") != "–"
    value, unit = first.removeprefix("≈ ").split()
    assert float(value) * (1 if unit == "s" else 0.001) >= 0.05       # (at least the wait before the tokens)
    assert panel.verdict.text() == "Generating…"
    assert any(r.drafted for r in rounds)       # what rests on the engine's costs says when it will come
    assert panel.labels["c"].text() == panel.labels["predicted"].text() == "at the reply's end"
    panel.interrupt("The model engine stopped.")  # ... and an end that will not come takes it back
    assert panel.labels["c"].text() == panel.labels["predicted"].text() == "–"
    server = SpecPanel()                          # a llama-server's rounds: it sends neither
    qtbot.addWidget(server)
    server.begin("test")
    for r in rounds:
        server.add_round(dataclasses.replace(r, drafter="server") if r.drafted else r)
    server._flush()
    assert server.labels["c"].text() == server.labels["predicted"].text() == "–"
    # the live first token's time gives way to the engine's at the end
    _, _, stats, _ = reply
    panel.begin("test")
    panel.add_token()
    panel._flush()
    assert panel.labels["first"].text().startswith("≈ ")
    panel.finish(stats)
    assert panel.labels["first"].text() == duration_text(stats.ttft_s) and stats.ttft_s > 0


def test_a_reply_that_drafts_in_every_round_compares_itself_with_plain_as_known_before_it(reply, qtbot):
    """A fixed draft model drafts in every round, so the reply times no plain step of its own: the
    panel said "vs plain –" and the chart drew no plain line until the end, through a 50-second reply
    running at 0.57× plain (a new user's try). Until then it compares with plain decoding's rate as
    known before the reply: timed at load, then as each reply measured it."""
    _, rounds, stats, _ = reply
    drafting = [dataclasses.replace(r, plain_step_s=0.0) for r in rounds if r.gamma]   # (the engine's price of a
    assert len(drafting) >= len(rounds) - 1 and len(rounds) - len(drafting) < PLAIN_ESTIMATE_MIN   # pass not sent,
    speed = sum(r.n_reply_tokens for r in drafting) / sum(r.t_round_s for r in drafting)  # as a llama-server's)
    panel = SpecPanel()
    qtbot.addWidget(panel)

    def live() -> str:
        panel.begin("test")
        for r in drafting:
            panel.add_round(r)
        panel._flush()
        panel.charts._redraw()
        return panel.labels["vs_plain"].text()

    assert live() == "–" and not panel.charts.plain_line.isVisible()       # nothing known: nothing said
    panel.set_plain_rate(20.0)                                            # a pair loaded, its pass timed
    assert live() == f"≈ {speed / 20.0:.2f}× (plain ≈ 20.0 tok/s, earlier)"
    assert panel.charts.plain_line.isVisible() and panel.charts.plain_line.value() == 20.0
    title = panel.charts.speed_title
    assert title.text() == "Tokens/s over time (s); dashed: plain ≈ 20.0"
    # one line, whole: a shorter form where it does not fit (wrapped, "20.0" stood alone under it: a user's try)
    assert QLabel.text(title) in (title.text(), "Tokens/s; dashed: plain ≈ 20.0", "Tok/s; dashed: plain ≈ 20.0")
    assert not title.wordWrap()
    for width in (150, 110, 60):                  # narrower: the number whole, or not at all ("plain 1…" read
        title.resize(width, title.height())       # as 1 tok/s at the window's least width, a new user's try)
        title._elide()                            # (as its resizeEvent does, the panel not shown here)
        assert QLabel.text(title) in ("Tok/s; dashed: plain ≈ 20.0", "Tok/s; plain ≈ 20.0", "Tok/s"), width
    # and its seconds never run together: "0.05 0.10 0.15 0.2" under a fifth of a second, 140 px wide
    seconds = panel.charts.speed_plot.getPlotItem().getAxis("bottom")
    for low, high, px in ((0.0, 0.2, 140), (0.0, 0.23, 100), (0.0, 37.0, 140), (0.0, 12.5, 300), (0.0, 3.0, 60)):
        values = seconds.tickValues(low, high, px)[0][1]
        assert 2 <= len(values) and len(values) - 1 <= max(2, px / 45), (high, px, values)
        assert all(abs(v / (values[1] - values[0]) - round(v / (values[1] - values[0]))) < 1e-6 for v in values)
    panel.finish(stats)                                                   # a reply measured it since
    known = stats.plain_tokens_per_s
    # but not a stopped reply, one of a round or two, nor a llama-server's (measured elsewhere)
    for other in (dataclasses.replace(stats, stop_reason="cancelled", t_plain_pass_s=2 * stats.plain_pass_s),
                  dataclasses.replace(stats, n_rounds=PLAIN_ESTIMATE_MIN - 1, t_plain_pass_s=2 * stats.plain_pass_s),
                  dataclasses.replace(stats, remote="llama-server", t_plain_pass_s=2 * stats.plain_pass_s)):
        assert other.plain_tokens_per_s != pytest.approx(known)
        panel.begin("test")
        panel.finish(other)
    assert live() == f"≈ {speed / known:.2f}× (plain ≈ {rate_text(known)}, earlier)"
    panel.show_stored([r.to_record() for r in drafting], None, 1, "stored", 0.0, 1)   # not a stored reply's:
    assert not panel.charts.plain_line.isVisible()                        # that ran elsewhere, perhaps
    panel.set_plain_rate(None)                                            # another pair loaded, not timed
    assert live() == "–"


def test_a_reply_compares_itself_live_with_the_plain_rate_its_end_will_give(reply, qtbot):
    """A fixed draft model's reply has no plain step of its own, so until its end it is compared with
    plain decoding as known before it. The panel knew the last reply's rate, the engine its own price of
    a pass since: live "1.43× (plain ≈ 5.84 tok/s, earlier)" became "1.11× (plain 8.63 tok/s, earlier)"
    at the end (a new user's try). Each round now carries the engine's price, and the live estimate is
    priced as the end's: within a few per cent of it, whatever the last reply said."""
    _, rounds, stats, _ = reply
    charts = LiveCharts()
    qtbot.addWidget(charts)
    charts.begin(earlier_plain=0.68 * stats.plain_tokens_per_s)          # (the last reply's, on a busier machine)
    drafting = [r for r in rounds if r.gamma]
    for r in drafting:
        charts.add_round(r)
    rate, label = charts.plain_rate()
    assert label == PLAIN_EARLIER and all(r.plain_step_s > 0 for r in drafting)
    if not stats.n_plain_rounds:                 # (else the end times plain from its own plain step; greedy,
        assert rate == pytest.approx(stats.plain_tokens_per_s, rel=0.05), (rate, stats.plain_tokens_per_s)
    assert rate != pytest.approx(0.68 * stats.plain_tokens_per_s, rel=0.05)    # the reply has none here)


def test_the_speed_chart_quotes_plain_s_rate_at_the_digits_the_panel_does(qtbot):
    """Where a reply's speed and plain's take a digit more (rates_finer), the chart's title takes it too:
    the sentence said "42.15 tok/s" above a chart titled "plain 42.1" (a new user's try)."""
    stats = GenerationStats(n_tokens=100, n_rounds=100, n_plain_rounds=100, tokens_per_s=115.4, t_target_step_s=1 / 115.9,
                            t_verify_s=100 / 115.4, stop_reason="max_tokens")
    assert rates_finer(stats) and measured_text(stats) == "1.00× (plain 115.9 tok/s)"
    charts = LiveCharts()
    qtbot.addWidget(charts)
    charts.begin()
    charts.finish(stats)
    charts._redraw()
    assert charts.speed_title.text().endswith("dashed: plain 115.9")


def test_the_live_plain_rate_leaves_out_the_draft_model_s_catch_up_as_the_end_does():
    """Auto caught the draft model up on the text once, 2.5 s in one of 40 rounds of 0.11 s: the end
    prices plain decoding without it (it is not a cost plain decoding would pay), and so does the live
    estimate: counted as the loop's own time, it read 5.8 tok/s live against 9.1 at the end (a review)."""
    plain = RoundEvent(index=0, drafter="none", drafted=(), drafted_text=(), q=(), p=(), accepted=0, emitted=(5,),
                       emitted_text=("a",), kinds=(TokenKind.PLAIN,), target_top=(), t_draft_s=0.0, t_verify_s=0.1,
                       t_round_s=0.11, n_past=10, plain_step_s=0.1)
    rounds = [dataclasses.replace(plain, index=i) for i in range(40)]
    rounds[20] = dataclasses.replace(rounds[20], t_round_s=0.11 + 2.5, t_catch_up_s=2.5)
    end = GenerationStats(n_tokens=40, n_rounds=40, tokens_per_s=40 / sum(r.t_round_s for r in rounds),
                          t_target_step_s=0.1, t_verify_s=4.0, t_catch_up_s=2.5)
    assert plain_rate_so_far(rounds) == pytest.approx(end.plain_tokens_per_s) == pytest.approx(1 / 0.11)


def test_plain_reply_estimates_plain_speed_live_and_has_no_alpha(pair, qapp, qtbot):
    charts = LiveCharts()
    qtbot.addWidget(charts)
    rounds, stats, (estimate, label) = generate_into(charts, pair, qapp, max_tokens=12, drafter="none")
    assert rounds and all(r.gamma == 0 for r in rounds)
    assert label == "plain ≈"
    assert estimate == pytest.approx(stats.plain_tokens_per_s, rel=0.05)   # as its end will price it
    assert charts.plain_rate() == (pytest.approx(stats.plain_tokens_per_s), "plain")
    assert plotted_bars(charts.position_bars)[1] == [] == stats.position_acceptance
    # the panel's row says the same estimate while the reply runs, and the measurement once it ended
    panel = SpecPanel()
    qtbot.addWidget(panel)
    panel.begin("test")
    assert "drawn when the reply ends" in panel.pay.sentence.text()      # (not an empty tab meanwhile)
    for r in rounds:
        panel.add_round(r)
    panel._flush()
    speed = sum(r.n_reply_tokens for r in rounds) / sum(r.t_round_s for r in rounds)
    assert panel.labels["vs_plain"].text() == f"≈ {speed / estimate:.2f}× (plain ≈ {rate_text(estimate)}, so far)"
    panel.finish(stats)
    assert panel.labels["vs_plain"].text() == measured_text(stats) == f"1.00× (plain {rate_text(stats.plain_tokens_per_s)})"
    pay = PayCurve()
    qtbot.addWidget(pay)
    pay.show(stats, 4)
    assert "no α to judge from" in pay.sentence.text()
    assert pay.best_gamma == 0 and len(pay.curve.getData()[0] or []) == 0


# -- "Does it pay?", against the formula written out here

def expected(alpha, g):
    return (1 - alpha ** (g + 1)) / (1 - alpha)


def verify_by_hand(measured: dict[int, float], batch: int) -> float:
    # a pass over k tokens costs at most k single passes: a size timed dearer was timed while the machine
    # was busy (the real reply's 2-token check, timed beside other work, failed this test now and then)
    single = measured.get(1, 0.0)
    measured = {b: min(t, b * single) if b > 1 and single > 0 else t for b, t in measured.items()}
    below = max((b for b in measured if b < batch), default=None)
    if batch in measured:
        cost = measured[batch]
    else:
        above = min(b for b in measured if b > batch)
        line = measured[below] + (measured[above] - measured[below]) * (batch - below) / (above - below)
        cost = max(measured[below], line)      # between sizes, never cheaper than the smaller measured one
    # and never below DIP_MAX of the nearest smaller measured size, nor below a single-token pass: the
    # test model's passes are short, and on an Intel Xeon (AMX, repacking off) its reply timed sizes
    # below those floors, where the curve follows the engine's price, not the raw timing
    floor = DIP_MAX * measured[below] if below is not None else 0.0
    return max(min(cost, batch * single if single > 0 else math.inf), floor, single if batch > 1 else 0.0)


def speedups_by_hand(alpha, step, measured, plain, gammas):
    return [expected(alpha, g) / (g * step + verify_by_hand(measured, g + 1)) * plain for g in gammas]


def best_by_hand(gammas, speedups):
    best, top = 0, WIN_MARGIN
    for g, s in zip(gammas, speedups):
        if s > top:
            best, top = g, s
    return best


def best_words(best: int, gammas: list[int]) -> str:
    """How the pay curve names its best γ: "γ 7 is best", or at the chart's end (where the checks are flat
    enough, on this machine or another) "γ 16 or longer is best"."""
    return f"γ {best} or longer is best" if best == gammas[-1] else f"γ {best} is best"


def best_note(best: int, gammas: list[int]) -> str:
    """... and how its parenthesis opens: "(predicted", or "(the chart ends at γ 16; predicted"."""
    return f"(the chart ends at γ {best}; predicted" if best == gammas[-1] else "(predicted"


def check_curve(pay: PayCurve, s: GenerationStats, current: int):
    gammas = list(range(1, 17))
    assert max(s.verify_s_by_batch) >= 17 and min(s.verify_s_by_batch) <= 2   # no extrapolation needed
    hand = speedups_by_hand(s.alpha, s.t_draft_step_s or 0.0, s.verify_s_by_batch, s.t_target_step_s, gammas)
    assert pay.gammas == gammas
    assert pay.speedups == pytest.approx(hand, rel=1e-9)
    x, y = pay.curve.getData()
    assert list(x) == gammas and list(y) == pytest.approx(hand, rel=1e-9)
    best = best_by_hand(gammas, hand)
    assert pay.best_gamma == best
    text = pay.sentence.text()
    assert f"α {s.alpha:.2f}" in text
    if best:
        assert f"{best_words(best, gammas)} {best_note(best, gammas)} {hand[best - 1]:.2f}×)" in text
        assert list(pay.best_point.getData()[0]) == [best]
        if current != best:
            assert f"(γ {current}: predicted {hand[current - 1]:.2f}×" in text
    else:
        assert "no γ is predicted to beat plain decoding" in text
        check = current + 1
        ratio = verify_by_hand(s.verify_s_by_batch, check) / s.verify_s_by_batch[1]   # (as the curve: costs.at_pace)
        assert f"a {check}-token check costs {ratio:.1f} single passes" in text
        assert len(pay.best_point.getData()[0]) == 0
    if s.measured_speedup is not None:
        assert f"measured {s.measured_speedup:.2f}×" in text
        mx, my = pay.measured_point.getData()
        assert list(mx) == [s.mean_drafted] and list(my) == [pytest.approx(s.measured_speedup)]
    return best


def test_pay_curve_of_the_real_reply_follows_the_formula(reply, qtbot):
    _, _, stats, _ = reply
    pay = PayCurve()
    qtbot.addWidget(pay)
    pay.show(stats, 4)
    assert pay.current_line.isVisible() and pay.current_line.value() == 4
    check_curve(pay, stats, 4)
    # the same α on a machine where verifying a batch costs hardly more than one pass and drafting is
    # cheap: drafting pays, and the sentence names the best γ and the one in use
    plain = stats.t_target_step_s
    cheap = dataclasses.replace(stats, t_draft_step_s=0.05 * plain,
                                verify_s_by_batch={b: plain * (1 + 0.03 * (b - 1)) for b in stats.verify_s_by_batch})
    pay.show(cheap, 1)
    best = check_curve(pay, cheap, 1)
    assert best >= 1
    pay.show(cheap, best)
    assert check_curve(pay, cheap, best) == best
    assert f"; this reply drafted {cheap.mean_drafted:.1f} tokens a round (measured" in pay.sentence.text()


def test_the_panel_and_does_it_pay_quote_one_figure_for_this_reply_s_checks(reply, qtbot):
    # A new user's try: the panel said checking a round's 5.00 tokens took "3.3× a single-token pass", and
    # "Does it pay?" that "a 5-token check costs 3.4 single passes", two sources (this reply's checks, the
    # cost model's price of a size) read as two answers to one question. The tab now quotes the panel's
    # figure beside its own, in the panel's words and digits.
    _, _, stats, _ = reply
    step = stats.verify_s_by_batch[1]
    # checks as dear as 3 single passes a token: no γ pays, and the reply lost to plain decoding
    steep = dataclasses.replace(stats, verify_s_by_batch={1: step, **{b: 3 * step * b for b in range(2, 18)}},
                                t_plain_pass_s=0.4 * stats.plain_pass_s)
    assert steep.measured_speedup < 0.9
    panel = SpecPanel()
    qtbot.addWidget(panel)
    panel.show_stats(steep)
    found = re.search(r"checking a round's ([0-9.]+) tokens took [^,]*, ([0-9.]+)× a single-token pass",
                      panel.verdict.text())
    assert found, panel.verdict.text()
    rounds = steep.n_drafted / steep.mean_drafted        # (fixed γ: every round drafted)
    by_hand = (steep.t_verify_s - steep.n_plain_rounds * (steep.t_target_step_s or 0.0)) / rounds / steep.plain_pass_s
    assert found.group(2) == f"{by_hand:.1f}" and found.group(1) == f"{round(steep.mean_drafted, 2) + 1:.2f}"
    pay = panel.pay
    text = pay.sentence.text()
    assert pay.best_gamma == 0 and "no γ is predicted to beat plain decoding" in text
    assert (f"; in this reply, checking a round's {found.group(1)} tokens took {found.group(2)}× a single pass, "
            f"and each drafted token cost {steep.c:.2f} of one") in text
    # a reply with no checks of its own timed has none to quote, and says the draft step's cost as before
    untimed = dataclasses.replace(steep, t_verify_s=0.0)
    pay.show(untimed, 4)
    assert pay.best_gamma == 0 and "in this reply, checking" not in pay.sentence.text()
    assert f"single passes, and in this reply each drafted token cost {steep.c:.2f} of one" in pay.sentence.text()


def test_stats_keep_verify_costs_through_the_history_json(reply, qtbot, tmp_path):
    _, _, stats, _ = reply
    assert stats.verify_s_by_batch and all(isinstance(k, int) and v > 0 for k, v in stats.verify_s_by_batch.items())
    assert 1 in stats.verify_s_by_batch
    if not stats.n_plain_rounds:        # the single-token pass the reply's plain speed rests on
        assert stats.verify_s_by_batch[1] == pytest.approx(stats.t_target_step_s)
    store = HistoryStore(str(tmp_path / "history.db"))
    cid = store.create_conversation()
    m = store.add_message(cid, "assistant", "reply")
    store.update_message(m.id, stats=stats.to_json())
    raw = store.messages(cid)[-1].stats
    store.close()
    assert set(raw["verify_s_by_batch"]) == {str(k) for k in stats.verify_s_by_batch}   # JSON made them str
    # as the speculation panel rebuilds stored stats
    back = GenerationStats(**{k: v for k, v in raw.items() if k in GenerationStats.__dataclass_fields__})
    assert back.verify_s_by_batch == stats.verify_s_by_batch
    a, b = PayCurve(), PayCurve()
    qtbot.addWidget(a)
    qtbot.addWidget(b)
    a.show(stats, 4)
    b.show(raw, 4)                     # the stored dict as it is
    assert b.speedups == a.speedups and b.best_gamma == a.best_gamma and b.sentence.text() == a.sentence.text()
    assert all(v is not None and math.isfinite(v) for v in b.speedups)
    # stats stored before the costs travelled with them: said so, nothing drawn
    older = {k: v for k, v in raw.items() if k != "verify_s_by_batch"}
    b.show(older, 4)
    assert "no measured verify costs" in b.sentence.text() and b.best_gamma == 0
    assert len(b.curve.getData()[0] or []) == 0


def test_redraws_are_throttled(reply, qtbot):
    _, rounds, _, _ = reply
    charts = LiveCharts()
    qtbot.addWidget(charts)
    charts.begin()
    before = charts.redraws
    fed = [dataclasses.replace(rounds[i % len(rounds)], index=i) for i in range(1000)]
    for i, r in enumerate(fed):
        charts.add_round(r)
    assert charts.redraws == before                      # nothing drawn per event
    qtbot.waitUntil(lambda: charts.redraws > before, timeout=5000)
    qtbot.wait(3 * LiveCharts.REDRAW_MS)
    assert charts.redraws - before <= 3
    # nothing was dropped: the one redraw shows all 1,000 rounds
    x, y, _ = charts.kept_series()
    assert list(y) == [r.accepted for r in fed] and len(x) == 1000
    drafted = [sum(r.gamma > i for r in fed) for i in range(4)]
    kept = [sum(r.accepted > i for r in fed) for i in range(4)]
    assert plotted_bars(charts.position_bars)[1] == pytest.approx([k / d for k, d in zip(kept, drafted)])


def _assert_label_clear_of_curve(pay: PayCurve, qtbot) -> None:
    """Each label, as drawn in a panel as wide as the window's at 1000×700 and wider, and in a short one, is
    whole inside the plot, clear of the other label and of every part of the curve (sampled along its
    width); "plain 1×" too. The reply's lines stand off the y axis (they touched it: a user's try)."""
    QWidget.show(pay)
    for width, height in ((291, 280), (420, 280), (291, 225)):     # (the last as the window gives it at 1000×700)
        pay.resize(width, height)
        qtbot.waitUntil(lambda: abs(pay.width() - width) < 2 and abs(pay.height() - height) < 2)
        for _ in range(3):
            QApplication.processEvents()
        view = pay.plot.getPlotItem().getViewBox()
        xs, ys = pay.curve.getData()
        boxes = [label.sceneBoundingRect() for label in (pay.best_label, pay.reply_label) if label.isVisible()]
        assert len(boxes) == 2 or not pay.best_gamma
        assert not (len(boxes) == 2 and boxes[0].intersects(boxes[1])), boxes
        if pay.reply_label.isVisible():
            gap = pay.reply_label.sceneBoundingRect().left() - view.sceneBoundingRect().left()
            assert gap >= LABEL_INSET - 0.5, (width, gap)
        plain = pay.plain_line.label                   # "plain 1×" too, where it is shown
        for box in boxes + ([plain.sceneBoundingRect()] if plain.isVisible() else []):
            inside = view.sceneBoundingRect().adjusted(-0.5, -0.5, 0.5, 0.5)        # (to within rounding)
            assert inside.contains(box), (width, box, view.sceneBoundingRect())
            left, right = view.mapSceneToView(box.bottomLeft()).x(), view.mapSceneToView(box.bottomRight()).x()
            for k in range(41):
                x = left + (right - left) * k / 40
                if xs[0] <= x <= xs[-1]:
                    y = float(np.interp(x, xs, ys))
                    assert not box.contains(view.mapViewToScene(pg.Point(x, y))), (width, x, y, box)


def test_pay_curve_quotes_the_replys_own_prediction_when_some_rounds_drafted_nothing(reply, qtbot):
    # The curve drafts γ in every round; a reply with plain rounds among its drafts (auto mode, or copies
    # only where there was a match) is not a point on it, so the sentence sets the reply's own
    # prediction (the panel's "Predicted" row) beside its measurement, not the curve's value at its γ.
    _, _, stats, _ = reply
    plain = stats.t_target_step_s
    mixed = dataclasses.replace(stats, t_draft_step_s=0.05 * plain, n_rounds=stats.n_rounds + 7, n_plain_rounds=7,
                                predicted_speedup_measured=1.234,
                                verify_s_by_batch={b: plain * (1 + 0.03 * (b - 1)) for b in stats.verify_s_by_batch})
    pay = PayCurve()
    qtbot.addWidget(pay)
    pay.show(mixed, 4)
    text = pay.sentence.text()
    assert pay.best_gamma >= 1
    assert (f"this reply drafted in {stats.n_rounds} of its {stats.n_rounds + 7} rounds, "
            f"{mixed.mean_drafted:.1f} tokens on average (its rounds as they ran: predicted 1.23×") in text
    assert "γ 4: predicted" not in text
    assert (f"{best_words(pay.best_gamma, pay.gammas)} {best_note(pay.best_gamma, pay.gammas)} "
            f"{pay.speedups[pay.gammas.index(pay.best_gamma)]:.2f}× with every round drafting)") in text
    above = "above the curve, which has every round draft the same γ"   # (said where the reply is above it, as shown)
    pay.show(dataclasses.replace(mixed, predicted_speedup_measured=max(pay.speedups) + 0.2), 4)
    assert above in pay.sentence.text() and pay.sentence.text().endswith("an average cannot show that.")
    pay.show(dataclasses.replace(mixed, predicted_speedup_measured=round(max(pay.speedups), 2) + 0.004), 4)
    assert above not in pay.sentence.text()                       # (the same to two decimals: nothing to explain)
    pay.show(mixed, 4)
    text = pay.sentence.text()
    if mixed.measured_speedup is not None:
        assert f"predicted 1.23×, measured {mixed.measured_speedup:.2f}×)" in text
    # and the chart marks that prediction where the reply's measurement is, not on the curve
    assert mixed.measured_speedup is not None
    xs, ys = pay.own_point.getData()
    assert list(xs) == [pytest.approx(mixed.mean_drafted)] and list(ys) == [pytest.approx(1.234)]
    assert pay.reply_label.toPlainText() == (f"this reply: γ ≈ {mixed.mean_drafted:.1f}\n"
                                             f"◆ measured {mixed.measured_speedup:.2f}× (◇ predicted 1.23×)")
    _assert_label_clear_of_curve(pay, qtbot)
    # where no γ is predicted to pay (checks as dear as 3 single passes for 2 tokens), the same
    steep = dataclasses.replace(mixed, verify_s_by_batch={1: plain, **{b: 3 * plain * b for b in range(2, 18)}})
    pay.show(steep, 4)
    text = pay.sentence.text()
    assert pay.best_gamma == 0 and "no γ is predicted to beat plain decoding" in text
    assert f"(this reply drafted in {stats.n_rounds} of its {stats.n_rounds + 7} rounds: predicted 1.23×" in text
    assert text.endswith(ABOVE_THE_CURVE + ".")                    # (1.23× where no γ beats plain)
    assert list(pay.own_point.getData()[1]) == [pytest.approx(1.234)]
    _assert_label_clear_of_curve(pay, qtbot)
    # a reply that drafted in every round is a point on the curve: no prediction of its own is marked
    every = dataclasses.replace(mixed, n_rounds=stats.n_rounds, n_plain_rounds=0)
    pay.show(every, 4)
    assert len(pay.own_point.getData()[0]) == 0
    assert pay.reply_label.toPlainText().endswith(f"\n◆ measured {every.measured_speedup:.2f}×")
    # a measurement right on a curve that runs flat to its right, and a little under it: the label
    # is drawn clear of the curve
    flat = dataclasses.replace(every, verify_s_by_batch={b: plain for b in every.verify_s_by_batch})
    pay.show(flat, 4)
    xs, ys = pay.curve.getData()
    on_curve = float(np.interp(flat.mean_drafted, xs, ys))
    for target in (on_curve, 0.97 * on_curve):
        lo, hi = 0.01 * flat.tokens_per_s, 100 * flat.tokens_per_s      # (measured rises with tokens/s)
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if dataclasses.replace(flat, tokens_per_s=mid).measured_speedup < target else (lo, mid)
        pay.show(dataclasses.replace(flat, tokens_per_s=lo), 4)
        assert pay.measured_point.getData()[1][0] == pytest.approx(target, rel=1e-6)
        _assert_label_clear_of_curve(pay, qtbot)
    # "plain 1×" beside a curve that crosses 1 just before γ 16 (its end point under the line, the
    # curve above it a little to the left): clear of it, and shown where there is room
    def crossing(k: float) -> GenerationStats:
        return dataclasses.replace(every, verify_s_by_batch={b: plain * (1 + k * (b - 1)) for b in range(1, 34)})
    lo, hi = 0.0, 5.0
    for _ in range(60):                   # the check's slope at which γ 16 predicts 0.97×
        mid = (lo + hi) / 2
        pay.show(crossing(mid), 4)
        lo, hi = (mid, hi) if pay.speedups[-1] > 0.97 else (lo, mid)
    pay.show(crossing(lo), 4)
    assert pay.speedups[-1] == pytest.approx(0.97, abs=1e-3) and pay.speedups[-4] > 1.0
    _assert_label_clear_of_curve(pay, qtbot)
    pay.show(mixed, 4)
    pay.resize(420, 280)
    qtbot.waitUntil(lambda: pay.plain_line.label.isVisible(), timeout=5000)     # room enough: shown


def test_a_reply_stopped_before_its_first_token_says_so_everywhere(qtbot):
    """Stopped before its first token, a reply's panel said "0 tok/s" and "Plain decoding: nothing was
    drafted", and its curve "This reply drafted nothing (plain decoding)", whatever the mode."""
    stopped = GenerationStats(n_tokens=0, tokens_per_s=0.0, stop_reason="cancelled")
    panel = SpecPanel()
    qtbot.addWidget(panel)
    panel.begin("test")
    panel.finish(stopped)
    assert panel.labels["speed"].text() == "–"
    assert panel.verdict.text() == "Stopped before the first token: nothing was written or drafted."
    assert panel.pay.sentence.text() == "Nothing was written, so there is nothing to judge from."
    assert panel.pay.best_gamma == 0 and len(panel.pay.curve.getData()[0] or []) == 0


def test_a_reply_that_broke_off_reads_interrupted_not_stopped(qtbot):
    """A llama-server reply whose connection broke (CANCELLED with a message) read "stopped" in the panel's
    header, as if the user had stopped it, where the chat said "interrupted"."""
    panel = SpecPanel()
    qtbot.addWidget(panel)
    for stats in (GenerationStats(n_tokens=0, tokens_per_s=0.0, stop_reason="cancelled", ttft_s=2.5),
                  GenerationStats(n_tokens=5, tokens_per_s=10.0, stop_reason="cancelled", ttft_s=0.2, n_rounds=3)):
        broke = FinishEvent("", (), stats, StopReason.CANCELLED, message="The connection broke mid-reply.")
        stopped = FinishEvent("", (), stats, StopReason.CANCELLED)
        assert broke.broke_off and not stopped.broke_off
        panel.begin("test")
        panel.finish(stats, broke.end_after_rounds, broke.broke_off)
        assert panel.header.text().endswith("in 'test' (interrupted)")
        if not stats.n_tokens:
            assert panel.labels["tokens"].text() == "0"
            assert panel.labels["first"].text() == "none (broke off after 2.50 s)"
            assert panel.verdict.text() == "The reply broke off before its first token: nothing was written."
        panel.begin("test")
        panel.finish(stats, stopped.end_after_rounds, stopped.broke_off)
        assert panel.header.text().endswith("in 'test' (stopped)")
        if not stats.n_tokens:
            assert panel.labels["tokens"].text() == "0"
            assert panel.labels["first"].text() == "none (stopped after 2.50 s)"
            assert panel.verdict.text().startswith("Stopped before the first token")
            # opened again from the history, as the chat keeps it ("interrupted"), it reads as it did live
            panel.show_stored([], stats.to_json(), 1, "test", time.time(), 2, status="interrupted")
            assert panel.labels["first"].text() == "none (broke off after 2.50 s)"
            assert panel.verdict.text() == "The reply broke off before its first token: nothing was written."


def test_a_speed_and_plain_decodings_that_read_alike_beside_0_99x_take_a_digit_more(qtbot):
    """A plain reply in auto mode on the test model: "Speed 115 tok/s" beside "vs plain 0.99× (plain 115
    tok/s)", which does not add up; with a digit more it does. Where three digits add up, they stay."""
    looked = GenerationStats(n_tokens=9, n_rounds=10, n_plain_rounds=10, stop_reason="eos", tokens_per_s=114.6,
                             t_target_step_s=0.007, t_verify_s=0.070, t_draft_s=0.000544, ttft_s=0.1)
    assert looked.plain_tokens_per_s == pytest.approx(115.4, abs=0.05) and f"{looked.measured_speedup:.2f}" == "0.99"
    panel = SpecPanel()
    qtbot.addWidget(panel)
    panel.begin("test")
    panel.finish(looked)
    assert panel.labels["speed"].text() == "114.6 tok/s"
    assert panel.labels["vs_plain"].text() == "0.99× (plain 115.4 tok/s)"
    assert panel.verdict.text().endswith("so this reply ran at 114.6 tok/s, 0.99× plain.")
    barely = dataclasses.replace(looked, tokens_per_s=115.3, t_draft_s=0.0003)   # 1.00×, the rates apart: said why
    panel.finish(barely)
    assert panel.labels["speed"].text() == "115.3 tok/s" and panel.labels["vs_plain"].text() == "1.00× (plain 115.7 tok/s)"
    assert panel.verdict.text().endswith("so this reply ran at 115.3 tok/s, 1.00× plain.")
    slower = dataclasses.replace(looked, tokens_per_s=110.0)       # 110 and 111: 0.99 from the digits shown
    panel.finish(slower)
    assert panel.labels["speed"].text() == "110 tok/s" and panel.labels["vs_plain"].text().endswith("(plain 111 tok/s)")


def test_a_reply_stopped_while_reading_its_conversation_says_no_first_token_came(qtbot):
    """A new user's try: Esc 4 s into reading 1,252 pasted tokens, and the panel said "Tokens 0 (first after
    4.01 s)" and "Stopped before the first token … The first token came after 4.01 s: 423 tokens of the
    conversation had to be read first (the other 829 were kept from before)"."""
    stopped = GenerationStats(n_tokens=0, tokens_per_s=0.0, stop_reason="cancelled", ttft_s=4.01,
                              n_prompt_tokens=1252, n_prompt_evaluated=423, n_prompt_unread=400)
    panel = SpecPanel()
    qtbot.addWidget(panel)
    panel.begin("test")
    panel.finish(stopped)
    assert panel.labels["tokens"].text() == "0" and panel.labels["first"].text() == "none (stopped after 4.01 s)"
    assert panel.verdict.text() == ("Stopped before the first token: nothing was written or drafted. It was stopped "
                                    "4.01 s into reading the conversation: 423 of 823 tokens read; the other 429 "
                                    "had been read before.")
    full = dataclasses.replace(stopped, stop_reason="context_full")
    panel.finish(full)
    assert panel.labels["first"].text() == "none (ended after 4.01 s)" and "first token came" not in panel.verdict.text()


def test_pay_curve_says_when_its_alpha_rests_on_a_few_drafted_tokens(reply, qtbot):
    """A new user's try: "γ 16 is best (predicted 1.66×)" from α 1.00 on 8 drafted tokens, all kept. Under
    THIN_EVIDENCE drafted tokens the sentence says how few there were; from it on, it does not."""
    from desktop_app.ui.pay_curve import THIN_EVIDENCE

    _, _, stats, _ = reply
    pay = PayCurve()
    qtbot.addWidget(pay)
    few = dataclasses.replace(stats, n_drafted=8, n_accepted=8, alpha=1.0, acceptance_rate=1.0)
    pay.show(few, 4)
    assert pay.sentence.text().startswith("At α 1.00 (from only 8 drafted tokens: a rough guess)")
    enough = dataclasses.replace(few, n_drafted=THIN_EVIDENCE, n_accepted=THIN_EVIDENCE)
    pay.show(enough, 4)
    assert pay.sentence.text().startswith("At α 1.00 on this machine") or pay.sentence.text().startswith("At α 1.00, ")
    flat = {b: 0.010 + 0.0002 * b for b in range(1, 34)}     # a GPU-like check: still rising where the chart
    pay.show(dataclasses.replace(enough, c=0.0, t_draft_step_s=None, verify_s_by_batch=flat), 4)   # ends
    assert pay.best_gamma == pay.gammas[-1] == 16           # (not "γ 16 is best" beside a slider to 32: a user's try)
    assert "γ 16 or longer is best for copies of earlier text (the chart ends at γ 16; predicted " in pay.sentence.text()



def test_pay_curve_names_copies_where_the_reply_only_copied(reply, qtbot):
    """A reply drafted by prompt lookup alone (c 0) read "γ 7 is best (predicted 1.40×…)", naming no
    drafter (a new user's try); the draft model's reply says nothing more."""
    _, _, stats, _ = reply
    pay = PayCurve()
    qtbot.addWidget(pay)
    pay.show(dataclasses.replace(stats, alpha=0.99, c=0.0, t_draft_step_s=None), 4)   # (as a lookup reply's)
    assert pay.best_gamma and f"{best_words(pay.best_gamma, pay.gammas)} for copies of earlier text (" in pay.sentence.text()
    pay.show(dataclasses.replace(stats, alpha=0.99, c=0.01, t_draft_step_s=0.01 * stats.t_target_step_s), 4)
    assert pay.best_gamma and f"{best_words(pay.best_gamma, pay.gammas)} (" in pay.sentence.text()
