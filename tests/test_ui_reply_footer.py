"""Every reply explains itself (#13 items 2, 3, 9): the footer under it, its tokens coloured by origin,
and coloured code blocks. The footer text and the origins are checked against the engine's own events
and the stored statistics, on the real SmolLM2 pair."""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict

import pytest
from PySide6.QtCore import QEvent, QPoint, Qt
from PySide6.QtGui import QFontMetricsF, QHelpEvent, QTextCursor, QTextDocument
from PySide6.QtWidgets import QApplication, QLabel, QPushButton, QToolTip

from desktop_app.chat.history import HistoryStore
from desktop_app.chat.line_breaks import keep_line_breaks
from desktop_app.chat.reply_footer import footer_forms, footer_text, made_with, reply_note, version_line
from desktop_app.chat.token_origins import TokenOrigin, align, kind_counts, origins_from_rounds
from desktop_app.engine.events import GenerationStats, RoundEvent, TokenKind
from desktop_app.engine.number_text import rate_text, rates_finer
from desktop_app.engine.sampling import SamplingParams
from desktop_app.engine.settings import SpecSettings
from desktop_app.ui.chat_view import ChatView
from desktop_app.ui.message_text import CODE_SHADE, KIND_PROPERTY, TOKEN_PROPERTY
from desktop_app.ui.code_highlight import code_language
from desktop_app.ui.main_window import MainWindow

TIMEOUT_MS = 120_000


# -- the footer's text, from stored stats and settings

def _settings(**spec) -> dict:
    return {"target": "t.gguf", "draft": "d.gguf", "sampling": asdict(SamplingParams(temperature=0.0)),
            "spec": asdict(SpecSettings(**spec)), "max_tokens": 48}


def _stats(**changes) -> GenerationStats:
    """Stats as a drafted reply records them (measured_speedup needs the single-pass time and the rounds)."""
    base = dict(n_tokens=76, tokens_per_s=13.3, n_rounds=30, n_drafted=76, n_accepted=46, mean_drafted=3.8,
                acceptance_rate=46 / 76, t_draft_s=1.5, t_verify_s=3.5, t_target_step_s=0.09, stop_reason="eos")
    base.update(changes)
    return GenerationStats(**base)


def test_footer_of_a_draft_model_reply_says_gamma_kept_speed_and_measured_speedup():
    s = _stats()
    assert s.measured_speedup is not None
    text = footer_text(s.to_json(), _settings(drafter="model", draft_max=4))
    assert text == f"draft model · γ 4 · 46/76 drafted kept · 13.3 tok/s · {s.measured_speedup:.2f}× plain (measured)"
    assert footer_text(s, _settings(drafter="model", draft_max=4)) == text     # the live stats read the same
    # a speed is shown as the panel shows it, a digit more where "14.9 tok/s" would not give its "1.00×"
    # (the panel said 14.98 tok/s and the footer 15.0, a new user's try)
    even = _stats(tokens_per_s=14.94, t_target_step_s=0.066, t_draft_s=0.0, t_verify_s=76 / 14.94)
    assert rates_finer(even) and " · 14.94 tok/s · 1.00× plain" in footer_text(even, _settings(drafter="model"))


def test_a_version_line_says_how_a_reply_was_made_its_speed_and_how_it_ended():
    model = {"spec": {"enabled": True, "drafter": "model", "draft_max": 4}}
    assert version_line(1, {"n_tokens": 5, "tokens_per_s": 58.6}, model) == "1. draft model · 58.6 tok/s"
    assert version_line(2, {"n_tokens": 5, "tokens_per_s": 47.0}, {"spec": {"enabled": False}}, "cancelled") == \
        "2. plain decoding · 47.0 tok/s · stopped"
    assert version_line(3, {"n_tokens": 9, "tokens_per_s": 20.0, "stop_reason": "max_tokens"}, model) == \
        "3. draft model · 20.0 tok/s · cut off"
    assert version_line(4, None, None, "interrupted") == "4. a reply · no statistics · incomplete"


def test_made_with_names_the_models_or_the_server_and_the_sampling():
    sampled = {"temperature": 0.7, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "seed": None}
    assert made_with({"target": "t.gguf", "draft": None, "sampling": sampled, "max_tokens": 1024}) == (
        "Target: t.gguf\nDraft: none\nSampling: temperature 0.7, top-k 40, top-p 0.95, min-p 0.05, random seed\n"
        "Max tokens: 1024")
    assert made_with({"server": "http://127.0.0.1:8080", "target": "qwen", "sampling": dict(sampled, seed=7)}) == (
        "Server: http://127.0.0.1:8080 (qwen)\nSampling: temperature 0.7, top-k 40, top-p 0.95, min-p 0.05, seed 7")
    assert made_with(None) == made_with({"spec": {}}) == ""


def test_footer_of_a_plain_reply():
    s = _stats(n_drafted=0, n_accepted=0, mean_drafted=None, acceptance_rate=None, tokens_per_s=14.1)
    assert footer_text(s.to_json(), _settings(drafter="none")) == "plain decoding · 14.1 tok/s"
    assert footer_text(s.to_json(), _settings(enabled=False)) == "plain decoding · 14.1 tok/s"
    assert footer_forms(s.to_json(), _settings(drafter="none")) == ["plain decoding · 14.1 tok/s", "14.1 tok/s"]


def test_footer_of_a_reply_on_fewer_threads_says_so_while_it_fits():
    """(A reply slowed by other work looked like any other in the chat: a new user's try.)"""
    s = _stats(n_drafted=0, n_accepted=0, mean_drafted=None, acceptance_rate=None, tokens_per_s=20.4,
               threads=1, threads_most=2, others_cpus=1.0)
    speed = rate_text(20.4, rates_finer(s))            # (as the panel shows it: 20.40 where it needs the digit)
    assert footer_forms(s.to_json(), _settings(drafter="none")) == [
        f"plain decoding · {speed} on 1 thread of 2", f"plain decoding · {speed}", speed]
    drafted = _stats(threads=1, threads_most=2, threads_mixed=True)
    forms = footer_forms(drafted.to_json(), _settings())
    assert forms[0] == "draft model · γ 4 · 46/76 drafted kept · 13.3 tok/s on 1 thread of 2 for part of it · 1.53× plain (measured)"
    assert " thread" in forms[1] and not any(" thread" in f for f in forms[2:])


def test_footer_of_a_prompt_lookup_reply():
    s = _stats(n_drafted=20, n_accepted=15)
    text = footer_text(s.to_json(), _settings(drafter="lookup", draft_max=6))
    assert text.startswith("prompt lookup · γ 6 · 15/20 drafted kept · 13.3 tok/s · ")
    assert text.endswith("× plain (measured)")


def test_footer_in_auto_mode_gives_the_rounds_that_drafted_and_their_mean_gamma():
    s = _stats(mean_drafted=3.24, n_rounds=50, n_plain_rounds=30)
    text = footer_text(s.to_json(), _settings(drafter="model", draft_max=8, auto=True))
    assert text.startswith("auto · drafted in 20 of 50 rounds, γ ≈ 3.2 · 46/76 drafted kept · ")
    assert "γ 8" not in text
    assert footer_text(s.to_json(), _settings(drafter="lookup", auto=True)).startswith(
        "auto, lookup only · drafted in 20 of 50 rounds, γ ≈ 3.2")
    # narrower, the rounds go first and "(measured)" next (both went at once)
    forms = footer_forms(s.to_json(), _settings(drafter="lookup", auto=True))
    assert forms[1] == forms[2] + " (measured)" == "auto, lookup only · 46/76 drafted kept · 13.3 tok/s · 1.41× plain (measured)"


def test_footer_names_the_settings_a_reply_ended_with_where_they_changed_while_it_ran():
    """"draft model · γ 2" stood under a reply that auto wrote with copies, the user having chosen Auto
    while the draft model read the prompt (a new user's try); ChatSession keeps the settings it ended
    with as "spec_end"."""
    s = _stats(mean_drafted=3.24, n_rounds=50, n_plain_rounds=30)
    switched = {**_settings(drafter="model", draft_max=2), "spec_end": asdict(SpecSettings(drafter="model", auto=True))}
    assert footer_text(s.to_json(), switched).startswith(
        "draft model, then auto · drafted in 20 of 50 rounds, γ ≈ 3.2 · 46/76 drafted kept · ")
    longer = {**_settings(drafter="model", draft_max=4), "spec_end": asdict(SpecSettings(drafter="model", draft_max=8))}
    assert footer_text(s.to_json(), longer).startswith("draft model, γ 4, then 8 · drafted in 20 of 50 rounds, γ ≈ 3.2")
    looked = {**_settings(drafter="model", draft_max=4), "spec_end": asdict(SpecSettings(drafter="lookup", draft_max=8))}
    assert version_line(1, s.to_json(), looked).startswith("1. draft model, then prompt lookup · ")
    assert footer_text(s.to_json(), _settings(drafter="model", draft_max=4)).startswith("draft model · γ 4 · ")


def test_footer_of_a_reply_that_drafted_in_no_round_says_so_and_no_gamma():
    s = _stats(n_drafted=0, n_accepted=0, mean_drafted=None, acceptance_rate=None, n_rounds=5, n_plain_rounds=5)
    text = footer_text(s.to_json(), _settings(drafter="model", auto=True))
    assert text.startswith("auto · drafted in none of 5 rounds · 13.3 tok/s · ")
    assert "γ" not in text and "kept" not in text
    assert footer_text(s.to_json(), _settings(drafter="lookup", draft_max=4)).startswith(
        "prompt lookup · drafted in none of 5 rounds · 13.3 tok/s")
    one = _stats(n_drafted=0, n_accepted=0, mean_drafted=None, acceptance_rate=None, n_tokens=0, n_rounds=1,
                 n_plain_rounds=1, tokens_per_s=0.0)            # its first token ended it
    assert footer_text(one.to_json(), _settings(auto=True)) == "auto · nothing was written"
    none = _stats(n_drafted=0, n_accepted=0, mean_drafted=None, acceptance_rate=None, n_tokens=0, n_rounds=0,
                  n_plain_rounds=0, tokens_per_s=0.0)           # stopped before its first round
    assert footer_text(none.to_json(), _settings(auto=True), "cancelled") == "auto · nothing was written"
    assert footer_text(none.to_json(), _settings(drafter="none"), "cancelled") == "plain decoding · nothing was written"


def test_a_reply_cut_off_says_why_beside_its_name():
    assert reply_note("done", _stats(stop_reason="max_tokens").to_json()) == (
        "cut off: the reply reached Max tokens (Settings)")
    assert reply_note("done", _stats(stop_reason="context_full")) == "cut off: the conversation filled the context"
    assert reply_note("done", _stats(stop_reason="eos")) == "" and reply_note("done", None) == ""
    assert reply_note("done", _stats(stop_reason="stop_string")) == ""
    assert reply_note("cancelled", _stats(stop_reason="cancelled")) == "stopped"
    # a llama-server says "length" for its context filling up as for max tokens: the note names neither alone
    assert reply_note("done", _stats(stop_reason="max_tokens", remote="llama-server")) == (
        "cut off: the server stopped it at a length limit (Max tokens, or its context)")
    # ... and at the footer's end, in sight under a long reply (it seemed to end mid-word: a user's try)
    forms = footer_forms(_stats(stop_reason="max_tokens").to_json(), _settings())
    assert all(f.endswith(" · cut off at Max tokens") for f in forms) and len(forms) > 2
    assert footer_text(_stats(stop_reason="context_full"), _settings()).endswith(" · cut off: context full")
    assert "cut off" not in footer_text(_stats(stop_reason="eos"), _settings())
    # a reply stopped with Esc says so there too (its name said "stopped", off screen under a long reply)
    stopped = footer_forms(_stats(stop_reason="cancelled").to_json(), _settings(), "cancelled")
    assert all(f.endswith(" · stopped") for f in stopped) and len(stopped) > 2


def test_footer_of_a_reply_without_stats_says_why():
    assert "stopped" in footer_text(None, _settings(), "cancelled")
    assert "no statistics" in footer_text(None, _settings(), "cancelled")
    assert "interrupted" in footer_text(None, _settings(), "interrupted")
    assert "failed" in footer_text(None, None, "error")
    assert footer_text(None, _settings(), "streaming") == ""
    # a reply stopped by the user still has its stats: they are what the footer tells
    assert footer_text(_stats().to_json(), _settings(), "cancelled").startswith("draft model · γ 4 · 46/76")


def test_footer_of_old_stats_without_the_newer_fields():
    old = {"n_tokens": 40, "tokens_per_s": 12.04, "n_drafted": 30, "n_accepted": 21, "acceptance_rate": 0.7,
           "a_field_from_elsewhere": 3, "ttft_s": "soon"}
    s = GenerationStats.from_json(old)
    assert (s.n_tokens, s.n_drafted, s.n_accepted, s.ttft_s, s.measured_speedup) == (40, 30, 21, 0.0, None)
    assert footer_text(old, _settings(draft_max=4)) == "draft model · γ 4 · 21/30 drafted kept · 12.0 tok/s"
    # no settings stored either: what the numbers show
    assert footer_text(old, None) == "speculative decoding · 21/30 drafted kept · 12.0 tok/s"
    assert footer_text({"n_tokens": 5, "tokens_per_s": 9.0}, None) == "plain decoding · 9.00 tok/s"
    # the current format reads back whole
    s = _stats()
    assert GenerationStats.from_json(s.to_json()) == s


def test_align_keeps_the_text_whole_when_a_character_is_split_across_tokens():
    def o(text):
        return TokenOrigin(text, TokenKind.PLAIN, 0, "none", 1, 0, 0)
    tokens = [o("Hi "), o("\ufffd"), o("\ufffd"), o(" there"), o("!")]
    spans, rest = align(tokens, "Hi 🐉 there! (end)")
    assert "".join(t for t, _ in spans) + rest == "Hi 🐉 there! (end)"
    assert [t for t, _ in spans] == ["Hi ", "🐉", "", " there", "!"] and rest == " (end)"


def test_highlighted_tokens_colour_the_rendered_markdown(qtbot):
    """Highlighting shows the finished reply as Markdown (no fences or "**"), each token's colour on its
    own characters: a fenced block, bold, one-character inline code, a line break inside a paragraph
    and a character outside the BMP. While it streams, its tokens are shown as written."""
    kinds = [TokenKind.PLAIN, TokenKind.ACCEPTED, TokenKind.CORRECTION, TokenKind.BONUS]
    pieces = ["Use", " **", "sum", "**", " 🐉", " here", "\n", "now", ":\n\n", "```", "python", "\n",
              "total", " =", " sum", "(xs", ")\n", "```", "\n\n", "Set", " `", "n", "`", " to", " `", "1", "`", "."]
    origins = [TokenOrigin(p, kinds[i % 4], i, "lookup", 1, 0, 2) for i, p in enumerate(pieces)]
    text = "".join(pieces)
    view = ChatView()
    qtbot.addWidget(view)
    view.set_highlight_origins(True)
    w = view.add_message("assistant", "")
    w.stream(text[:9], origins[:2])
    w.stream(text, origins)
    assert w.body.toPlainText() == text                  # streaming: as written, appended
    w.set_text(text)                                     # the reply's end (ChatView.end_reply)
    body = w.body
    assert body.toPlainText() == _rendered(text) == "Use sum 🐉 here\nnow:\ntotal = sum(xs)\nSet n to 1."
    _assert_origins_shown(body, origins)
    shown = _shown_tokens(body)
    assert {n for n, (_, _, t) in shown.items() if t.strip()} == \
        {i for i, p in enumerate(pieces) if p.strip() and p.strip() not in ("**", "```", "python", "`")}
    assert code_language(body.document().findBlock(shown[12][1])) == "python"     # "total" is code
    after = shown[5][1]                                   # " here", after the 2-unit dragon
    assert body.tooltip_at_position(after + 1) == origins[5].tooltip
    assert shown[4][2].strip() == "🐉" and shown[4][1] + 3 == after    # (" 🐉": three UTF-16 units)


# -- code blocks

def test_your_message_shows_as_typed(qtbot):
    """A message with pasted code keeps its lines and indentation (Markdown would join the lines)."""
    view = ChatView()
    qtbot.addWidget(view)
    typed = "Rename x to total in:\nx = 0\nfor i in range(5):\n    x += i\nprint(x)  # *not* emphasis"
    w = view.add_message("user", typed)
    assert w.body.toPlainText() == typed
    assert view.add_message("assistant", "a\nb *c*").body.toPlainText() == "a\nb c"   # a reply: Markdown


def test_a_cut_off_reply_s_note_never_makes_the_chat_scroll_sideways(qtbot):
    """"cut off: the reply reached Max tokens (Settings)" beside the reply's name asked for 490 px, and
    a narrower chat scrolled sideways, its replies cut at the edge (a user's try at 1000×700). The
    note ends in "…" instead, whole in its tooltip."""
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(600, 400)
    view.show()
    stats = GenerationStats(n_tokens=40, stop_reason="max_tokens").to_json()
    w = view.add_message("assistant", "Hello there", status="done", stats=stats)
    note = "cut off: the reply reached Max tokens (Settings)"
    assert w.status.text() == w.status.toolTip() == note
    seen = []                                     # narrower: its short form first ("…Max tokens (Setti…" at
    for width in range(600, 150, -10):            # 1000×700, a user's try), then "…"
        view.resize(width, 400)
        QApplication.processEvents()
        if not seen or seen[-1] != QLabel.text(w.status):
            seen.append(QLabel.text(w.status))
    assert seen[:3] == [note, "cut off at Max tokens", "cut off at Max toke…"], seen
    view.resize(320, 400)
    QApplication.processEvents()
    assert view.horizontalScrollBar().maximum() == 0 and view.widget().minimumSizeHint().width() < 320


def test_a_narrow_chat_drops_the_footers_details_before_its_speed_and_times_plain(qtbot):
    """At the default window size an auto reply's footer was cut to "1.01× plain (measur…", and at
    1000×700 to "10.6 to…": the speed and the × plain figure, the footer's point, went first. A
    narrower chat now drops the rounds that drafted, "(measured)", γ, the kept count and the drafter,
    in that order; the whole line stays in the tooltip. In auto, γ goes with the rounds: "γ ≈ 13.9" left
    alone read as 13.9 tokens drafted every round, where 12 of 168 rounds drafted (a user's try)."""
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(900, 400)
    view.show()
    stats = _stats(mean_drafted=13.9, n_rounds=168, n_plain_rounds=156, n_tokens=252, tokens_per_s=7.47)
    w = view.add_message("assistant", "Hello there", status="done", stats=stats.to_json(),
                         settings=_settings(drafter="model", auto=True))
    whole = "auto · drafted in 12 of 168 rounds, γ ≈ 13.9 · 46/76 drafted kept · 7.47 tok/s · "
    assert w.footer.text().startswith(whole) and w.footer.text().endswith("× plain (measured)")
    times = w.footer.text().split(" · ")[-1].removesuffix(" (measured)")
    seen = []
    for width in range(900, 160, -10):
        view.resize(width, 400)
        QApplication.processEvents()
        shown = QPushButton.text(w.footer)
        if not seen or seen[-1] != shown:
            seen.append(shown)
    assert seen[:4] == [w.footer.text(), f"auto · 46/76 drafted kept · 7.47 tok/s · {times} (measured)",
                        f"auto · 46/76 drafted kept · 7.47 tok/s · {times}", f"auto · 7.47 tok/s · {times}"]
    assert f"7.47 tok/s · {times}" in seen                     # then "…" only once that no longer fits
    assert all(times in t for t in seen[:seen.index(f"7.47 tok/s · {times}") + 1])
    assert w.footer.toolTip().startswith(w.footer.text())
    # what wrote it: replies of two pairs looked alike, and their stored settings were shown nowhere
    assert "\n\nTarget: t.gguf\nDraft: d.gguf\nSampling: greedy (temperature 0)\nMax tokens: 48\n\nNo rounds" \
        in w.footer.toolTip()
    view.resize(320, 400)
    QApplication.processEvents()
    assert view.horizontalScrollBar().maximum() == 0


def test_copy_puts_the_message_on_the_clipboard_and_says_so_for_a_moment(qtbot, monkeypatch):
    """A message's Copy gave no sign that it had copied anything (a new user's try): it reads "Copied"
    for COPIED_MS, whole, and takes no more room than it had."""
    from desktop_app.ui import chat_view

    monkeypatch.setattr(chat_view, "COPIED_MS", 200)
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(600, 400)
    view.show()
    w = view.add_message("assistant", "Hello there\n\nsecond line", status="done")
    QApplication.processEvents()
    before = w.copy_button.width()
    hints = []
    for text in ("Copy", "Copied"):
        b = QPushButton(text)
        b.setFlat(True)
        hints.append(b.sizeHint().width())
    assert before == max(hints)                  # no wider than it needs to read "Copied" whole
    QApplication.clipboard().clear()
    qtbot.mouseClick(w.copy_button, Qt.MouseButton.LeftButton)
    QApplication.processEvents()
    assert QApplication.clipboard().text() == "Hello there\n\nsecond line"
    assert w.copy_button.text() == "Copied" and w.copy_button.width() == before
    assert w.copy_button.fontMetrics().horizontalAdvance("Copied") < w.copy_button.contentsRect().width()
    qtbot.waitUntil(lambda: w.copy_button.text() == "Copy", timeout=5000)


def test_a_streaming_reply_is_rendered_less_often_as_rendering_it_costs_more(qtbot, monkeypatch):
    """Each render lays out the whole reply again, on the cores llama.cpp runs on: the next render waits
    RENDER_DUTY times as long as the last took, from REPAINT_MS to REPAINT_MAX_MS, so a long reply is
    not laid out again at every token; the text shown is always the whole text so far."""
    from desktop_app.ui import chat_view

    view = ChatView()
    qtbot.addWidget(view)
    view.show()
    w = view.begin_reply()
    # until its first text the reply's prompt is read (on a busy CPU "writing…" over an empty reply for
    # a minute read as stuck, a new user's try), then it is written
    assert w.status.text() == "reading the prompt…"
    cost = {"s": 0.0}
    now = {"t": 0.0}

    def clock():                                     # every render "takes" cost["s"]
        now["t"] += cost["s"]
        return now["t"]

    monkeypatch.setattr(chat_view, "_clock", clock)
    intervals = []
    for render_s in (0.0005, 0.020, 0.030, 0.200):
        cost["s"] = render_s
        view.append_text(f"word{len(intervals)} ")
        view._flush()
        intervals.append(view._timer.interval())
    assert intervals == [ChatView.REPAINT_MS, int(ChatView.RENDER_DUTY * 20), int(ChatView.RENDER_DUTY * 30),
                         ChatView.REPAINT_MAX_MS]
    assert w.status.text() == "writing…"
    assert ChatView.REPAINT_MS < ChatView.RENDER_DUTY * 20 < ChatView.RENDER_DUTY * 30 < ChatView.REPAINT_MAX_MS
    assert w.text == "word0 word1 word2 word3 " and view._timer.isActive()
    view.append_text("end")                          # the reply's end renders what is left at once
    view.end_reply("word0 word1 word2 word3 end", "done", 1, False)
    assert w.text == "word0 word1 word2 word3 end"
    assert view.begin_reply() is not w and view._timer.interval() == ChatView.REPAINT_MS   # a new reply starts fast


def test_a_reply_shown_again_mid_way_says_it_is_writing(qtbot):
    """Back from another conversation, the reply being written is shown again with its text so far
    (MainWindow.open_conversation): it said "reading the prompt…" over 263 tokens (a new user's try)."""
    view = ChatView()
    qtbot.addWidget(view)
    view.show()
    for highlight in (False, True):                  # (highlighted, a reply's text is set the same way)
        view.set_highlight_origins(highlight)
        w = view.begin_reply()
        assert w.status.text() == "reading the prompt…"
        w.set_text("The answer so far")
        assert w.status.text() == "writing…"
        view.end_reply("The answer so far.", "done", None, False)


def test_a_reply_s_lines_and_indentation_show_as_written(qtbot):
    """Code a model wrote without a fence, a poem: each line on its own line, indented as written
    (Markdown joined them into one line: a user's try). Lists, tables, headings and indented code are
    still Markdown, and paragraphs keep the space between them."""
    view = ChatView()
    qtbot.addWidget(view)
    code = "def f(xs):\n    acc = 0\n    for x in xs:\n        acc += x\n    return acc"
    w = view.add_message("assistant", f"Renamed:\n{code}\nDone.\n\nRoses are red,\nviolets *blue*.")
    assert w.body.toPlainText() == f"Renamed:\n{code}\nDone.\nRoses are red,\nviolets blue."
    first, second = w.body.document().begin(), w.body.document().begin().next()
    assert first.text().startswith("Renamed:") and second.text().startswith("Roses")    # two paragraphs,
    assert second.blockFormat().topMargin() + first.blockFormat().bottomMargin() > 0    # apart
    assert second.text() == "Roses are red,\u2028violets blue."                # one paragraph, two lines
    markdown = ("# Title\ntext\n\n- a\n  - b\n- c\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\nPara.\n\n"
                "    indented code\n    more\n\nSetext\n---\n```\nfenced\n  kept\n```")
    doc = QTextDocument()
    doc.setMarkdown(keep_line_breaks(markdown))
    plain = QTextDocument()
    plain.setMarkdown(markdown)
    assert doc.toMarkdown() == plain.toMarkdown()                   # nothing here changes
    assert keep_line_breaks("a\n  b") == "a\u2028\u00a0\u00a0b" and keep_line_breaks("a\n- b") == "a\n- b"
    # unfenced YAML keeps its nesting; a backslash break, CRLF and link definitions stay Markdown
    assert keep_line_breaks("k:\n  l:\n    - a") == "k:\u2028\u00a0\u00a0l:\u2028\u00a0\u00a0\u00a0\u00a0- a"
    assert keep_line_breaks("one\\\ntwo") == "one\\\ntwo" and keep_line_breaks("a\r\nb") == "a\u2028b"
    assert keep_line_breaks("[1]: https://a\n[2]: https://b") == "[1]: https://a\n[2]: https://b"
    assert keep_line_breaks("T\n===\nx\ny") == "T\n===\nx\u2028y"        # (after a setext heading too)
    # "2." cannot start a list inside a paragraph, so Markdown joined it to the line before; an HTML
    # comment line took the lines after it into its HTML block (a review)
    assert keep_line_breaks("Steps:\n2. a\n3. b") == "Steps:\u20282. a\u20283. b"
    assert keep_line_breaks("<!-- n -->\none\ntwo") == "<!-- n -->\none\u2028two"
    assert keep_line_breaks("Intro\n<b>Note:</b> this\nand this") == "Intro\u2028<b>Note:</b> this\u2028and this"
    # unfenced SQL lost both "*" of its count(*) to an emphasis that set the lines between in italics (a
    # user's try); a "*" beside a word on one side only is emphasis still, and code spans are left alone
    sql = "select\n  count(*)\nfrom t\nwhere n = 2*3*4\norder by\n  count(*) desc"
    doc.setMarkdown(keep_line_breaks(sql))
    assert doc.toPlainText().replace("\u2028", "\n") == sql        # (toPlainText shows no-break spaces as spaces)
    def italic(document):                                  # the text set in italics
        out, block = "", document.begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                out += it.fragment().text() if it.fragment().charFormat().fontItalic() else ""
                it += 1
            block = block.next()
        return out
    assert italic(doc) == ""
    doc.setMarkdown(keep_line_breaks("Roses *are* red,\n(*violets*) `a*b*c` x*y"))
    assert doc.toPlainText().replace("\u2028", "\n") == "Roses are red,\n(violets) a*b*c x*y"
    assert italic(doc) == "areviolets"
    # ... and so in a list item, a quote, a table row (the same reply written as a list), never in code
    for text, shown in (("- `n`: count(*) and count(*)\n- *all*", "n: count(*) and count(*)\nall"),
                        ("> count(*) or count(*)", "count(*) or count(*)"),
                        ("| a | b |\n|---|---|\n| count(*) | count(*) |", "a b count(*) count(*)"),
                        ("- a\n\n        x*y*z\n\n```\np*q*r\n```", "a x*y*z p*q*r"),
                        # code in a quote or a list item, fenced after its markers or indented past them (a
                        # review found its "*" escaped), autolinks and HTML tags keep their "*" too
                        ("> ```\n> SELECT count(*), count(*)\n> ```", "SELECT count(*), count(*)"),
                        ("- ```sql\n  SELECT count(*), count(*)\n  ```\n- a*b and c*d", "SELECT count(*), count(*) a*b and c*d"),
                        (">     a*b*c", "a*b*c")):
        doc.setMarkdown(keep_line_breaks(text))                 # (word by word: Qt lays a table out in lines)
        assert doc.toPlainText().split() == shown.split() and italic(doc) == ("all" if "*all*" in text else ""), text
    for text in ("- <http://e.com/a*b*c> and x*y", '> <img src="a*b*c.png"> x*y', "see <http://e.com/a*b*c> x*y"):
        assert "a*b*c" in keep_line_breaks(text) and "x\\*y" in keep_line_breaks(text), text
    for text, shown in (("Steps:\n2. a\n3. b", "Steps:\n2. a\n3. b"), ("<!-- n -->\none\ntwo", "one\ntwo"),
                        ("Steps:\n0. a", "Steps:\n0. a"), ("Intro\n<b>Note:</b> this", "Intro\nNote: this")):
        doc.setMarkdown(keep_line_breaks(text))
        assert doc.toPlainText().replace("\u2028", "\n") == shown


def test_a_long_code_line_wraps_on_its_shade_and_never_scrolls_the_reply_sideways(qtbot):
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(500, 400)
    view.show()
    long = " + ".join(["value"] * 60)
    w = view.add_message("assistant", f"Here:\n\n```python\ntotal = {long}\nif total:\n    total = {long}\n```\nAfter.")
    for _ in range(5):
        QApplication.processEvents()
    body = w.body
    assert body.horizontalScrollBar().maximum() == 0 and body.width() <= 500
    block = body.document().begin()
    while code_language(block) != "python":
        block = block.next()
    assert block.layout().lineCount() > 1                      # wrapped, still one line of code
    assert block.blockFormat().background().color().name() == CODE_SHADE[False]
    # a wrapped line goes on past its own indentation (it went on at column 0, a new user's try), its
    # first line where it was, its spaces kept in the text
    indented = block.next().next()
    assert indented.text().startswith("    total = ") and indented.layout().lineCount() > 1
    space = QFontMetricsF(indented.begin().fragment().charFormat().font()).horizontalAdvance(" ")

    def x(b, line, column=0):                                  # where a line of a block starts, in the view
        return b.layout().position().x() + b.layout().lineAt(line).cursorToX(b.layout().lineAt(line).textStart() + column)[0]
    assert x(block, 0) == pytest.approx(x(block.next(), 0))                 # unwrapped lines start alike
    assert x(indented, 0, 4) == pytest.approx(x(block, 0) + 4 * space, abs=1)   # "total" under its indent
    assert x(block, 1) == pytest.approx(x(block, 0) + 4 * space, abs=1)         # wrapped: 4 spaces in
    assert x(indented, 1) == pytest.approx(x(block, 0) + 8 * space, abs=1)      # ... past its indentation
    assert body.document().toPlainText().count("\n    total = ") == 1
    assert indented.blockFormat().bottomMargin() >= 8 and indented.next().text() == "After."


def test_a_fenced_python_block_gets_several_colours(qtbot):
    view = ChatView()
    qtbot.addWidget(view)
    code = "def add(a, b):\n    \"\"\"Sum.\"\"\"\n    return a + b  # done"
    w = view.add_message("assistant", f"Here:\n\n```python\n{code}\n```\n\nAnd unlabelled:\n\n```\nimport os\nprint(os.sep)\n```\n\nThe end.")
    doc = w.body.document()
    code_blocks, prose_formats = [], []
    block = doc.begin()
    while block.isValid():
        (code_blocks if code_language(block) is not None else prose_formats).append(block)
        block = block.next()
    python = [b for b in code_blocks if code_language(b) == "python"]
    assert [b.text() for b in python] == code.split("\n")
    colours = {r.format.foreground().color().name() for b in python for r in b.layout().formats()}
    assert len(colours) > 1
    first = python[0].layout().formats()
    assert any(python[0].text()[r.start:r.start + r.length] == "def" for r in first)
    guessed = [b for b in code_blocks if code_language(b) == ""]
    assert guessed and any(b.layout().formats() for b in guessed)           # guessed as Python
    assert all(not b.layout().formats() for b in prose_formats)               # prose is left alone


# -- the window, on the real pair

def _window(qtbot, tmp_path) -> MainWindow:
    w = MainWindow(str(tmp_path / "history.db"), str(tmp_path / "settings.json"))
    qtbot.addWidget(w)
    w.show()
    return w


def _wait_idle(qtbot, w):
    qtbot.waitUntil(lambda: w.generating_id is None and not w.busy, timeout=TIMEOUT_MS)


def _stored(w, cid):
    store = HistoryStore(w.store.path)
    try:
        return store.messages(cid)
    finally:
        store.close()


def _shown_tokens(body) -> dict[int, tuple[str, int, str]]:
    """The highlighted tokens as the document holds them: token number -> (kind, where its first
    character is, the characters shown for it in order)."""
    seen: dict[int, tuple[str, int, str]] = {}
    block = body.document().begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            fmt = fragment.charFormat()
            if fmt.hasProperty(KIND_PROPERTY):
                n = fmt.intProperty(TOKEN_PROPERTY)
                kind, at, text = seen.get(n, (fmt.stringProperty(KIND_PROPERTY), fragment.position(), ""))
                seen[n] = (kind, at, text + fragment.text())
            it += 1
        block = block.next()
    return seen


def _shown_kinds(body) -> Counter:
    """Kinds of the highlighted tokens as the document holds them."""
    return Counter(kind for kind, _, _ in _shown_tokens(body).values())


def _rendered(markdown: str) -> str:
    doc = QTextDocument()
    doc.setMarkdown(keep_line_breaks(markdown))
    return doc.toPlainText()


def _assert_origins_shown(body, origins: list[TokenOrigin]) -> None:
    """The reply's Markdown, rendered, with each token's colour on characters of that token alone (in
    order: what the Markdown hides, a fence or "**", is skipped), and every character shown that is
    not white space coloured by some token."""
    shown = _shown_tokens(body)
    for n, (kind, _, text) in shown.items():
        assert kind == origins[n].kind.value
        rest = iter(origins[n].text)
        assert all(ch.isspace() or ch in rest for ch in text), (text, origins[n].text)
    coloured = sum(len("".join(text.split())) for _, _, text in shown.values())
    assert coloured == len("".join(body.document().toPlainText().split()))


def _hover(body, position: int) -> str:
    """Hover over the character at `position` the way a user does; the tooltip Qt then shows."""
    cursor = QTextCursor(body.document())
    cursor.setPosition(position)
    rect = body.cursorRect(cursor)
    point = QPoint(rect.x() + 2, rect.center().y())
    assert body.tooltip_at(point) == body.tooltip_at_position(position)
    QApplication.sendEvent(body.viewport(), QHelpEvent(QEvent.ToolTip, point, body.viewport().mapToGlobal(point)))
    return QToolTip.text()


def _reference_counts(rounds: list[dict]) -> Counter:
    """The reply's token kinds from its stored rounds, counted here without the view's code: every emitted
    token of every round, less the end-of-generation token of a round cut at "eos"."""
    counts = Counter()
    for i, r in enumerate(rounds):
        event = RoundEvent.from_record(i, r)
        kinds = event.kinds[:-1] if event.end == "eos" else event.kinds
        counts.update(k.value for k in kinds)
    return counts


@pytest.mark.network
def test_reply_footer_origins_and_tooltips_live_and_after_a_restart(qtbot, tmp_path, test_model_path, q2k_draft_path):
    w = _window(qtbot, tmp_path)
    w.load_pair(test_model_path, q2k_draft_path)
    qtbot.waitUntil(lambda: w.loaded is not None and not w.busy, timeout=TIMEOUT_MS)
    p = w.settings_panel
    p.temperature.setValue(0.0)
    p.max_tokens.setValue(48)
    w.spec_bar.set_generation({"speculation": True, "drafter": "model", "draft_max": 4, "auto": False})
    assert not w.highlight_action.isChecked()
    w.highlight_action.trigger()                        # View ▸ Highlight token origins
    assert w.chat.highlight_origins

    tokens, events = [], []
    w.worker.token.connect(tokens.append)               # runs on the worker thread; a list append is safe
    w.worker.token.connect(events.append)
    w.worker.round.connect(events.append)
    w.composer.setPlainText("Write a Python function that adds two numbers.")
    qtbot.keyClick(w.composer, Qt.Key_Return)
    _wait_idle(qtbot, w)
    cid = w.current_id
    db = _stored(w, cid)[-1]
    reply = w.chat.messages[-1]
    assert reply.role == "assistant" and db.role == "assistant" and db.complete
    stats = GenerationStats.from_json(db.stats)
    assert stats.n_tokens == len(tokens) > 5 and stats.n_drafted > 0

    # the footer: the final stats, formatted
    footer = reply.footer_text
    assert footer == footer_text(db.stats, db.settings)
    assert footer.startswith("draft model · γ 4 · ")
    assert f"{stats.n_accepted}/{stats.n_drafted} drafted kept" in footer
    assert rate_text(stats.tokens_per_s, rates_finer(stats)) in footer   # (as the panel shows it)
    assert stats.measured_speedup is not None
    assert f"{stats.measured_speedup:.2f}× plain (measured)" in footer

    # the origins: one per TokenEvent, of its kind, and the same as the stored rounds tell
    event_counts = Counter(t.kind.value for t in tokens)
    assert Counter(kind_counts(reply.origins)) == event_counts
    assert _reference_counts(db.rounds) == event_counts
    assert Counter(kind_counts(origins_from_rounds(db.rounds, stats.n_tokens))) == event_counts
    # shown as Markdown, each token's characters in its colour
    assert reply.text == db.content and reply.body.document().toPlainText() == _rendered(db.content)
    _assert_origins_shown(reply.body, reply.origins)

    # a tooltip names the token's round
    shown = _shown_tokens(reply.body)
    kept = [n for n, (kind, _, text) in sorted(shown.items()) if kind == TokenKind.ACCEPTED.value and text.strip()]
    assert kept
    o = reply.origins[kept[0]]
    position = shown[kept[0]][1] + len(shown[kept[0]][2]) - len(shown[kept[0]][2].lstrip())
    tip = _hover(reply.body, position)
    assert tip == f"round {o.round + 1} · draft model · kept draft {o.position}/{o.gamma}"
    rounds = [RoundEvent.from_record(i, r) for i, r in enumerate(db.rounds)]
    assert rounds[o.round].kinds[o.position - 1] == TokenKind.ACCEPTED

    # the same events streamed into a view token by token: each repaint appends the new tokens, coloured
    view = ChatView()
    qtbot.addWidget(view)
    view.set_highlight_origins(True)
    live = view.begin_reply()
    so_far = ""
    for event in events:
        if isinstance(event, RoundEvent):
            view.record_round(event)
            continue
        view.record_token(event)
        view.append_text(event.text)
        so_far += event.text
        view._flush()                                   # (what the repaint timer does)
        assert live.body.document().toPlainText() == so_far     # (as written: rendered at the end)
    assert _shown_kinds(live.body) == Counter(t.kind.value for t in tokens if t.text.replace("\n", ""))
    view.end_reply(db.content, "done", db.id, True, stats, db.settings)
    assert live.footer_text == footer and live.body.document().toPlainText() == _rendered(db.content)
    assert _shown_tokens(live.body) == _shown_tokens(reply.body)
    assert live.body.tooltip_at_position(position) == tip

    # clicking the footer shows this reply's rounds in the panel
    w.spec_panel.clear()
    w.tabs.setCurrentIndex(1)
    qtbot.mouseClick(reply.footer, Qt.LeftButton)
    assert w.tabs.currentWidget() is w.spec_scroll
    strip = w.spec_panel.strip
    assert strip.round_model.rowCount() == len(db.rounds) and strip.label(0).startswith("#1 ")

    # Markdown again when highlighting is off
    w.highlight_action.trigger()
    assert not reply.highlight and reply.body.markdown == db.content and not _shown_kinds(reply.body)
    w.highlight_action.trigger()
    w.close()

    # a new window on the same files: the same footer, the origins from the stored rounds, the toggle kept
    w2 = _window(qtbot, tmp_path)
    try:
        assert w2.highlight_action.isChecked() and w2.chat.highlight_origins
        assert w2.stack.currentWidget() is w2.first_run           # no model loaded: the welcome page, until
        item = next(w2.sidebar.list.item(i) for i in range(w2.sidebar.list.count())   # the conversation is
                    if w2.sidebar.list.item(i).data(Qt.UserRole) == cid)             # chosen: it can be read
        w2.sidebar.list.setCurrentItem(item)
        for _ in range(5):
            QApplication.processEvents()
        assert w2.stack.currentWidget() is w2.chat and w2.current_id == cid
        w2.refresh_models()                                        # (as adding a models folder does)
        assert w2.stack.currentWidget() is w2.chat                 # it stays open
        w2.stack.setCurrentWidget(w2.first_run)
        w2.sidebar.list.itemClicked.emit(item)                     # a click on the one open brings it back
        assert w2.stack.currentWidget() is w2.chat and w2.current_id == cid
        again = w2.chat.messages[-1]
        assert again.footer_text == footer
        assert Counter(kind_counts(again.origins)) == event_counts
        assert again.body.document().toPlainText() == _rendered(db.content)
        assert _shown_tokens(again.body) == _shown_tokens(reply.body)
        assert _hover(again.body, position) == tip
    finally:
        w2.close()
