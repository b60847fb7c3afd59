"""The speculation panel's round strip, its header and its numbers: on synthetic rounds, and end to end
on the real SmolLM2 pair (pytest-qt, offscreen)."""
from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import QPoint, Qt

from desktop_app.engine.auto_policy import FIRST_PROBE
from desktop_app.engine.events import GenerationStats, RoundEvent, StopReason, TokenEvent, TokenKind
from desktop_app.engine.settings import SpecSettings
from desktop_app.engine.explain import explain, measured_text, predicted_text
from desktop_app.engine.number_text import alpha_text, duration_text, rate_text, rates_finer, share_text
from desktop_app.ui.main_window import MainWindow
from desktop_app.ui.round_strip import (BONUS, CORRECTION, DISCARDED, END, KEPT, PLAIN, REJECTED, Colours,
                                        RoundStrip, round_chips, visible)
from desktop_app.ui.spec_panel import NO_REPLY, SpecPanel
from desktop_app.ui.stat_label import StatLabel

from tests.test_ui_window import load, stored, type_and_send, wait_idle

A, C, B, P = TokenKind.ACCEPTED, TokenKind.CORRECTION, TokenKind.BONUS, TokenKind.PLAIN


def make_round(index, drafted_text, accepted, emitted_text, kinds, drafter="model", end=""):
    g = len(drafted_text)
    return RoundEvent(index=index, drafter=drafter, drafted=tuple(range(g)), drafted_text=tuple(drafted_text),
                      q=tuple(0.5 + 0.05 * i for i in range(g)), p=tuple(0.4 - 0.05 * i for i in range(g)),
                      accepted=accepted, emitted=tuple(range(len(emitted_text))), emitted_text=tuple(emitted_text),
                      kinds=tuple(kinds), target_top=(), t_draft_s=0.001, t_verify_s=0.002, t_round_s=0.003,
                      n_past=10 + index, end=end)


# -- the chips of a round

def test_chips_of_a_rejected_round_a_bonus_a_plain_step_and_an_end():
    rejected = make_round(0, [" the", " cat", " sat", "\n"], 1, [" the", " dog"], [A, C])
    assert [c.kind for c in round_chips(rejected)] == [KEPT, REJECTED, DISCARDED, DISCARDED, CORRECTION]
    assert [visible(c.text) for c in round_chips(rejected)] == ["·the", "·cat", "·sat", "⏎", "·dog"]
    tip = round_chips(rejected)[1].tip
    assert "q = 0.550" in tip and "p = 0.350" in tip and "min(1, p/q) = 0.636" in tip and "rejected" in tip
    assert "not judged" in round_chips(rejected)[2].tip
    assert "correction" in round_chips(rejected)[-1].tip

    bonus = make_round(1, ["a", "b"], 2, ["a", "b", "c"], [A, A, B], drafter="lookup")
    assert [c.kind for c in round_chips(bonus)] == [KEPT, KEPT, BONUS]
    plain = make_round(2, [], 0, ["\t"], [P], drafter="none")
    assert [(c.kind, visible(c.text)) for c in round_chips(plain)] == [(PLAIN, "⇥")]
    # cut at an end-of-generation token that was a kept draft: no target token, an end marker
    end = make_round(3, ["!", "<|im_end|>"], 2, ["!", "<|im_end|>"], [A, A], end="eos")
    assert [c.kind for c in round_chips(end)] == [KEPT, KEPT, END]
    assert visible("<|im_end|>") == "im_end" and visible("") == "∅"


def test_strip_labels_name_the_drafter_and_gamma(qtbot):
    strip = RoundStrip(Colours(False))
    qtbot.addWidget(strip)
    strip.append([make_round(0, ["a", "b", "c"], 1, ["a", "x"], [A, C]),
                  make_round(1, ["a"], 1, ["a", "b"], [A, B], drafter="lookup"),
                  make_round(2, [], 0, ["z"], [P], drafter="none")])
    assert [strip.label(i) for i in range(3)] == ["#1 draft model γ3", "#2 lookup γ1", "#3 plain"]


def test_the_strip_keeps_room_for_five_rows_of_its_font_when_the_font_changes(qtbot):
    """Its minimum height was fixed from the font it started with (a review): a larger font left
    fewer rows than five, clipped."""
    strip = RoundStrip(Colours(False))
    qtbot.addWidget(strip)
    small = strip.minimumHeight()
    font = strip.font()
    font.setPointSizeF(font.pointSizeF() * 2)
    strip.setFont(font)
    assert strip.minimumHeight() == strip.MIN_ROWS * strip.round_delegate.line_height(font) + 2 * strip.frameWidth()
    assert strip.minimumHeight() > small * 1.5


def test_rows_narrowed_are_laid_out_again_and_none_is_drawn_over_the_next(qtbot):
    """A new user's try, after a restart: a row wrapped onto one more line as the strip narrowed (the
    panel's scroll bar appeared), and its last chip was drawn under the next row. QListView lays its
    rows out again only when its height changes."""
    strip = RoundStrip(Colours(False))
    qtbot.addWidget(strip)
    rounds = [make_round(i, [" multiple", " layers", " of", " the", " answer"], 2, [" multiple", " layers", " no"],
                         [A, A, C]) for i in range(22)]
    strip.resize(420, 200)
    strip.show()
    strip.set_rounds(rounds)

    def rows():
        return [strip.visualRect(strip.round_model.index(i)) for i in range(len(rounds))]

    for width in (300, 240, 420):                            # narrower (more lines), then wider: height as is
        strip.resize(width, 200)
        qtbot.waitUntil(lambda: all(a.bottom() < b.top() for a, b in zip(rows(), rows()[1:])), timeout=2000)
        for r, rect in zip(rounds, rows()):
            assert strip.round_delegate.layout(r, rect, strip.font())[1] <= rect.height() + 1
    assert rows()[0].height() < rows()[0].width() // 10     # (back to one line at 420 px)


def test_5000_rounds_append_and_all_stay(qtbot):
    strip = RoundStrip(Colours(False))
    qtbot.addWidget(strip)
    strip.resize(300, 400)
    strip.show()
    inserted = []
    strip.round_model.rowsInserted.connect(lambda _p, first, last: inserted.append((first, last)))
    rounds = [make_round(i, ["x", "y", "z"], i % 4, ["x", "y", "z", "w"][:i % 4 + 1],
                         [A] * (i % 4) + [C if i % 4 < 3 else B]) for i in range(5000)]
    for start in range(0, 5000, 50):                        # as the panel flushes: a batch at a time
        strip.append(rounds[start:start + 50])
    qtbot.wait(50)
    assert strip.round_model.rowCount() == 5000
    assert inserted[0] == (0, 49) and inserted[-1] == (4950, 4999) and len(inserted) == 100
    assert strip.round_model.round(4999) is rounds[4999]    # no cap: the first and the last are both there
    assert strip.label(0) == "#1 draft model γ3" and strip.label(4999) == "#5000 draft model γ3"
    # it follows the bottom ...
    bar = strip.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())
    # ... unless the user scrolled up
    bar.setValue(0)
    strip.append([make_round(5000, ["q"], 1, ["q", "r"], [A, B])])
    qtbot.wait(50)
    assert bar.value() == 0 and strip.round_model.rowCount() == 5001


def test_the_keyboard_lands_on_the_last_row_in_sight_outlines_it_and_enter_tells_the_row(qtbot):
    """Under Xvfb the sixth Tab from the message box landed on the strip with nothing marked: Qt made the
    first row current (out of sight after a long reply) and the next arrow key scrolled to the top."""
    from PySide6.QtWidgets import QLineEdit, QToolTip, QVBoxLayout, QWidget
    box = QWidget()
    qtbot.addWidget(box)
    layout = QVBoxLayout(box)
    before = QLineEdit()
    strip = RoundStrip(Colours(False))
    layout.addWidget(before)
    layout.addWidget(strip)
    box.resize(420, 300)
    box.show()
    qtbot.waitExposed(box)
    strip.set_rounds([make_round(i, ["a", "b", "c"], 2, ["a", "b", "x"], [A, A, C]) for i in range(60)])
    bar = strip.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())
    unfocused = strip.viewport().grab().toImage()
    before.setFocus()
    qtbot.keyClick(before, Qt.Key_Tab)
    qtbot.waitUntil(strip.hasFocus)
    assert strip.currentIndex().row() == 59 and bar.value() == bar.maximum()
    rect = strip.visualRect(strip.currentIndex())
    focused = strip.viewport().grab().toImage()
    changed = {(x, y) for x in range(0, strip.viewport().width(), 2) for y in range(0, strip.viewport().height(), 2)
               if focused.pixel(x, y) != unfocused.pixel(x, y)}
    assert changed and all(rect.adjusted(-1, -1, 1, 1).contains(x, y) for x, y in changed)   # that row, outlined
    qtbot.keyClick(strip, Qt.Key_Up)
    assert strip.currentIndex().row() == 58 and bar.value() > bar.maximum() - 3 * rect.height()
    qtbot.keyClick(strip, Qt.Key_Return)
    qtbot.waitUntil(QToolTip.isVisible)
    assert QToolTip.text().startswith("round 59: draft model drafted 3, the target kept 2\n")
    assert "draft 3 of 3 (draft model): 'c' — rejected; q = 0.600 (draft)" in QToolTip.text()
    QToolTip.hideText()


def test_hovering_a_chip_tells_q_p_and_the_kind(qtbot):
    strip = RoundStrip(Colours(False))
    qtbot.addWidget(strip)
    strip.resize(400, 200)
    strip.show()
    strip.append([make_round(0, [" one", " two", " three"], 1, [" one", " four"], [A, C])])
    qtbot.waitExposed(strip)
    rects = strip.chip_rects(0)
    assert [kind for _r, kind in rects] == [KEPT, REJECTED, DISCARDED, CORRECTION]
    kept_tip = strip.tooltip_at(0, rects[0][0].center())
    assert "kept" in kept_tip and "q = 0.500" in kept_tip and "p = 0.400" in kept_tip and "min(1, p/q) = 0.800" in kept_tip
    assert strip.tooltip_at(0, rects[3][0].center()).startswith("correction")
    label_tip = strip.tooltip_at(0, strip.visualRect(strip.round_model.index(0)).topLeft() + QPoint(8, 8))
    assert label_tip.startswith("round 1: draft model drafted 3, the target kept 1") and "verify 2.0 ms" in label_tip


# -- the numbers agree

def slow_stats(**kw) -> GenerationStats:
    """A slow machine: 0.5 tok/s plain decoding, 0.7 tok/s here (1.40× measured)."""
    base = dict(n_tokens=14, n_rounds=5, tokens_per_s=0.7, t_target_step_s=2.0, t_draft_s=1.0, t_verify_s=19.0,
                n_drafted=20, n_accepted=9, acceptance_rate=0.45, alpha=0.64, mean_accepted=1.8, mean_drafted=4.0,
                c=0.05, predicted_speedup=0.16, predicted_speedup_measured=1.2, ttft_s=2.5)
    base.update(kw)
    return GenerationStats(**base)


def test_the_tokens_row_counts_the_end_the_rounds_wrote(qtbot):
    """Five rounds that drafted 4 and kept 1.8 each give 2.80 tokens apiece, 14 in all: 13 of text and the
    reply's end. The row said "13 in 5 rounds" beside the sentence's "giving 2.80 tokens" (a new user's
    sums: 5 × 2.80 = 14 ≠ 13). A reply cut off at max_tokens wrote no end."""
    panel = SpecPanel()
    qtbot.addWidget(panel)
    ended = slow_stats(n_tokens=13, stop_reason=StopReason.EOS.value)
    panel.show_stats(ended)
    assert panel.labels["tokens"].text() == "13 + end in 5 rounds" and panel.labels["first"].text() == "2.50 s"
    assert "giving 2.80 tokens" in explain(ended)
    panel.show_stats(slow_stats(stop_reason=StopReason.MAX_TOKENS.value))
    assert panel.labels["tokens"].text() == "14 in 5 rounds"
    panel.show_stats(slow_stats(stop_reason=StopReason.EOS.value, remote="llama-server"))   # (its "stop" may be
    assert panel.labels["tokens"].text() == "14 in 5 rounds"          # a stop string's)


def test_a_reply_that_ended_after_its_last_round_is_marked_there(qtbot):
    """A reply that a full context, a stop string or Stop ended came to no end in a round: the strip
    showed no end mark at all (a new user's try). Its last round now carries why it ended."""
    from desktop_app.engine.events import FinishEvent

    for reason, shown in (("context_full", "context full"), ("stop_string", "stop string"), ("cancelled", "stopped")):
        panel = SpecPanel()
        qtbot.addWidget(panel)
        panel.begin("cats")
        for i in range(3):
            panel.add_round(make_round(i, ["a", "b"], 1, ["a", "c"], [A, C]))
        stats = slow_stats(stop_reason=reason)
        panel.finish(stats, FinishEvent("", (), stats, StopReason(reason)).end_after_rounds)
        strip = panel.strip
        assert [c.kind for c in strip.chips(1)] == [KEPT, REJECTED, CORRECTION]
        assert [c.kind for c in strip.chips(2)] == [KEPT, REJECTED, CORRECTION, END]
        assert strip.chips(2)[-1].tip.startswith("the reply ended here: ") and strip.round_model.rounds[-1].end == reason
        painted = strip.round_delegate.layout(strip.round_model.round(2), strip.visualRect(strip.round_model.index(2)),
                                              strip.font())[0]
        assert painted[-1].text == "■ " + shown
        assert strip.round_model.data(strip.round_model.index(2)).endswith(f"[{shown}]")    # (the row's words)
    ended = make_round(0, ["!"], 1, ["!", "<|im_end|>"], [A, B], end="eos")    # an end the round wrote stays
    panel.begin("cats")
    panel.add_round(ended)
    stats = slow_stats(stop_reason="eos")
    panel.finish(stats, FinishEvent("", (), stats, StopReason.EOS).end_after_rounds)
    assert panel.strip.round_model.rounds == [ended]
    # none where no round could carry the end but none came: a llama-server reply that broke off (not Stop),
    # and a server's stream that said no end (its round unmarked, the stop taken as an end token)
    for reason, message in ((StopReason.CANCELLED, "the server closed the connection"), (StopReason.EOS, "")):
        assert FinishEvent("", (), stats, reason, message).end_after_rounds == ""


def test_a_share_short_of_all_never_reads_as_all(qtbot):
    """220 of 221 drafts kept read "220/221 (100 %)", "α 1.00" and "100 % of drafted tokens were kept"
    beside a rejected draft (a new user's try): one decimal more where rounding would say all, or none."""
    panel = SpecPanel()
    qtbot.addWidget(panel)
    s = slow_stats(n_drafted=221, n_accepted=220, acceptance_rate=220 / 221, alpha=220 / 221)
    panel.show_stats(s)
    assert panel.labels["accepted"].text() == "220/221 (99.5 %)" and panel.labels["alpha"].text() == "0.995"
    assert "99.5 % of drafted tokens were kept (α ≈ 0.995" in explain(s)
    assert (share_text(1.0), share_text(0.0), share_text(0.4), share_text(1 / 3000)) == ("100 %", "0 %", "40 %", "<0.1 %")
    assert (alpha_text(1.0), alpha_text(0.9999), alpha_text(0.934)) == ("1.00", ">0.999", "0.93")


def test_the_sentence_adds_up_as_shown_and_as_the_panel_shows_it():
    """"kept 0.67, giving 1.67 tokens": the kept mean as shown, plus the target's own (0.665 printed 0.67),
    and to the panel's row's two decimals (the sentence said 3.0 where the row said 2.95: a user's try)."""
    text = explain(slow_stats(mean_accepted=0.665, mean_drafted=2.95))
    assert "a round drafted 2.95 and kept 0.67, giving 1.67 tokens" in text


def test_a_reply_that_only_copied_says_its_copies_failed_not_its_draft():
    """Auto with the draft model loaded copied twice by prompt lookup and never drafted with the model:
    the sentence said "the draft is often wrong" (a new user's try), blaming a model that never drafted."""
    copies = slow_stats(tokens_per_s=0.4, t_verify_s=14 / 0.4 - 1.0, n_drafted=12, n_accepted=1, alpha=0.33,
                        acceptance_rate=1 / 12, mean_accepted=0.5, mean_drafted=6.0, c=0.0, t_draft_s=0.01)
    text = explain(copies)
    assert "the 2 copies of earlier text kept 1 of 12 tokens" in text and "draft is often wrong" not in text, text
    one = explain(slow_stats(tokens_per_s=0.4, t_verify_s=14 / 0.4 - 1.0, n_drafted=2, n_accepted=1, alpha=0.5,
                             acceptance_rate=0.5, mean_accepted=1.0, mean_drafted=2.0, c=0.0))
    assert "the one copy of earlier text kept 1 of 2 tokens" in one, one
    model = explain(slow_stats(tokens_per_s=0.4, t_verify_s=14 / 0.4 - 1.0, alpha=0.33, c=0.5))
    assert "the draft is often wrong" in model and "copies" not in model, model


def test_rates_never_print_as_zero():
    assert rate_text(0.7) == "0.70 tok/s" and rate_text(9.944) == "9.94 tok/s" and rate_text(12.4) == "12.4 tok/s"
    assert rate_text(123.4) == "123 tok/s" and rate_text(9.996) == "10.0 tok/s" and rate_text(99.96) == "100 tok/s"
    assert rate_text(0.04) == "0.04 tok/s"


def test_a_first_token_s_time_reads_the_same_in_the_panel_compare_and_the_cli(qtbot, capsys):
    """The panel said "first after 2.50 s" where Compare and `tandem generate` said "2500 ms": now "2.50 s"
    everywhere."""
    from desktop_app.commands.generate import _print_stats
    from desktop_app.engine.events import FinishEvent, StopReason
    assert duration_text(2.5) == "2.50 s" and duration_text(0.177) == "177 ms" and duration_text(0.0042) == "4.2 ms"
    panel = SpecPanel()
    qtbot.addWidget(panel)
    panel.show_stats(slow_stats())
    assert panel.labels["first"].text() == "2.50 s"
    _print_stats(FinishEvent("", (), slow_stats(), StopReason.EOS), 0, 1, [], SpecSettings(), None, 48)
    assert "first token 2.50 s" in capsys.readouterr().err


def test_grid_and_verdict_agree_and_fit_300_px(qtbot):
    panel = SpecPanel()
    qtbot.addWidget(panel)
    panel.resize(300, 700)
    panel.show()
    s = slow_stats()
    assert s.measured_speedup == pytest.approx(1.4)
    panel.show_stats(s)
    L = panel.labels
    # no plain step of its own: plain's rate is the one timed before the reply, and both places say so
    assert L["vs_plain"].text() == "1.40× (plain 0.50 tok/s, earlier)" and L["speed"].text() == "0.70 tok/s"
    # a value's tooltip: the whole value, then what it means (the value alone explained nothing: a new user's try)
    assert L["vs_plain"].toolTip() == f"1.40× (plain 0.50 tok/s, earlier)\n\n{panel.titles['vs_plain'].toolTip()}"
    assert "timed on this reply's plain steps" in L["vs_plain"].toolTip()
    # tokens and the rounds the strip numbers ("#473" beside "Tokens 559" read as a token's number)
    assert L["tokens"].text() == "14 in 5 rounds" and "round" in panel.titles["tokens"].toolTip()
    # the first token's time in a row of its own: sharing one, either it or the rounds' name was left out in a
    # narrow panel ("37 + end in 38 (first 1.64 s)" read "38 what?"; "(…)" stood for the time), new users' tries
    assert L["first"].text() == "2.50 s" and panel.titles["first"].text() == "First token"
    qtbot.waitUntil(lambda: L["first"].width() > 0)
    assert L["tokens"].shown_text() == "14 in 5 rounds" and L["first"].shown_text() == "2.50 s"   # (whole at 300 px)
    ratio = StatLabel()                  # narrower than any form with a part left out: the shortest first part
    ratio.setText("1.40× (plain 0.50 tok/s, earlier)", "1.40× of 0.50 tok/s")
    ratio.resize(ratio.fontMetrics().horizontalAdvance("1.40×") + 4, ratio.height())
    assert ratio.shown_text() == "1.40×"                         # (not "1.40× of 0.…": a review found)
    assert L["predicted"].text() == (f"{s.predicted_speedup_measured:.2f}× "     # the row's title says "predicted"
                                     f"({s.predicted_speedup:.2f}× if a check cost one pass)") and L["alpha"].text() == "0.64"
    predicted = L["predicted"]           # (narrower: the flat-cost figure in fewer words, not "(…)": a user's try)
    compact = f"{s.predicted_speedup_measured:.2f}× (one-pass check: {s.predicted_speedup:.2f}×)"
    predicted.resize(predicted.fontMetrics().horizontalAdvance(compact) + 4, predicted.height())
    assert predicted.shown_text() == compact
    assert "first rejection" in panel.titles["alpha"].toolTip()
    # a mean over the rounds that drafted, and its title says so (2.26 kept "per round" beside 63 rounds, of
    # which 39 drafted: a new user divided by 63)
    assert panel.titles["per_round"].text() == "Kept per drafted round"
    assert "beats plain decoding (0.50 tok/s, measured before this reply) by 1.40×" in panel.verdict.text()
    timed_here = slow_stats(n_plain_rounds=1, n_rounds=6, t_plain_s=2.0)    # a plain step in the reply times it
    assert measured_text(timed_here).endswith("(plain 0.50 tok/s)")
    assert "(0.50 tok/s, measured) by" in explain(timed_here)
    qtbot.wait(10)
    assert panel.width() == 300
    for label in L.values():              # one line each; shortened only by whole parts, never in a number
        assert isinstance(label, StatLabel)                 # one line: its height never follows its text
        shown = label.shown_text()
        # (a part left out shows as "(…)" or "/ …": "7 …" read as "7 or more", a new user's try)
        kept, cut, after = shown.partition(" (…)") if shown.endswith(" (…)") else shown.partition(" / …")
        assert shown in (label.text(), *label._compact) or any(
            cut and not after and form.startswith(kept) and form[len(kept):].startswith(" (" if "(…)" in cut else " / ")
            for form in (label.text(), *label._compact))
        assert label.fontMetrics().horizontalAdvance(shown) <= label.contentsRect().width()
    # "× plain" keeps the rate it is over, compact where the whole does not fit ("1.40× (…)" hid it)
    assert L["vs_plain"].shown_text() == "1.40× of 0.50 tok/s" and L["speed"].shown_text() == "0.70 tok/s"
    # the draft step's cost says what it is relative to, and a reply of copies alone says it had no step
    # (it read "0 …" in a 1000×700 window, and a new user's try found the title's "c" cryptic)
    assert L["c"].shown_text() == "0.05 × a pass" and "c" not in panel.titles["c"].text().split()
    panel.show_stats(slow_stats(c=0.0))
    assert L["c"].shown_text().startswith("none")
    # nothing kept: the prediction row is cut whole, never mid-word (it read "none: 0/2 drafts kep" in a
    # 1000×700 window, a new user's try); any single part too wide for its label ends in "…"
    panel.show_stats(slow_stats(n_accepted=0, n_drafted=33, acceptance_rate=0.0, alpha=0.0, mean_accepted=0.0))
    shown = L["predicted"].shown_text()
    assert shown.startswith("none") and (shown == L["predicted"].text() or shown.endswith(("…", "(…)")))
    assert L["predicted"].fontMetrics().horizontalAdvance(shown) <= L["predicted"].contentsRect().width()
    L["predicted"].setText("a_single_part_far_wider_than_any_label_of_this_grid_could_ever_be")
    assert L["predicted"].shown_text().endswith("…")
    # a plain reply's time is the target's, shown (it read "–" beside the chart showing it)
    panel.show_stats(slow_stats(n_drafted=0, n_accepted=0, t_draft_s=0.0))
    assert L["split"].text() == "0.00 s / 19.00 s" and L["alpha"].text() == "–" and L["c"].text() == "–"
    # auto weighed the draft model and never drafted with it: the row shows the price the sentence quotes
    # (it read "–" beside "a step of it would cost 1.73 of a target pass here", a new user's try)
    unused = slow_stats(n_drafted=0, n_accepted=0, t_draft_s=0.0, n_rounds=20, unused_draft_c=1.73)
    panel.show_stats(unused)
    assert L["c"].shown_text() == "1.73 (not drafted)" and L["c"].text() == "1.73 × a pass (not drafted)"
    assert "would cost 1.73 of a target pass" in panel.verdict.text()
    panel.show_stats(dataclasses.replace(unused, n_rounds=FIRST_PROBE))   # a reply too short for auto to weigh it
    assert L["c"].text() == "–" and "tries it only after a reply's first" in panel.verdict.text()
    copies = dataclasses.replace(unused, n_drafted=4, n_accepted=2, c=0.0, t_draft_s=0.01)   # copies only: the
    panel.show_stats(copies)                      # row said "none (copies only)" beside the sentence's 1.73
    assert L["c"].text() == "1.73 × a pass (not drafted: lookup only)" and "would cost 1.73 of a target pass" in \
        panel.verdict.text()
    L["c"].setFixedWidth(L["c"].fontMetrics().horizontalAdvance("1.73 × a pass (not drafted)") + 4)
    assert L["c"].shown_text() == "1.73 × a pass (not drafted)"      # (not "1.73 × a pass (…)", a new user's try)
    L["c"].setFixedWidth(L["c"].fontMetrics().horizontalAdvance("1.73 (not drafted)") + 4)
    assert L["c"].shown_text() == "1.73 (not drafted)"               # (nor at 1024 px, another's)
    L["c"].setMinimumWidth(0)
    L["c"].setMaximumWidth(16777215)
    panel.show_stats(dataclasses.replace(copies, unused_draft_c=None))    # (no draft model loaded)
    assert L["c"].text() == "none (lookup only)"
    # slower than plain: the verdict says it loses, with the same number as the grid
    s = slow_stats(tokens_per_s=0.3, t_verify_s=14 / 0.3 - 1.0)   # all of it in rounds: plain stays 0.5 tok/s
    panel.show_stats(s)
    assert panel.labels["vs_plain"].text().startswith("0.60×")
    assert "beats" not in panel.verdict.text() and "loses to plain decoding" in panel.verdict.text()
    assert "0.60×" in panel.verdict.text()
    # folded to its point (the whole ran to 20 lines at 1024×700 and pushed the rounds out of sight, a new
    # user's try): the loss and why, in one sentence with the grid's figure; "more" unfolds the whole
    verdict = panel.verdict
    assert verdict.shown().startswith("This reply loses to plain decoding (0.50 tok/s, measured before this "
                                      "reply): 0.60× its speed, because ") and verdict.shown().endswith(" more ▸")
    assert "α ≈" in verdict.text() and "α ≈" not in verdict.shown()
    assert verdict.shown()[:-len(" more ▸")] in verdict.text().replace("That loses", "This reply loses")
    verdict.linkActivated.emit("more")
    assert verdict.shown() == verdict.text() + " less ▴"
    panel.show_stats(slow_stats(tokens_per_s=0.51, t_verify_s=14 / 0.51 - 1.0))   # unfolded, it stays so
    assert "about even" in panel.verdict.text() and "beats" not in panel.verdict.text()
    assert verdict.shown() == verdict.text() + " less ▴" and "α ≈" in verdict.shown()
    verdict.linkActivated.emit("less")
    assert verdict.shown().startswith("This reply is about even with plain decoding") and "α ≈" not in verdict.shown()
    panel.show_stats(slow_stats(n_drafted=0, n_accepted=0, t_draft_s=0.0))   # a plain reply: one sentence, whole
    assert verdict.shown() == verdict.text() and "more" not in verdict.shown()
    # a long reply's count, narrower than the row: the rounds in a parenthesis left out, never a number cut
    # ("1351 + end in 13…", a review found)
    panel.show_stats(slow_stats(n_tokens=1351, n_rounds=1352, stop_reason=StopReason.EOS.value))
    full = "1351 + end in 1352 rounds"
    assert L["tokens"].text() == full and L["tokens"].fontMetrics().horizontalAdvance(full) > L["tokens"].width()
    assert L["tokens"].shown_text() in ("1351 + end (1352 rounds)", "1351 + end (…)")


def test_nothing_kept_predicts_no_gain():
    s = slow_stats(n_accepted=0, acceptance_rate=0.0, alpha=0.0, mean_accepted=0.0, predicted_speedup_measured=11.1,
                   tokens_per_s=0.3, t_verify_s=14 / 0.3 - 1.0)
    assert predicted_text(s) == "none (0/20 drafts kept)"
    assert "loses to plain decoding" in explain(s) and "because no draft was kept" in explain(s)


# -- end to end on the real pair

def stats_of(record: dict) -> GenerationStats:
    return GenerationStats(**{k: v for k, v in record.items() if k in GenerationStats.__dataclass_fields__})


def send_and_collect(qtbot, w, text):
    events = []
    w.worker.round.connect(events.append, Qt.DirectConnection)    # on the worker thread: a list append
    try:
        type_and_send(qtbot, w, text)
        qtbot.waitUntil(lambda: w.generating_id is not None, timeout=120_000)
        wait_idle(qtbot, w)
    finally:
        w.worker.round.disconnect(events.append)
    return events


def check_rows(strip, events):
    assert strip.round_model.rowCount() == len(events)
    for row, r in enumerate(events):
        assert strip.round_model.round(row).to_record() == r.to_record()
        label = strip.label(row)
        assert label.startswith(f"#{r.index + 1} ")
        if r.gamma:
            assert label.endswith(f" γ{r.gamma}")
            assert ("draft model" in label) == (r.drafter == "model") and ("lookup" in label) == (r.drafter == "lookup")
        else:
            assert label == f"#{r.index + 1} plain"
        kinds = [c.kind for c in strip.chips(row)]
        assert kinds.count(KEPT) == r.accepted
        assert kinds.count(REJECTED) == (1 if r.accepted < r.gamma else 0)
        assert kinds.count(DISCARDED) == max(0, r.gamma - r.accepted - 1)
        target = [k for k in kinds if k in (CORRECTION, BONUS, PLAIN)]
        assert target == [k.value for k in r.kinds[r.accepted:]]          # the target's token, if the round got there
        assert (kinds[-1] == END) == bool(r.end)


@pytest.mark.network
def test_strip_rows_are_the_rounds_and_new_switch_delete_clear_the_panel(qtbot, window, test_model_path, q2k_draft_path):
    w = window
    load(qtbot, w, test_model_path, q2k_draft_path)
    w.settings_panel.temperature.setValue(0.0)
    w.settings_panel.max_tokens.setValue(40)
    events = send_and_collect(qtbot, w, "List the planets of the solar system.")
    panel, strip = w.spec_panel, w.spec_panel.strip
    qtbot.waitUntil(lambda: strip.round_model.rowCount() == len(events))
    assert len(events) >= 3
    check_rows(strip, events)
    reply = stored(w)[-1]
    title = w.store.conversation(w.current_id).title
    assert panel.header.text().startswith("Reply of ")     # (named as the history names it: below)
    assert panel.header.text().endswith(f"in '{title}' (message 2, {'cut off' if events[-1].end == 'max_tokens' else 'finished'})")
    # nothing past the reply's end: the rounds' tokens are the reply's tokens, the last row ends it
    tokens = [t for r in events for t in r.emitted]
    assert tokens == reply.token_ids and len(tokens) == reply.stats["n_tokens"]
    last = events[-1]
    assert last.end in ("eos", "max_tokens") and all(not r.end for r in events[:-1])
    assert list(last.emitted) == reply.token_ids[-len(last.emitted):]
    assert [c.kind for c in strip.chips(len(events) - 1)][-1] == END
    # the numbers agree: the grid's measured comparison and the sentence
    s = stats_of(reply.stats)
    m = s.measured_speedup
    assert m is not None and panel.labels["vs_plain"].text().startswith(f"{m:.2f}×")
    verdict = panel.verdict.text()
    if s.n_drafted:
        assert ("beats" in verdict) == (m >= 1.05) and ("loses" in verdict) == (m <= 0.95)
        assert f"{m:.2f}×" in verdict
    if s.n_drafted and not s.n_accepted:
        assert "predicted" not in panel.labels["predicted"].text() or "none" in panel.labels["predicted"].text()

    first = w.current_id
    # New: the panel shows no reply
    w.new_conversation()
    assert strip.round_model.rowCount() == 0 and panel.header.text() == NO_REPLY
    assert all(label.text() == "–" for label in panel.labels.values())
    # back to the first conversation: its last reply, as a click on its footer shows it (the panel said
    # "No reply selected" beside a conversation of replies: a new user's try)
    w.open_conversation(first)
    check_rows(strip, events)
    assert panel.header.text().endswith(f"in '{title}' (message 2, cut off)")   # (at Max tokens)
    qtbot.mouseClick(w.chat.messages[-1].footer, Qt.LeftButton)
    check_rows(strip, events)
    assert panel.header.text().endswith(f"in '{title}' (message 2, cut off)")   # (at Max tokens)
    # switching to one without replies clears it
    second = max(c.id for c in w.store.list_conversations())
    w.open_conversation(second)
    assert strip.round_model.rowCount() == 0 and panel.header.text() == NO_REPLY
    # deleting the conversation shown clears it
    w.open_conversation(first)
    qtbot.mouseClick(w.chat.messages[-1].footer, Qt.LeftButton)
    assert strip.round_model.rowCount() == len(events)
    w._delete(first)
    assert strip.round_model.rowCount() == 0 and panel.header.text() == NO_REPLY


@pytest.mark.network
def test_after_a_restart_rounds_of_a_past_reply_come_from_the_history(qtbot, tmp_path, test_model_path, q2k_draft_path):
    history, settings = str(tmp_path / "history.db"), str(tmp_path / "settings.json")
    w = MainWindow(history, settings)
    qtbot.addWidget(w)
    w.show()
    load(qtbot, w, test_model_path, q2k_draft_path)
    w.settings_panel.temperature.setValue(0.0)
    w.settings_panel.max_tokens.setValue(8)         # (cut off: the reply ran 17 tokens on an AVX-512 EPYC,
    events = send_and_collect(qtbot, w, "Name a colour.")   # over 32 on an AVX2 one)
    cid = w.current_id
    title = w.store.conversation(cid).title
    w.close()

    again = MainWindow(history, settings)                     # no model loaded: the history alone
    qtbot.addWidget(again)
    again.show()
    try:
        assert again.spec_panel.header.text() == NO_REPLY and again.spec_panel.strip.round_model.rowCount() == 0
        again.open_conversation(cid)
        reply = again.chat.messages[-1]
        # (the window shows the first-run page until a model is loaded: the button is shown within its message)
        assert reply.role == "assistant" and reply.footer.isVisibleTo(reply)
        body = reply.body.viewport()                  # a click on its text shows its rounds too (only the footer
        shown = []                                    # did, and nothing said so: a new user's try) ...
        reply.showRounds.connect(shown.append)
        qtbot.mouseClick(body, Qt.LeftButton, pos=body.rect().center())
        assert shown == [reply.message_id]
        cursor = reply.body.textCursor()              # ... not one that selects text to copy
        cursor.select(cursor.SelectionType.Document)
        reply.body.setTextCursor(cursor)
        qtbot.mouseRelease(body, Qt.LeftButton, pos=body.rect().center())
        assert shown == [reply.message_id]
        reply.footer.click()
        check_rows(again.spec_panel.strip, events)
        header = again.spec_panel.header.text()
        assert header.startswith("Reply of ") and header.endswith(f"in '{title}' (message 2, cut off)")   # (Max
        # tokens: as the header said when it had just ended, not "(message 2)": a new user's try)
        assert again.tabs.currentWidget() is again.spec_scroll
        stats = stats_of(stored(again, cid)[-1].stats)
        assert again.spec_panel.labels["speed"].text() == rate_text(stats.tokens_per_s, rates_finer(stats))   # (a
        # digit more where three would not give its "× plain": 191.1 beside 0.99×, CI)
    finally:
        again.close()


def test_cli_summary_labels_predictions_and_predicts_no_gain_when_nothing_was_kept(capsys):
    from desktop_app.commands.generate import _print_stats
    from desktop_app.engine.events import FinishEvent, StopReason

    nothing = slow_stats(n_drafted=3, n_accepted=0, acceptance_rate=0.0, alpha=0.0, mean_accepted=0.0,
                         mean_drafted=3.0, predicted_speedup_measured=11.1, tokens_per_s=0.3, t_verify_s=14 / 0.3 - 1.0)
    _print_stats(FinishEvent("", (), nothing, StopReason.MAX_TOKENS), 0, 1, [], SpecSettings(), None, 48)
    err = capsys.readouterr().err
    assert "kept 0/3 drafted" in err and "no draft was kept" in err and "11.10" not in err
    # ("(14.1 tok/s)" read as the reply's own speed, and "timed in the same reply" was said of a reply with no
    # plain round: a new user's try)
    assert "measured 0.60x plain decoding (plain 0.50 tok/s, timed before this reply)" in err and " 0 tok/s" not in err
    _print_stats(FinishEvent("", (), slow_stats(), StopReason.MAX_TOKENS), 0, 1, [], SpecSettings(), None, 48)
    err = capsys.readouterr().err
    assert "predicted speed-up 1.20x (cost model" in err and "measured 1.40x plain decoding" in err
    assert "draft 1.00 s / target 19.00 s" in err     # (the plain steps' time too: "verify" said checking drafts)
    _print_stats(FinishEvent("", (), slow_stats(n_drafted=0, n_accepted=0), StopReason.EOS), 0, 1, [], SpecSettings(),
                 None, 48)
    assert "predicted" not in capsys.readouterr().err


def test_a_server_reply_s_stop_is_said_in_words_for_each_way_it_ends():
    """(generate --server said "stopped by Ctrl+C" of a reply the server broke off, a review found.)"""
    from desktop_app.commands.remote import _stopped_by
    from desktop_app.engine.events import FinishEvent, StopReason

    def said(reason, message="", stops=False):
        return _stopped_by(FinishEvent("", (), slow_stats(), reason, message), 64, stops)

    assert said(StopReason.CANCELLED, "the connection closed mid-reply") == "stopped: the server broke off"
    assert said(StopReason.EOS, stops=True) == "stopped by its end or a stop string (the server tells neither apart)"
    assert said(StopReason.EOS) == "stopped by its end (the model's end token)"
    assert said(StopReason.MAX_TOKENS) == "stopped by the token limit (-n 64)"
    unlimited = FinishEvent("", (), slow_stats(), StopReason.MAX_TOKENS)        # (-n -1: the server's own
    assert _stopped_by(unlimited, -1, False) == "stopped by the server's context (no -n limit)"   # "length")


def test_a_server_reply_s_summary_names_its_rounds_as_a_local_one_s(capsys):
    """"kept per round" beside "in 5 rounds" read as a mean over all five; it is over the rounds that
    drafted, as `tandem generate` and the panel say ("kept per drafted round")."""
    from types import SimpleNamespace

    from desktop_app.commands.remote import _print_stats
    from desktop_app.engine.events import FinishEvent, StopReason

    _print_stats(FinishEvent("", (), slow_stats(), StopReason.MAX_TOKENS), SimpleNamespace(accepted_per_pos=[]),
                 0, 1, 64, False)
    err = capsys.readouterr().err
    assert "kept 9/20 drafted (45 %) in 5 rounds, 1.80 kept per drafted round" in err, err     # (9 / 5)


def test_a_cleared_panel_keeps_recording_the_live_reply_and_shows_it_again(qtbot):
    panel = SpecPanel()
    qtbot.addWidget(panel)
    rounds = [make_round(i, ["a", "b"], 1, ["a", "c"], [A, C]) for i in range(6)]
    panel.begin("cats")
    assert panel.header.text() == "Live: reply in 'cats'" and panel.live
    for r in rounds[:3]:
        panel.add_round(r)
    qtbot.waitUntil(lambda: panel.strip.round_model.rowCount() == 3)      # the 100 ms flush
    panel.clear()                                  # the user switched to another conversation
    assert panel.strip.round_model.rowCount() == 0 and panel.header.text() == NO_REPLY
    for r in rounds[3:]:
        panel.add_round(r)
    qtbot.wait(250)
    assert panel.strip.round_model.rowCount() == 0
    panel.show_live()                              # ... and back to the one generating
    assert panel.strip.round_model.rounds == rounds and panel.header.text() == "Live: reply in 'cats'"
    panel.clear()
    panel.finish(slow_stats())                     # it finished while another conversation was shown
    assert not panel.live and panel.labels["speed"].text() == "–" and panel.header.text() == NO_REPLY


def test_a_renamed_conversation_s_name_follows_in_the_panel_s_header(qtbot):
    """The header kept the old name after a rename (a user's try): live, finished and stored."""
    panel = SpecPanel()
    qtbot.addWidget(panel)
    panel.begin("cats", 7)
    panel.retitle(8, "dogs")                       # another conversation: nothing changes
    assert panel.header.text() == "Live: reply in 'cats'"
    panel.retitle(7, "Cats and kittens")
    assert panel.header.text() == "Live: reply in 'Cats and kittens'"
    panel.finish(slow_stats())
    assert "in 'Cats and kittens' (finished)" in panel.header.text()
    panel.begin("cats", 7)                         # a reply stopped, or cut off by the engine's death, says so
    panel.finish(slow_stats(stop_reason="cancelled"))
    assert panel.header.text().endswith("in 'cats' (stopped)")
    for reason in ("max_tokens", "context_full"):  # cut off at max tokens or by a full context, not "finished"
        panel.begin("cats", 7)
        panel.finish(slow_stats(stop_reason=reason))
        assert panel.header.text().endswith("in 'cats' (cut off)")
    panel.begin("cats", 7)
    panel.interrupt("Interrupted: the model engine stopped before this reply was finished.")
    assert panel.header.text().endswith("in 'cats' (interrupted)")
    panel.show_stored([], None, 3, "Old name", 1_700_000_000.0, 2)
    assert "in 'Old name' (message 2, finished)" in panel.header.text()
    panel.retitle(3, "New name")
    assert "in 'New name' (message 2, finished)" in panel.header.text()
    panel.clear()
    panel.retitle(3, "Again")
    assert panel.header.text() == NO_REPLY


def test_a_long_prompt_s_progress_shows_in_the_reply_s_note_and_the_panel_until_its_first_round(qtbot):
    """A 1,100-token conversation read again after a restart showed "reading the prompt…" unchanged for
    13 s (a new user's try): the engine's PromptEvents now show how far it is, in the chat and the panel."""
    from desktop_app.engine.events import PromptEvent
    from desktop_app.ui.chat_view import ChatView
    from desktop_app.ui.live_reply import LiveReply
    from desktop_app.ui.spec_bar import SpecBar
    chat, panel, bar = ChatView(), SpecPanel(), SpecBar()
    for w in (chat, panel, bar):
        qtbot.addWidget(w)
    reply = LiveReply(chat, panel, bar)
    reply.start(7)
    reply.began(7, 7, "a long one")
    live = chat._streaming
    assert live.status.text() == "reading the prompt…" and panel.verdict.text() == "Reading the prompt…"
    reply.prompt(PromptEvent(256, 1100), 7)
    reply.prompt(PromptEvent(512, 1100), 7)
    assert live.status.text() == "reading the prompt… 512 of 1,100 tokens"
    assert panel.verdict.text() == "Reading the prompt… 512 of 1,100 tokens"
    panel.clear()                                  # the panel cleared and shown again: the progress stays
    panel.show_live()
    assert panel.verdict.text() == "Reading the prompt… 512 of 1,100 tokens"
    reply.prompt(PromptEvent(0, 1100, "draft"), 7)  # (fixed mode: the draft model reads it next, in one pass)
    assert live.status.text() == "the draft model is reading the prompt…"
    assert panel.verdict.text() == "The draft model is reading the prompt…"
    reply.round(make_round(0, [], 0, ["Hi"], [P]))
    reply.token(TokenEvent(1, "Hi", P, 0), 7)
    qtbot.waitUntil(lambda: panel.verdict.text() == "Generating…")
    qtbot.waitUntil(lambda: "reading" not in live.status.text())
    assert reply.reading is None


def test_live_the_panel_quotes_the_plain_rate_the_chart_shows_and_times_plain_rounds(qtbot):
    """A new user's try: mid-reply the panel said "plain ≈ 109 tok/s" under the chart's "plain ≈ 110"
    (the chart redraws once a second, the panel more often), and its draft / target time stayed "–"
    beside the time chart's bars while every round so far was plain."""
    import re
    panel = SpecPanel()
    qtbot.addWidget(panel)
    panel.resize(400, 900)
    panel.show()
    qtbot.waitExposed(panel)
    panel.begin("live", 1)
    plain = [dataclasses.replace(make_round(i, [], 0, ["z"], [P]), t_draft_s=0.0, t_verify_s=0.010, t_round_s=0.011)
             for i in range(6)]
    for r in plain:
        panel.add_round(r)
    qtbot.waitUntil(lambda: panel.labels["split"].text() != "–")
    assert panel.labels["split"].text() == "0.00 s / 0.06 s"
    panel.charts._redraw()                                          # the chart draws plain ≈ 90.9 (a 10 ms
    for i in range(6, 12):                                          # pass and 1 ms of the loop's own, as
        panel.add_round(dataclasses.replace(plain[0], index=i, t_verify_s=0.012, t_round_s=0.013))   # the end
    qtbot.wait(300)                                  # prices it) ... then slower plain rounds come (the panel's
    drawn = re.search(r"plain ≈ ([0-9.]+)", panel.charts.speed_title.text()).group(1)   # flushes, not the chart's)
    assert drawn == "90.9" and f"plain ≈ {drawn} tok/s, so far" in panel.labels["vs_plain"].text()
    panel.charts._redraw()
    qtbot.wait(300)
    assert "plain ≈ 83.3 tok/s, so far" in panel.labels["vs_plain"].text() and "83.3" in panel.charts.speed_title.text()


def test_the_live_panel_fills_alpha_kept_per_round_and_times_as_the_reply_s_end_will(qtbot):
    """While a reply streamed, α, kept per round and the draft / target time stayed "–" beside a
    live "Drafts kept" (a user's try). They fill as rounds come, with the numbers the reply's end
    then shows."""
    from desktop_app.engine.costs import CostModel
    from desktop_app.engine.metrics import StatsRecorder

    rounds = [make_round(0, ["a", "b", "c"], 1, ["a", "x"], [A, C]),
              make_round(1, ["a", "b"], 2, ["a", "b", "z"], [A, A, B]),
              make_round(2, [], 0, ["z"], [P]),
              make_round(3, ["a", "b", "c", "d"], 0, ["y"], [C])]
    panel = SpecPanel()
    qtbot.addWidget(panel)
    panel.begin("live", 1)
    recorder = StatsRecorder(10, 10)
    for r in rounds:
        panel.add_round(r)
        recorder.add_round(r, r.gamma)
    qtbot.waitUntil(lambda: panel.labels["alpha"].text() != "–")          # the 100 ms flush
    live = {key: panel.labels[key].text() for key in ("accepted", "alpha", "per_round", "split")}
    assert live == {"accepted": "3/9 (33 %)", "alpha": "0.60", "per_round": "1.00 of 3.00",
                    "split": "0.00 s / 0.01 s"}
    panel.finish(recorder.finish(5, 0.1, 0.01, 0.02, "max_tokens", CostModel()))
    assert {key: panel.labels[key].text() for key in live} == live


def test_a_late_first_token_after_a_long_read_is_explained():
    """"first 11.55 s" stood unexplained after a reload or a Compare, which left little of the conversation
    in the cache (a new user's try); a quick first token, or a short read, says nothing of it."""
    late = slow_stats(ttft_s=11.55, n_prompt_tokens=1100, n_prompt_evaluated=1054)
    assert explain(late).endswith("The first token came after 11.55 s: 1,054 tokens of the conversation had to "
                                  "be read first (the other 46 had been read before).")
    assert "first token came" not in explain(slow_stats(ttft_s=0.6, n_prompt_tokens=1100, n_prompt_evaluated=1054))
    assert "first token came" not in explain(slow_stats(ttft_s=3.0, n_prompt_tokens=1100, n_prompt_evaluated=20))


def test_the_folded_sentence_is_whole_in_every_case_it_keeps():
    """brief(): the point of explain() on its own, in each of _explain's cases (a review asked for all)."""
    from desktop_app.engine.explain import brief

    pays = slow_stats()
    assert brief(pays) == "This reply beats plain decoding (0.50 tok/s, measured before this reply) by 1.40×."
    assert brief(pays).replace("This reply", "That") in explain(pays)
    # a speed-up from a reply repeating itself says so folded too: it changes what the number means
    looping = slow_stats(repeated_share=0.7)
    assert brief(looping).startswith(brief(pays) + " 70 % of this reply repeats its own earlier text")
    # a loss gives its reasons without pointing back at the sentence folded away ("of those 9333 ms")
    loses = slow_stats(tokens_per_s=0.3, t_verify_s=14 / 0.3 - 1.0)
    said = brief(loses)
    assert said.startswith("This reply loses to plain decoding") and "of the round's" in said and "those" not in said
    # where nothing is measured against plain decoding, or nothing was drafted or written: explain()'s own start
    for s in (slow_stats(remote="llama-server"), slow_stats(t_target_step_s=None),
              slow_stats(n_drafted=0, n_accepted=0, unused_draft_c=1.73, n_rounds=20),
              slow_stats(n_tokens=0, n_rounds=0, tokens_per_s=0.0, stop_reason=StopReason.CANCELLED.value, ttft_s=4.0,
                         n_prompt_evaluated=512, n_prompt_unread=588, n_prompt_tokens=1100)):
        assert explain(s).startswith(brief(s)) and brief(s), (brief(s), explain(s))
    assert brief(slow_stats(n_drafted=0, n_accepted=0, unused_draft_c=1.73, n_rounds=20)) != \
        explain(slow_stats(n_drafted=0, n_accepted=0, unused_draft_c=1.73, n_rounds=20))   # (the rest: "more")
