"""The window's layout at 1000×700 (names whole, no squeezed button, room for the chat), the foldable
conversations and panel, the first-run page offering what is cached, and the pair's verdict from the
GGUF headers before Load (pytest-qt, offscreen, on the real test models)."""
from __future__ import annotations

import json
import os
import shutil

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QAbstractButton, QApplication, QLabel, QStyle, QStyleOptionComboBox

from desktop_app import models
from desktop_app.engine.events import GenerationStats
from desktop_app.ui.main_window import CENTER, PANEL, SIDEBAR, MainWindow
from desktop_app.ui.window_layout import MIN_CHAT_WIDTH

TIMEOUT_MS = 120_000
SMALL = (1000, 700)
REPLY = GenerationStats(                                # a reply that drafted a little: a long sentence
    n_tokens=56, n_rounds=56, n_plain_rounds=55, tokens_per_s=100.0, t_target_step_s=0.008, t_draft_s=0.0,
    t_verify_s=0.5, t_plain_s=0.45, n_drafted=3, n_accepted=1, acceptance_rate=1 / 3, alpha=0.5,
    mean_accepted=1.0, mean_drafted=3.0, c=0.0, predicted_speedup=0.96, predicted_speedup_measured=0.96,
    ttft_s=0.1, verify_s_by_batch={1: 0.008, 2: 0.011, 4: 0.02, 5: 0.024, 9: 0.04, 17: 0.07})


def open_window(qtbot, tmp_path, size=SMALL, settings: dict | None = None) -> MainWindow:
    path = tmp_path / "settings.json"
    if settings is not None:
        path.write_text(json.dumps(settings))
    w = MainWindow(str(tmp_path / "history.db"), str(path))
    qtbot.addWidget(w)
    w.resize(*size)
    w.show()
    for _ in range(5):
        QApplication.processEvents()
    return w


@pytest.fixture
def close_all():
    windows = []
    yield windows
    for w in windows:
        if not w._closing:
            w.close()


def folder_settings(path: str) -> dict:
    return {"model_folders": [os.path.dirname(path)]}


def edit_field_width(combo) -> int:
    opt = QStyleOptionComboBox()
    combo.initStyleOption(opt)
    return combo.style().subControlRect(QStyle.CC_ComboBox, opt, QStyle.SC_ComboBoxEditField, combo).width()


def text_room(button) -> int:
    """The width a button's text has: the button less the style's margins (and a menu's arrow)."""
    style = button.style()
    room = button.width() - 2 * style.pixelMetric(QStyle.PM_ButtonMargin, None, button)
    if getattr(button, "menu", lambda: None)():
        room -= style.pixelMetric(QStyle.PM_MenuButtonIndicator, None, button)
    return room


def assert_bar_readable(w: MainWindow, target: str) -> None:
    bar = w.model_bar
    name = os.path.basename(target)
    assert bar.target.currentText() == name                 # the whole file name, not cut
    for combo in (bar.target, bar.draft):
        text = combo.currentText()
        fm = combo.fontMetrics()
        assert fm.horizontalAdvance(text) <= edit_field_width(combo), (text, combo.width())
        assert fm.elidedText(text, Qt.ElideRight, edit_field_width(combo)) == text
    buttons = [b for b in bar.findChildren(QAbstractButton) if b.isVisible()]
    assert "Pairs" in {b.text() for b in buttons} and {"Load", "Cancel"} & {b.text() for b in buttons}
    for b in buttons:
        assert b.fontMetrics().horizontalAdvance(b.text()) <= text_room(b), (b.text(), b.width())


def test_at_1000_by_700_names_and_buttons_are_whole_and_the_chat_has_room(qtbot, tmp_path, close_all,
                                                                         test_model_path, q2k_draft_path):
    w = open_window(qtbot, tmp_path, settings=folder_settings(test_model_path))
    close_all.append(w)
    assert (w.width(), w.height()) == SMALL                 # nothing forces the window wider or taller
    w.model_bar.select(test_model_path, q2k_draft_path)
    QApplication.processEvents()
    assert_bar_readable(w, test_model_path)
    assert w.stack.width() >= 450, w.splitter.sizes()
    # the composer is three lines high beside its buttons two by two, and grows with what is typed: stacked,
    # the buttons made it 130 px high, and the chat had 330 px here (a new user's try)
    assert w.stack.height() >= 340 and w.composer.height() <= 80, (w.stack.height(), w.composer.height())
    short = w.composer.height()
    w.composer.setPlainText("\n".join(["a line"] * 6))
    QApplication.processEvents()
    six = w.composer.height()
    assert six > short
    w.composer.setPlainText("\n".join(["a line"] * 30))          # to seven lines, then it scrolls
    QApplication.processEvents()
    seven = w.composer.height()
    assert six < seven <= 140 and w.stack.height() >= 270
    w.composer.setPlainText(" ".join(["word"] * 200))            # one paragraph, wrapped: as tall
    QApplication.processEvents()
    assert w.composer.height() == seven
    w.composer.clear()
    QApplication.processEvents()
    assert w.composer.height() == short
    assert w.sidebar.width() > 0 and w.tabs.width() > 0     # both sides show by default
    for generation in ({"auto": True}, {"auto": False, "drafter": "lookup", "draft_max": 4}):
        w.spec_bar.set_generation({"speculation": True, "drafter": "model", "draft_max": 4, **generation})
        QApplication.processEvents()
        mode = w.spec_bar.mode                              # the speculation mode: whole, or a short form whole
        shown = QLabel.text(mode)
        assert shown in (mode.text(), "auto", "prompt lookup, γ 4", "γ 4"), (shown, mode.text(), mode.width())
    w.model_bar.show_progress("Loading", 0.3)               # Cancel takes Load's place: still whole
    QApplication.processEvents()
    assert w.model_bar.cancel_button.isVisible() and not w.model_bar.load_button.isVisible()
    assert_bar_readable(w, test_model_path)
    assert w.stack.width() >= 450
    # a reply's numbers, its sentence and its charts in the panel: the panel scrolls, the window stays
    w.spec_panel.show_stats(GenerationStats(
        n_tokens=63, n_rounds=21, tokens_per_s=46.9, t_target_step_s=0.0072, t_draft_s=0.64, t_verify_s=0.69,
        n_drafted=84, n_accepted=43, acceptance_rate=0.51, alpha=0.75, mean_accepted=2.05, mean_drafted=4.0,
        c=1.15, predicted_speedup=1.9, predicted_speedup_measured=0.31, ttft_s=0.287,
        verify_s_by_batch={1: 0.0072, 5: 0.033, 17: 0.09}))
    for _ in range(5):
        QApplication.processEvents()
    assert (w.width(), w.height()) == SMALL
    # the panel asks for more height than this (its numbers, sentence, strip and charts: 629 px
    # offscreen, more with a desktop's fonts), and scrolls: it never sets the window's height
    assert w.spec_panel.minimumSizeHint().height() > w.tabs.minimumSizeHint().height() < 200
    # and the round strip keeps room for its rows (it was left three at 1000×700: the charts took the rest)
    strip = w.spec_panel.strip
    assert strip.geometry().bottom() < strip.parentWidget().height()     # whole, not clipped under the legend
    assert strip.viewport().height() >= strip.MIN_ROWS * strip.round_delegate.line_height(strip.font())


def test_a_one_line_label_shows_a_form_whole_at_every_width(qtbot):
    """A one-line label in any font: at every width one of its forms shows whole (the last cut only
    where none fits). At 121 px the speculation bar's bold "Speculation: auto" (an advance of 119,
    rounded) was cut to "Speculation: au…" where "auto" fits, during every load in a 1000-px window."""
    from PySide6.QtWidgets import QWidget

    from desktop_app.ui.elided import ElidedLabel

    bar = QWidget()
    qtbot.addWidget(bar)
    label = ElidedLabel(bar)
    label.setObjectName("mode")
    bar.show()
    forms = [("Speculation: auto", "auto"), ("Speculating: prompt lookup, γ 4", "prompt lookup, γ 4", "γ 4")]
    for px in range(9, 17):
        for weight in ("normal", "bold"):
            bar.setStyleSheet(f"#mode {{ font-size: {px}px; font-weight: {weight}; }}")
            for whole, *shorter in forms:
                label.setText(whole, *shorter)
                fits = label.fontMetrics().horizontalAdvance(shorter[-1]) + 4
                for width in range(fits, label.fontMetrics().horizontalAdvance(whole) + 12):
                    label.resize(width, 30)
                    QApplication.processEvents()
                    assert QLabel.text(label) in (whole, *shorter), (px, weight, width, QLabel.text(label))
                assert label.text() == whole


def test_does_it_pay_keeps_its_sentence_under_the_plot_in_a_short_panel(qtbot, tmp_path, close_all):
    """At 1000×700 a long "Does it pay?" sentence was laid over the plot's γ axis: the tab squeezed the
    two into less than they need, and the panel (which scrolls) did not grow (a new user's try)."""
    w = open_window(qtbot, tmp_path)
    close_all.append(w)
    w.spec_panel.show_stats(REPLY)
    pay = w.spec_panel.pay
    w.spec_panel.views.setCurrentWidget(pay)
    for _ in range(5):
        QApplication.processEvents()
    assert len(pay.sentence.text()) > 200                  # (several lines at this width)
    assert pay.sentence.geometry().top() >= pay.plot.geometry().bottom()
    assert pay.sentence.geometry().bottom() <= pay.height()
    assert (w.width(), w.height()) == SMALL


def test_at_1000_by_700_every_chart_fits_the_panel_whole(qtbot, tmp_path, close_all):
    """The charts sat side by side at 150 px each, more than a 1000-px window's panel has for two:
    the panel's page was laid out wider than its view, and the right-hand charts' last axis numbers
    were cut ("30" read "3"; a new user's try). Each chart, and the "Does it pay?" plot, ends inside
    the view."""
    w = open_window(qtbot, tmp_path)
    close_all.append(w)
    view = w.spec_scroll.viewport()
    panel = w.spec_panel
    charts = panel.charts
    panel.show_stats(REPLY)                             # (a reply's sentence: the panel scrolls, its bar takes room)
    for page, plots in ((charts, (charts.speed_plot, charts.position_plot, charts.kept_plot, charts.split_plot)),
                        (panel.pay, (panel.pay.plot,))):
        panel.views.setCurrentWidget(page)
        for _ in range(5):
            QApplication.processEvents()
        for plot in plots:
            right = plot.mapTo(view, QPoint(plot.width(), 0)).x()
            inside = plot.mapTo(page, QPoint(plot.width(), 0)).x()
            assert plot.isVisible() and right <= view.width() and inside <= page.width(), (right, view.width())
    assert charts.position_plot.width() >= 100          # (still a chart: two columns of them)
    assert (w.width(), w.height()) == SMALL


def test_tab_from_the_message_box_stops_only_where_the_focus_shows(qtbot, tmp_path, close_all):
    """Tab went through the panel's scroll area and each plot (twice: a plot and its viewport took the
    focus and showed nothing): 26 stops around the window, 5 of them invisible, before the list (a new
    user's try). Now only controls, tab bars and lists, and the conversation search is the fifth."""
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QAbstractItemView, QComboBox, QLineEdit, QTabBar

    w = open_window(qtbot, tmp_path)
    close_all.append(w)
    w.activateWindow()
    w.composer.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is w.composer)
    stops = []
    for _ in range(60):
        QTest.keyClick(QApplication.focusWidget(), Qt.Key_Tab)
        if QApplication.focusWidget() is w.composer:
            break
        stops.append(QApplication.focusWidget())
    assert stops and QApplication.focusWidget() is w.composer                        # (round the window)
    shows = (QAbstractButton, QTabBar, QAbstractItemView, QLineEdit, QComboBox)
    assert [type(s).__name__ for s in stops if not isinstance(s, shows)] == []
    assert stops.index(w.sidebar.search) == 4


def test_the_chat_column_at_its_narrowest_still_shows_whole_names_and_buttons(qtbot, tmp_path, close_all,
                                                                             test_model_path, q2k_draft_path):
    w = open_window(qtbot, tmp_path, settings=folder_settings(test_model_path))
    close_all.append(w)
    w.model_bar.select(test_model_path, q2k_draft_path)
    w.splitter.moveSplitter(0, 2)              # the panel's handle dragged as far left as it goes
    QApplication.processEvents()
    assert w.splitter.sizes()[CENTER] <= w.splitter.widget(CENTER).minimumSizeHint().width() + 1
    assert w.side_shown(PANEL)
    assert_bar_readable(w, test_model_path)


def test_at_1280_by_800_the_chat_gets_the_extra_room(qtbot, tmp_path, close_all, test_model_path, q2k_draft_path):
    w = open_window(qtbot, tmp_path, size=(1280, 800), settings=folder_settings(test_model_path))
    close_all.append(w)
    w.model_bar.select(test_model_path, q2k_draft_path)
    QApplication.processEvents()
    assert_bar_readable(w, test_model_path)
    assert w.stack.width() >= 600, w.splitter.sizes()


def test_sidebar_and_panel_fold_from_the_view_menu_and_stay_folded_after_a_restart(qtbot, tmp_path, close_all):
    w = open_window(qtbot, tmp_path)
    close_all.append(w)
    view = next(a.menu() for a in w.menuBar().actions() if a.text() == "&View")
    assert {w.sidebar_action, w.panel_action} <= set(view.actions())
    assert w.sidebar_action.shortcut().toString() == "Ctrl+B"
    assert w.panel_action.shortcut().toString() == "Ctrl+Shift+B"
    assert w.sidebar_action.isChecked() and w.panel_action.isChecked()
    default = w.splitter.sizes()[SIDEBAR]
    w.splitter.moveSplitter(default + 60, 1)                # the user widens the conversations
    QApplication.processEvents()
    widened = w.splitter.sizes()[SIDEBAR]
    assert widened >= default + 40
    chat_before = w.splitter.sizes()[CENTER]
    widest = w.minimumSizeHint().width()
    w.sidebar_action.trigger()
    w.panel_action.trigger()
    QApplication.processEvents()
    assert not w.sidebar_action.isChecked() and not w.panel_action.isChecked()
    assert w.splitter.sizes()[SIDEBAR] == 0 and w.splitter.sizes()[PANEL] == 0
    assert w.splitter.sizes()[CENTER] > chat_before + 400
    # folded sides no longer hold the window wide (at size 0 alone they did: 958 px for an 800-px screen)
    assert w.sidebar.isHidden() and w.tabs.isHidden()
    assert w.minimumSizeHint().width() <= widest - w.sidebar.minimumSizeHint().width() - w.tabs.minimumWidth()
    w.close()

    again = open_window(qtbot, tmp_path)                    # the same settings file
    close_all.append(again)
    assert not again.sidebar_action.isChecked() and not again.panel_action.isChecked()
    assert not again.side_shown(SIDEBAR) and not again.side_shown(PANEL)
    assert again.sidebar.isHidden() and again.tabs.isHidden()
    again.sidebar_action.trigger()                          # unfolds, as wide as the user had it
    QApplication.processEvents()
    assert again.sidebar_action.isChecked() and again.side_shown(SIDEBAR)
    assert again.splitter.sizes()[SIDEBAR] == widened >= again.sidebar.minimumSizeHint().width()
    assert not again.side_shown(PANEL)
    again.close()

    third = open_window(qtbot, tmp_path)
    close_all.append(third)
    assert third.side_shown(SIDEBAR) and third.sidebar_action.isChecked()
    assert not third.side_shown(PANEL) and not third.panel_action.isChecked()


def test_dragging_the_handle_to_the_edge_folds_the_sidebar_and_unchecks_its_action(qtbot, tmp_path, close_all):
    w = open_window(qtbot, tmp_path)
    close_all.append(w)
    w.splitter.moveSplitter(0, 1)                           # the sidebar's handle dragged to the left edge
    QApplication.processEvents()
    assert w.splitter.sizes()[SIDEBAR] == 0
    assert not w.sidebar_action.isChecked() and w.sidebar.isHidden()
    w.sidebar_action.trigger()
    assert w.side_shown(SIDEBAR)


def demo_cache(monkeypatch, tmp_path, paths: tuple[str, str] | None):
    """The demo pair as cached and verified at `paths` (target, draft), or as not fetched (None)."""
    from desktop_app.ui import window_models as main_window   # where the window finds its models

    demo = models.resolve(["demo"])

    def inspect(m):
        if paths:
            path = paths[demo.index(m)]
            return models.CachedModel(m.key, m.filename, m.description, path, True, m.size, m.size, True)
        return models.CachedModel(m.key, m.filename, m.description, str(tmp_path / m.filename), False, 0, m.size,
                                  False)
    monkeypatch.setattr(main_window.models, "inspect", inspect)


def test_first_run_preselects_the_pair_found_and_loads_it_in_one_click(qtbot, tmp_path, close_all, monkeypatch,
                                                                       test_model_path, q2k_draft_path, gemma_path,
                                                                       qwen_draft_path, shallow_draft_path):
    from desktop_app.models import discovery

    demo_cache(monkeypatch, tmp_path, None)
    monkeypatch.setattr(discovery, "usual_folders", lambda: [])     # only the folder of the settings
    folder = tmp_path / "models"
    folder.mkdir()
    for path in (q2k_draft_path, gemma_path, test_model_path, shallow_draft_path,     # (Qwen 0.5B has no partner;
                 qwen_draft_path):                                                    # the Q2_K copy would not pay)
        (folder / os.path.basename(path)).symlink_to(path)
    target, draft = (str(folder / os.path.basename(p)) for p in (test_model_path, shallow_draft_path))
    w = open_window(qtbot, tmp_path, settings={"model_folders": [str(folder)]})
    close_all.append(w)
    assert w.loaded is None and w.stack.currentWidget() is w.first_run
    offer = w.first_run.load_button
    assert offer.isVisible() and offer.text() == "Load this pair"
    assert w.first_run.fetch_button.isVisible()                # fetching the demo stays on offer
    # the larger file of the pair is the target (Q4_1, not its Q2_K copy), the much smaller one its draft
    assert (w.model_bar.target_path(), w.model_bar.draft_path()) == (target, draft)
    assert "SmolLM2-135M-Instruct.Q4_1.gguf" in w.first_run.text.text()
    qtbot.mouseClick(offer, Qt.LeftButton)
    qtbot.waitUntil(lambda: w.loaded is not None and not w.busy, timeout=TIMEOUT_MS)
    assert (w.loaded.target, w.loaded.draft) == (target, draft)
    assert w.stack.currentWidget() is w.chat


def test_first_run_offers_the_cached_demo_pair_target_first(qtbot, tmp_path, close_all, monkeypatch,
                                                            test_model_path, q2k_draft_path):
    # the test pair stands in for the demo's files (the demo's own are 1.6 GB)
    demo_cache(monkeypatch, tmp_path, (test_model_path, q2k_draft_path))
    w = open_window(qtbot, tmp_path)
    close_all.append(w)
    offer = w.first_run.load_button
    assert offer.isVisible() and offer.text() == "Load the demo pair (cached)"
    assert not w.first_run.fetch_button.isVisible()
    assert (w.model_bar.target_path(), w.model_bar.draft_path()) == (test_model_path, q2k_draft_path)
    qtbot.mouseClick(offer, Qt.LeftButton)
    qtbot.waitUntil(lambda: w.loaded is not None and not w.busy, timeout=TIMEOUT_MS)
    assert (w.loaded.target, w.loaded.draft) == (test_model_path, q2k_draft_path)


def test_first_run_with_nothing_found_is_todays_page(qtbot, tmp_path, close_all, monkeypatch):
    from desktop_app.ui import window_models as main_window   # where the window finds its models

    monkeypatch.setattr(main_window, "find_gguf_files", lambda folders: [])
    demo_cache(monkeypatch, tmp_path, None)
    w = open_window(qtbot, tmp_path)
    close_all.append(w)
    assert not w.first_run.load_button.isVisible()
    assert w.first_run.fetch_button.isVisible() and w.first_run.fetch_button.isEnabled()
    assert w.model_bar.target_path() is None


def test_the_pair_verdict_before_load_comes_from_the_headers(qtbot, tmp_path, close_all, test_model_path,
                                                             q2k_draft_path, shallow_draft_path, gemma_path):
    w = open_window(qtbot, tmp_path, settings=folder_settings(test_model_path))
    close_all.append(w)
    bar = w.model_bar
    bar.select(test_model_path, shallow_draft_path)
    assert bar.verdict.isVisible()
    assert bar.pair_verdict.ok is True
    assert bar.verdict.text() == "Pair OK: same tokenizer (gpt2/smollm, 49,152 tokens)"
    assert "#b35900" not in bar.verdict.styleSheet()

    bar.select(test_model_path, q2k_draft_path)             # the target's own model in a smaller file: a warning
    assert bar.pair_verdict.ok is True and bar.verdict.text().startswith("These two pair: ")
    assert bar.verdict.text().endswith("a draft pays only where it is much faster than its target.")
    assert "#b35900" in bar.verdict.styleSheet()

    bar.select(test_model_path, gemma_path)
    assert bar.pair_verdict.ok is False
    assert bar.verdict.text().startswith("These two cannot pair: the draft's tokenizer is llama-spm, the target's "
                                         "gpt2 — choose a draft made for this target, or no draft to chat with the target alone")
    assert bar.load_button.isEnabled()                      # a warning: the engine's own check decides
    assert w.loaded is None                                 # nothing was loaded to tell

    bar.select(shallow_draft_path, test_model_path)         # swapped (the draft the larger): a warning, which
    assert bar.pair_verdict.ok is True and bar.verdict.text().startswith("These two pair: ")   # stays once loaded
    assert bar.verdict.text().endswith("it would be slower than the target alone; swap Target and Draft.")
    bar.set_loaded((shallow_draft_path, test_model_path))
    assert not bar.verdict.isHidden() and "#b35900" in bar.verdict.styleSheet()
    bar.set_loaded(None)

    bar.select(test_model_path, None)                       # no draft: nothing to say
    assert not bar.verdict.isVisible() and bar.pair_verdict is None

    notes = tmp_path / "notamodel.gguf"                    # a file that is no model: its own line says so, once
    notes.write_text("this is not a model")
    bar.select(str(notes), q2k_draft_path)
    assert not bar.verdict.isVisible() and bar.pair_verdict is None
    w.model_bar.backend.set_backend("server")              # and it does not come back with the file choices
    w.model_bar.backend.set_backend("local")
    assert not bar.verdict.isVisible()
    assert "cannot read: " in bar.info.text() and "not a GGUF file" in bar.info.text()
    # its box names it so from then on, and the good files as before (it stayed there unmarked)
    assert bar.target.itemText(bar.target.findData(str(notes))) == "notamodel.gguf (cannot be read)"
    assert bar.draft.itemText(bar.draft.findData(q2k_draft_path)) == os.path.basename(q2k_draft_path)
    # ... also once another is chosen and the lists are filled again (after a load: it lost its mark, a new
    # user's try)
    bar.select(q2k_draft_path, None)
    bar.set_choices([test_model_path, q2k_draft_path, str(notes)], [], False)
    assert bar.target.itemText(bar.target.findData(str(notes))) == "notamodel.gguf (cannot be read)"
    assert bar.draft.itemText(bar.draft.findData(str(notes))) == "notamodel.gguf (cannot be read)"
    assert bar.target.itemText(bar.target.findData(test_model_path)) == os.path.basename(test_model_path)
    shutil.copyfile(q2k_draft_path, notes)                 # mended (a copy that had not finished, say)
    os.utime(notes, (1, 1))                                # (a header read again: another modification time)
    bar.select(q2k_draft_path, None)
    bar.select(str(notes), None)
    assert bar.target.itemText(bar.target.findData(str(notes))) == "notamodel.gguf"
    assert "cannot read" not in bar.info.text()


def test_after_a_restart_the_cached_demo_pair_is_offered_as_cached(qtbot, tmp_path, close_all, test_model_path,
                                                                   q2k_draft_path, monkeypatch):
    """The last pair, when it is the cached demo pair, is offered as such: no offer to fetch it again."""
    from types import SimpleNamespace

    from desktop_app import models
    demo = {"qwen2.5-coder-1.5b": test_model_path, "qwen2.5-coder-0.5b": q2k_draft_path}   # (stand-ins)
    monkeypatch.setattr(models, "inspect", lambda m: SimpleNamespace(verified=True, path=demo[m.key]))
    w = open_window(qtbot, tmp_path, settings={**folder_settings(test_model_path), "last_target": test_model_path,
                                               "last_draft": q2k_draft_path})
    close_all.append(w)
    assert w.first_run.offered == (test_model_path, q2k_draft_path)
    assert "already on this machine" in w.first_run.text.text() and not w.first_run.fetch_button.isVisible()


def test_the_pairs_menu_lists_the_demo_pair_once_and_choosing_a_file_starts_in_the_models_folder(
        qtbot, tmp_path, close_all, test_model_path, q2k_draft_path, monkeypatch):
    from types import SimpleNamespace

    from desktop_app import models
    from desktop_app.ui import model_bar
    demo = {"qwen2.5-coder-1.5b": test_model_path, "qwen2.5-coder-0.5b": q2k_draft_path}   # (stand-ins)
    monkeypatch.setattr(models, "inspect", lambda m: SimpleNamespace(verified=True, path=demo[m.key]))
    other = [test_model_path, None]
    w = open_window(qtbot, tmp_path, settings={
        "recent_pairs": [{"target": test_model_path, "draft": q2k_draft_path}, dict(zip(("target", "draft"), other))]})
    close_all.append(w)
    names = [a.text() for a in w.model_bar.recent_menu.actions() if not a.isSeparator()]
    assert names == ["Demo pair: Qwen2.5-Coder 1.5B + 0.5B", "Add a models folder…", os.path.basename(test_model_path)]
    started = []
    monkeypatch.setattr(model_bar.QFileDialog, "getOpenFileName",
                        staticmethod(lambda parent, caption, folder, filters: started.append(folder) or ("", "")))
    w.model_bar.browse_target()                     # (Ctrl+O) with a target chosen: its folder
    assert started[-1] == os.path.dirname(test_model_path)
    monkeypatch.setattr(model_bar, "models_dir", lambda: tmp_path)
    w.model_bar.target.clear()
    w.model_bar.browse_target()                     # none chosen: where fetched models go
    assert started[-1] == str(tmp_path)


def test_a_folded_sides_kept_width_never_squeezes_the_chat_nor_stops_the_window(qtbot, tmp_path, close_all):
    """Widths kept in the settings come from another window or screen, or a hand's edit: one wider than
    the window leaves the chat MIN_CHAT_WIDTH when unfolded (it was squeezed to its least), and what is
    not a width ("²" passed isdigit and stopped the window opening) is left out (a review)."""
    w = open_window(qtbot, tmp_path, settings={"window": {"folded": "conversations panel",
                                                          "widths": "conversations:900 panel:² junk :5"}})
    close_all.append(w)
    assert not w.side_shown(SIDEBAR) and not w.side_shown(PANEL)
    w.sidebar_action.trigger()
    w.panel_action.trigger()
    QApplication.processEvents()
    sizes = w.splitter.sizes()
    assert sizes[CENTER] >= MIN_CHAT_WIDTH and sizes[SIDEBAR] >= w.sidebar.minimumSizeHint().width()
    assert sizes[PANEL] >= w.tabs.minimumWidth(), sizes


def test_the_welcome_page_names_the_pair_loading_not_another(qtbot, tmp_path, close_all, test_model_path,
                                                              q2k_draft_path):
    """Opened on a pair (tandem -m A -md B) while the settings' last pair was another, the page offered
    that other pair, and to fetch the demo pair that was loading (a new user's try)."""
    w = open_window(qtbot, tmp_path, settings={"last_target": q2k_draft_path, "last_draft": None})
    close_all.append(w)
    assert w.first_run.offered == (q2k_draft_path, None)
    assert w.load_pair(test_model_path, q2k_draft_path)
    assert w.first_run.offered == (test_model_path, q2k_draft_path)
    assert "SmolLM2-135M-Instruct.Q4_1.gguf" in w.first_run.text.text() and not w.first_run.load_button.isEnabled()
    qtbot.waitUntil(lambda: w.loaded is not None and not w.busy, timeout=TIMEOUT_MS)


def test_the_welcome_page_offers_only_what_can_load_and_follows_the_file_chosen(qtbot, tmp_path, close_all, monkeypatch,
                                                                                test_model_path, gemma_path):
    """A new user's try: with a draft the bar called unable to pair, the page offered "Load this pair",
    which could only fail; with a file that was no GGUF it offered "Load this model"; and after another
    file was picked with "...", it went on naming the first."""
    from types import SimpleNamespace

    from desktop_app.ui import model_bar
    monkeypatch.setattr(models, "inspect", lambda m: SimpleNamespace(verified=False, path=str(tmp_path / m.key)))
    # (the demo pair not cached: where it is, it is offered in place of a file that cannot load, below)
    w = open_window(qtbot, tmp_path, settings={"last_target": test_model_path, "last_draft": gemma_path})
    close_all.append(w)
    assert w.model_bar.draft_path() == gemma_path and "cannot pair" in w.model_bar.verdict.text()
    assert w.first_run.offered == (test_model_path, None) and w.first_run.load_button.text() == "Load this model"
    assert ("Found on this machine: <b>SmolLM2-135M-Instruct.Q4_1.gguf</b>, alone (the draft gemma-3-270m.Q4_K_M.gguf "
            "cannot pair with it: the bar above says why)") in w.first_run.text.text()   # (in its words only)
    notes = tmp_path / "notamodel.gguf"
    notes.write_text("not a model")
    monkeypatch.setattr(model_bar.QFileDialog, "getOpenFileName", staticmethod(lambda *a: (str(notes), "")))
    w.model_bar.browse_target()                        # (the user picks a file: the page follows)
    assert w.first_run.offered is None and w.first_run.load_button.isHidden() and w.first_run.fetch_button.isVisible()
    assert f"<br>{notes} cannot be loaded: its line in the bar above says why." in w.first_run.text.text()
    monkeypatch.setattr(model_bar.QFileDialog, "getOpenFileName", staticmethod(lambda *a: (test_model_path, "")))
    w.model_bar.browse_target()                        # (the draft that cannot pair with it goes: none pairs)
    assert w.model_bar.draft_path() is None
    assert w.first_run.offered == (test_model_path, None) and "alone" not in w.first_run.text.text()
    assert w.first_run.load_button.isVisible() and w.first_run.load_button.text() == "Load this model"

    w.model_bar.draft.setCurrentIndex(w.model_bar._ensure(w.model_bar.draft, str(notes)))
    w.model_bar.draft.activated.emit(w.model_bar.draft.currentIndex())   # a draft that cannot be read: alone
    assert w.first_run.offered == (test_model_path, None) and f"alone (the draft {notes} cannot be loaded" \
        in w.first_run.text.text()


def test_a_pair_that_cannot_pair_offers_the_cached_demo_pair_to_load_not_to_fetch(qtbot, tmp_path, close_all,
                                                                                  monkeypatch, test_model_path,
                                                                                  gemma_path):
    """`tandem -m qwen2.5-coder-1.5b -md gemma3-270m` (a new user's try): the page offered the target alone
    and "Or fetch the demo pair — … 1.6 GB, fetched once", the demo pair already here; its button now
    loads it, and says so."""
    from types import SimpleNamespace

    from desktop_app.ui.first_run import LOAD_DEMO_BUTTON, LOAD_DEMO_TOO
    monkeypatch.setattr(models, "inspect", lambda m: SimpleNamespace(verified=True, path=str(tmp_path / m.key)))
    w = open_window(qtbot, tmp_path, settings={"last_target": test_model_path, "last_draft": gemma_path})
    close_all.append(w)
    assert w.first_run.offered == (test_model_path, None) and "alone (the draft gemma" in w.first_run.text.text()
    assert LOAD_DEMO_TOO in w.first_run.text.text() and "1.6 GB" not in w.first_run.text.text()
    assert w.first_run.fetch_button.isVisible() and w.first_run.fetch_button.text() == LOAD_DEMO_BUTTON
    monkeypatch.setattr(models, "inspect", lambda m: SimpleNamespace(verified=False, path=str(tmp_path / m.key)))
    w._offer_bar_choice()                              # (not cached: fetching it is what is offered)
    assert "1.6 GB, fetched once" in w.first_run.text.text()
    assert w.first_run.fetch_button.text() == "Fetch the demo pair"


def test_an_unreadable_last_model_leaves_the_cached_demo_pair_offered(qtbot, tmp_path, close_all, monkeypatch,
                                                                       test_model_path, q2k_draft_path):
    """(A review: a last model that could not be read hid the cached demo pair behind "fetch 1.6 GB".) The
    bar keeps it, its line saying why (issue #12)."""
    from types import SimpleNamespace

    from desktop_app import models
    demo = {"qwen2.5-coder-1.5b": test_model_path, "qwen2.5-coder-0.5b": q2k_draft_path}   # (stand-ins)
    monkeypatch.setattr(models, "inspect", lambda m: SimpleNamespace(verified=True, path=demo[m.key]))
    notes = tmp_path / "notamodel.gguf"
    notes.write_text("not a model")
    w = open_window(qtbot, tmp_path, settings={"last_target": str(notes), "last_draft": None})
    close_all.append(w)
    assert w.first_run.offered == (test_model_path, q2k_draft_path)
    assert "already on this machine" in w.first_run.text.text() and w.model_bar.target_path() == str(notes)
    assert "cannot read" in w.model_bar.info.text()
    # ... and so does a load of it that failed (`tandem -m /etc/hostname`: the page offered to fetch the
    # demo pair, 1.6 GB, already here, and named the file "hostname": a new user's try)
    w.load_pair(str(notes), None)
    qtbot.waitUntil(lambda: not w.loading and "Could not load" in w.model_bar.status.text(), timeout=TIMEOUT_MS)
    assert w.first_run.offered == (test_model_path, q2k_draft_path) and w.first_run.fetch_button.isHidden()
    assert w.first_run.load_button.text() == "Load the demo pair (cached)"
    assert (f"<br>{notes} cannot be loaded: its line in the bar above says why." in w.first_run.text.text()
            and "already on this machine" in w.first_run.text.text())
    # the reason once, in the bar's line; the failed load and the page point to it (a new user's try read
    # "cannot read: notamodel.gguf is not a GGUF file", "Could not load: notamodel.gguf: not a GGUF file (it
    # does not start with the GGUF signature)" and "… cannot be loaded (cannot read: …)" as three failures)
    assert "is not a GGUF file" in w.model_bar.info.text()
    assert w.model_bar.status.text() == "Could not load notamodel.gguf: its line above says why."
    assert "GGUF" not in w.model_bar.status.text() + w.first_run.text.text()
