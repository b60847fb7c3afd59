"""The speculation bar above the chat (issue #13 item 1), in the real window on the real SmolLM2 pair:
its changes reach the engine in the middle of a reply, γ is only adjustable where it means something,
Auto shows what the engine chose, the shortcuts work, and the choices survive a restart."""
from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGroupBox, QToolTip

from desktop_app.ui.main_window import MainWindow
from desktop_app.ui.spec_bar import SpecBar

LONG_PROMPT = "Write a long story about a dragon who learns to code. Make it at least five paragraphs."
TIMEOUT_MS = 120_000


def open_window(qtbot, folder) -> MainWindow:
    w = MainWindow(str(folder / "history.db"), str(folder / "settings.json"))
    qtbot.addWidget(w)
    w.show()
    return w


@pytest.fixture
def window(qtbot, tmp_path):
    w = open_window(qtbot, tmp_path)
    yield w
    if not w._closing:
        w.close()


def load(qtbot, window, target, draft):
    window.load_pair(target, draft)
    qtbot.waitUntil(lambda: window.loaded is not None and window.loaded.target == target and not window.busy,
                    timeout=TIMEOUT_MS)


def wait_idle(qtbot, window):
    qtbot.waitUntil(lambda: window.generating_id is None and not window.busy, timeout=TIMEOUT_MS)


def send(qtbot, window, text):
    window.composer.setFocus()
    window.composer.setPlainText(text)
    qtbot.keyClick(window.composer, Qt.Key_Return)


@pytest.fixture
def loaded(qtbot, window, test_model_path, q2k_draft_path):
    window.settings_panel.n_threads.setValue(1)        # one thread: the test machine's cores are shared
    load(qtbot, window, test_model_path, q2k_draft_path)
    qtbot.mouseClick(window.spec_bar.drafter_buttons["model"], Qt.LeftButton)   # (a fresh install starts in Auto)
    window.settings_panel.temperature.setValue(0.0)
    window.settings_panel.max_tokens.setValue(48)
    return window


def collect_rounds(window) -> list:
    rounds = []
    window.worker.round.connect(rounds.append)      # runs on the worker thread; a list append is safe
    return rounds


def change_mid_reply(qtbot, w, change, enough, after_rounds=4):
    """A long greedy reply; `change` is made after a few rounds, and the reply is stopped once the rounds
    after it are `enough` (or it ends by itself). Returns (rounds before the change, rounds after)."""
    rounds = collect_rounds(w)
    w.settings_panel.max_tokens.setValue(200)
    send(qtbot, w, LONG_PROMPT)
    qtbot.waitUntil(lambda: len(rounds) >= after_rounds, timeout=TIMEOUT_MS)
    assert w.busy and w.generating_id is not None          # the reply is still running
    n = len(rounds)
    change()
    qtbot.waitUntil(lambda: enough(rounds[n:]) or not w.busy, timeout=4 * TIMEOUT_MS)
    w.stop()
    wait_idle(qtbot, w)
    return rounds[:n], rounds[n:]


def changed_from(after, holds) -> list:
    """The rounds from the first one that shows the change (rounds already on their way when the change
    was made come before it); every one of them must show it."""
    first = next((i for i, r in enumerate(after) if holds(r)), None)
    assert first is not None, f"no round after the change shows it: {[(r.drafter, r.gamma) for r in after]}"
    tail = after[first:]
    assert all(holds(r) for r in tail), [(r.drafter, r.gamma) for r in tail]
    return tail


# -- (1) the bar's changes reach the engine in the middle of a reply

@pytest.mark.network
def test_gamma_slider_applies_mid_reply(qtbot, loaded):
    bar = loaded.spec_bar
    assert bar.spec(True).draft_max == 4 and bar.mode_text() == "Speculating: draft model, γ 4"
    before, after = change_mid_reply(qtbot, loaded, lambda: bar.gamma.setValue(2), lambda after: len(after) >= 12)
    assert all(r.drafter == "model" for r in before) and max(r.gamma for r in before) == 4
    tail = changed_from(after, lambda r: r.drafter == "model" and 1 <= r.gamma <= 2)
    assert len(tail) >= 5                    # the reply went on at γ 2 (not just its last round)
    assert bar.mode_text() == "Speculating: draft model, γ 2"
    assert loaded.settings["generation"]["draft_max"] == 2


@pytest.mark.network
def test_switching_to_prompt_lookup_applies_mid_reply(qtbot, loaded):
    bar = loaded.spec_bar
    before, after = change_mid_reply(
        qtbot, loaded, lambda: qtbot.mouseClick(bar.drafter_buttons["lookup"], Qt.LeftButton),
        lambda after: len(after) >= 12 and any(r.drafter == "lookup" for r in after))
    assert all(r.drafter == "model" for r in before)
    tail = changed_from(after, lambda r: r.drafter != "model")
    assert any(r.drafter == "lookup" and r.gamma > 0 for r in tail)     # it copied from the text
    assert {r.drafter for r in tail} <= {"lookup", "none"}               # (none: nothing matched that round)
    assert bar.mode_text() == "Speculating: prompt lookup, γ 4"
    assert loaded.settings["generation"]["drafter"] == "lookup"


@pytest.mark.network
def test_switching_speculation_off_applies_mid_reply(qtbot, loaded):
    bar = loaded.spec_bar
    before, after = change_mid_reply(qtbot, loaded, lambda: qtbot.mouseClick(bar.switch, Qt.LeftButton),
                                     lambda after: len(after) >= 12)
    assert all(r.drafter == "model" and r.gamma > 0 for r in before)
    tail = changed_from(after, lambda r: r.drafter == "none" and r.gamma == 0)
    assert len(tail) >= 5
    assert not bar.switch.isChecked() and bar.mode_text() == "Plain decoding"
    assert loaded.settings["generation"]["speculation"] is False


# -- (2) γ is adjustable only where it applies; Auto shows what the engine chose

@pytest.mark.network
def test_gamma_disabled_when_off_or_auto_and_auto_shows_its_rounds_live(qtbot, window, test_model_path,
                                                                       q2k_draft_path):
    bar = window.spec_bar
    model = bar.drafter_buttons["model"]
    # a fresh install starts in Auto (docs/auto-mode.md, "Auto by default"); nothing loaded yet, the bar
    # says that nothing runs
    assert bar.drafter_buttons["auto"].isChecked() and bar.mode_text() == "Speculation: auto"
    assert bar.property("mode") == "idle" and not bar.gamma.isEnabled()
    qtbot.mouseClick(model, Qt.LeftButton)                       # the saved choice shows
    assert model.isEnabled() and model.isChecked() and "once a pair with one is loaded" in model.toolTip()
    assert bar.mode_text() == "Speculation: draft model, γ 4" and bar.property("mode") == "idle"
    assert "once models are loaded" in bar.mode.toolTip()
    assert bar.spec(False).drafter == "lookup"                   # (a target alone would copy meanwhile)
    window.settings_panel.n_threads.setValue(1)        # one thread: the test machine's cores are shared
    load(qtbot, window, test_model_path, q2k_draft_path)
    assert model.isEnabled() and model.isChecked() and "loaded beside the target" in model.toolTip()
    assert bar.mode_text() == "Speculating: draft model, γ 4" and bar.property("mode") == "on"
    assert bar.gamma.isEnabled() and bar.gamma_up_action.isEnabled()

    qtbot.mouseClick(bar.switch, Qt.LeftButton)                                # off
    assert not bar.gamma.isEnabled()
    bar.gamma_up_action.trigger()                   # (Ctrl+]: it did nothing, and said nothing; a new user's try)
    qtbot.waitUntil(lambda: QToolTip.text() == "Speculation is off: turn it on (Ctrl+T) to set γ.")
    assert bar.gamma.value() == 4 and QToolTip.isVisible()
    bar.toggle_action.trigger()                     # on, by Ctrl+T (a click hides a tooltip): the note goes
    qtbot.waitUntil(lambda: not QToolTip.isVisible(), timeout=2000)
    qtbot.mouseClick(bar.switch, Qt.LeftButton)                                # off
    assert not bar.gamma.isVisibleTo(bar) and bar.gamma_label.text() == ""     # (a disabled slider looked live)
    assert bar.mode_text() == "Plain decoding" and not window.spec_bar.spec(True).speculating
    qtbot.mouseClick(bar.switch, Qt.LeftButton)                                # on again
    assert bar.gamma.isEnabled() and bar.gamma.isVisibleTo(bar) and bar.gamma_label.text() == "γ = 4"
    qtbot.mouseClick(bar.drafter_buttons["lookup"], Qt.LeftButton)
    assert bar.gamma.isEnabled() and bar.spec(True).drafter == "lookup"
    qtbot.mouseClick(bar.drafter_buttons["auto"], Qt.LeftButton)               # auto
    assert not bar.gamma.isEnabled()
    bar.gamma_down_action.trigger()
    qtbot.waitUntil(lambda: QToolTip.text().startswith("Auto chooses γ itself, 0 to 32 each round"))
    assert bar.gamma.value() == 4
    assert bar.gamma.isHidden() and bar.gamma_label.isVisible()  # (a resting slider looked live)
    assert bar.gamma_caption.isHidden()                          # (nor a caption left alone)
    spec = bar.spec(True)
    assert spec.auto and spec.drafter == "model"               # with a draft model auto may use it (or lookup)
    assert bar.spec(False).drafter == "lookup"                 # without one, lookup
    assert bar.gamma_label.text() == "auto: γ 0–32" and bar.mode_text().startswith("Speculating: auto")
    assert "tokens drafted in a round" in bar.gamma_label.toolTip() and "0 to 32" in bar.gamma_label.toolTip()

    window.settings_panel.temperature.setValue(0.0)
    window.settings_panel.max_tokens.setValue(48)
    rounds = collect_rounds(window)
    send(qtbot, window, "Write a Python function that adds two numbers.")
    qtbot.waitUntil(lambda: bar.gamma_label.text() != "auto: γ 0–32", timeout=TIMEOUT_MS)   # live, mid-reply
    live = bar.gamma_label.text()
    wait_idle(qtbot, window)
    assert live in {f"auto: γ {r.gamma} ({r.drafter})" if r.gamma else "auto: plain step" for r in rounds}
    assert bar.gamma_label.text() == "auto: γ 0–32"            # after the reply: the range, not its last round
    assert all(r.gamma <= 32 for r in rounds)                  # auto's own range, not the slider's 4
    last = rounds[-1]

    qtbot.mouseClick(bar.drafter_buttons["model"], Qt.LeftButton)             # out of auto: γ is the slider's
    assert bar.gamma.isEnabled() and bar.gamma.isVisible() and bar.gamma_label.text() == "γ = 4"
    assert bar.gamma_caption.isVisible()
    bar.show_round(last)                                        # a round outside auto changes nothing shown
    assert bar.gamma_label.text() == "γ = 4"
    qtbot.mouseClick(bar.drafter_buttons["auto"], Qt.LeftButton)              # back in auto: no stale round
    assert bar.gamma_label.text() == "auto: γ 0–32"


def test_the_bar_before_and_after_models_are_loaded(qtbot):
    """No models loaded (at start, or after the engine stopped): the bar shows the choice that will
    apply, in the colours of "off", and the draft model can be chosen; loaded, it says what runs."""
    bar = SpecBar({"drafter": "model", "draft_max": 4})
    qtbot.addWidget(bar)
    model, lookup, auto = (bar.drafter_buttons[k] for k in ("model", "lookup", "auto"))
    assert bar.mode_text() == "Speculation: draft model, γ 4" and bar.property("mode") == "idle"
    assert "applies once models are loaded" in bar.mode.toolTip() and "#2e9d4a" not in bar.styleSheet().split("#specMode")[1][:40]
    assert model.isEnabled() and model.isChecked()
    qtbot.mouseClick(lookup, Qt.LeftButton)
    assert bar.mode_text() == "Speculation: prompt lookup, γ 4" and bar.generation()["drafter"] == "lookup"
    qtbot.mouseClick(model, Qt.LeftButton)                       # chosen before any pair is loaded
    assert bar.generation()["drafter"] == "model" and bar.spec(True).drafter == "model"
    qtbot.mouseClick(auto, Qt.LeftButton)
    assert bar.mode_text() == "Speculation: auto" and bar.property("mode") == "idle"
    qtbot.mouseClick(model, Qt.LeftButton)

    bar.set_draft_available(True)                                # a pair
    assert bar.mode_text() == "Speculating: draft model, γ 4" and bar.property("mode") == "on"
    assert model.isEnabled() and "#2e9d4a" in bar.styleSheet().split("#specMode")[1][:40]
    assert bar.p_min.isEnabled()                                 # (the draft model's probability: p-min applies)
    bar.set_draft_available(False)                               # a target alone: Auto copies meanwhile
    assert bar.mode_text() == "Speculating: auto" and not model.isEnabled() and auto.isChecked()
    # nothing drafts with a probability to stop at: p-min rests and says why (it sat on: a new user's try)
    assert not bar.p_min.isEnabled() and "no draft model drafts here" in bar.p_min.toolTip()
    assert "stands in for the draft model" in bar.mode.toolTip() and "No draft model" in model.toolTip()
    assert bar.spec(False).auto and bar.spec(False).drafter == "lookup" and not bar.gamma.isEnabled()
    assert bar.generation()["drafter"] == "model" and not bar.generation()["auto"]   # the saved choice stays
    qtbot.mouseClick(auto, Qt.LeftButton)                        # the highlighted stand-in, clicked: chosen,
    assert bar.generation()["auto"] and auto.isChecked()         # and the bar no longer says it stands in
    assert "stands in" not in bar.mode.toolTip() and bar.mode_text() == "Speculating: auto"
    qtbot.mouseClick(lookup, Qt.LeftButton)                      # lookup at a fixed γ, chosen
    assert bar.mode_text() == "Speculating: prompt lookup, γ 4" and not bar.spec(False).auto
    assert bar.generation()["drafter"] == "lookup" and not bar.p_min.isEnabled()
    bar.set_draft_available(None)                                # the engine stopped: the choice as it will apply
    assert bar.mode_text() == "Speculation: prompt lookup, γ 4" and lookup.isChecked()
    qtbot.mouseClick(model, Qt.LeftButton)
    assert bar.mode_text() == "Speculation: draft model, γ 4" and model.isChecked()


# -- (3) shortcuts

def test_shortcuts_toggle_and_step_gamma(qtbot, window):
    bar = window.spec_bar
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Speculation")
    assert menu.actions() == [bar.toggle_action, bar.gamma_up_action, bar.gamma_down_action]
    assert [a.shortcut().toString() for a in menu.actions()] == ["Ctrl+T", "Ctrl+]", "Ctrl+["]
    assert "Ctrl+T" in bar.switch.toolTip()
    assert "Ctrl+]" in bar.gamma.toolTip() and "Ctrl+[" in bar.gamma.toolTip()

    assert not bar.gamma.isEnabled()                             # Auto (the default) chooses γ itself
    qtbot.keyClick(window, Qt.Key_BracketRight, Qt.ControlModifier)
    assert bar.gamma.value() == 4
    qtbot.mouseClick(bar.drafter_buttons["model"], Qt.LeftButton)
    qtbot.keyClick(window, Qt.Key_BracketRight, Qt.ControlModifier)
    qtbot.keyClick(window, Qt.Key_BracketRight, Qt.ControlModifier)
    assert bar.gamma.value() == 6 and bar.gamma_label.text() == "γ = 6"
    qtbot.keyClick(window, Qt.Key_BracketLeft, Qt.ControlModifier)
    assert bar.gamma.value() == 5 and window.settings["generation"]["draft_max"] == 5
    assert bar.toggle_action.isCheckable() and bar.toggle_action.isChecked()   # (the menu showed no state)
    qtbot.keyClick(window, Qt.Key_T, Qt.ControlModifier)
    assert not bar.switch.isChecked() and window.settings["generation"]["speculation"] is False
    assert not bar.toggle_action.isChecked()
    qtbot.keyClick(window, Qt.Key_BracketRight, Qt.ControlModifier)            # γ is off with speculation
    assert bar.gamma.value() == 5
    qtbot.keyClick(window, Qt.Key_T, Qt.ControlModifier)
    assert bar.switch.isChecked() and bar.mode_text() == "Speculation: draft model, γ 5"
    window.composer.setFocus()                                   # typing in the composer: the keys still work
    qtbot.keyClick(window.composer, Qt.Key_BracketRight, Qt.ControlModifier)
    assert bar.gamma.value() == 6 and window.composer.toPlainText() == ""
    qtbot.keyClick(window.composer, Qt.Key_T, Qt.ControlModifier)
    assert not bar.switch.isChecked()
    qtbot.keyClick(window.composer, Qt.Key_T, Qt.ControlModifier)
    assert bar.switch.isChecked() and bar.toggle_action.isChecked()
    qtbot.mouseClick(bar.switch, Qt.LeftButton)                  # the switch clicked: the menu's check follows
    assert not bar.switch.isChecked() and not bar.toggle_action.isChecked()
    bar.toggle_action.trigger()                                  # the menu item: the switch follows
    assert bar.switch.isChecked() and bar.toggle_action.isChecked()
    for _ in range(40):                                          # γ stays within 1..DRAFT_MAX_LIMIT
        qtbot.keyClick(window, Qt.Key_BracketLeft, Qt.ControlModifier)
    assert bar.gamma.value() == 1 and bar.spec(False).draft_max == 1


# -- (4) one place for the controls, and they persist

def test_settings_are_saved_a_second_after_a_change_not_only_at_quit(qtbot, tmp_path):
    """A logout, a kill or a crash lost every setting changed since the app started: they were written
    only when the window closed (a user's try). Now a second after the last change."""
    w = open_window(qtbot, tmp_path)
    path = tmp_path / "settings.json"

    def saved():
        return json.loads(path.read_text()) if path.exists() else {}

    w.spec_bar.gamma.setValue(9)
    w.settings_panel.temperature.setValue(0.25)
    w.settings_panel.n_ctx.setValue(1024)
    qtbot.waitUntil(lambda: saved().get("generation", {}).get("draft_max") == 9, timeout=5_000)
    assert saved()["generation"]["temperature"] == pytest.approx(0.25)
    assert saved()["loading"]["n_ctx"] == 1024
    w.show_side(2, False)                                    # the layout too (the panel folded)
    qtbot.waitUntil(lambda: saved()["window"].get("splitter") and not w._save_timer.isActive(), timeout=5_000)
    assert not w._closing
    after_kill = tmp_path / "after_kill"                     # what a new start would read, the window still up
    after_kill.mkdir()
    (after_kill / "settings.json").write_text(path.read_text())
    w2 = open_window(qtbot, after_kill)
    assert w2.spec_bar.gamma.value() == 9 and w2.settings_panel.temperature.value() == pytest.approx(0.25)
    assert not w2.panel_action.isChecked()
    w2.close()
    w.close()


def test_settings_persist_across_windows(qtbot, tmp_path):
    w = open_window(qtbot, tmp_path)
    bar = w.spec_bar
    assert not any(b.title() == "Speculation" for b in w.settings_panel.findChildren(QGroupBox))
    assert not bar.advanced.isVisible()
    qtbot.mouseClick(bar.advanced_button, Qt.LeftButton)
    assert bar.advanced.isVisible()
    bar.gamma.setValue(7)
    bar.draft_min.setValue(2)
    bar.p_min.setValue(0.3)
    qtbot.mouseClick(bar.drafter_buttons["lookup"], Qt.LeftButton)
    qtbot.mouseClick(bar.drafter_buttons["auto"], Qt.LeftButton)
    w.settings_panel.top_k.setValue(17)                        # the settings panel's own keys still saved
    w.close()
    saved = json.loads((tmp_path / "settings.json").read_text())["generation"]
    assert {k: saved[k] for k in ("speculation", "drafter", "draft_max", "draft_min", "draft_p_min", "auto",
                                  "top_k")} == {"speculation": True, "drafter": "lookup", "draft_max": 7,
                                                "draft_min": 2, "draft_p_min": 0.3, "auto": True, "top_k": 17}

    w2 = open_window(qtbot, tmp_path)
    bar2 = w2.spec_bar
    assert bar2.generation() == {"speculation": True, "drafter": "lookup", "draft_max": 7, "draft_min": 2,
                                 "draft_p_min": 0.3, "auto": True}
    assert bar2.drafter_buttons["auto"].isChecked() and not bar2.gamma.isEnabled()
    assert w2.settings_panel.top_k.value() == 17
    opts = w2._options()
    assert opts.spec.auto and opts.spec.drafter == "lookup" and opts.spec.draft_max == 7   # no draft model loaded
    qtbot.mouseClick(bar2.drafter_buttons["lookup"], Qt.LeftButton)            # out of auto, then off
    qtbot.mouseClick(bar2.switch, Qt.LeftButton)
    w2.close()

    w3 = open_window(qtbot, tmp_path)
    assert w3.spec_bar.generation()["speculation"] is False and w3.spec_bar.generation()["auto"] is False
    assert w3.spec_bar.mode_text() == "Plain decoding" and not w3._options().spec.speculating
    w3.close()


@pytest.mark.network
def test_a_target_alone_greys_out_the_draft_model_and_runs_auto(qtbot, window, test_model_path):
    bar = window.spec_bar
    window.settings_panel.n_threads.setValue(1)
    model = bar.drafter_buttons["model"]
    qtbot.mouseClick(model, Qt.LeftButton)                       # the draft model chosen (not the default Auto)
    load(qtbot, window, test_model_path, None)
    assert not model.isEnabled() and "No draft model" in model.toolTip()
    # the draft model chosen, none loaded: Auto copies where that pays (a fixed γ of copies can cost a
    # fifth of plain speed on text without repeats)
    assert bar.drafter_buttons["auto"].isChecked() and bar.mode_text() == "Speculating: auto"
    assert window._options().spec.drafter == "lookup" and window._options().spec.auto
    assert window.settings["generation"]["drafter"] == "model"         # the saved choice stays for a pair
    assert not window.settings["generation"]["auto"]
    bar.gamma_up_action.trigger()                                     # (it named the greyed Draft model: a review)
    qtbot.waitUntil(lambda: QToolTip.text().endswith("choose Prompt lookup (no draft model is loaded) to set it."))


def test_longer_drafts_from_the_menu_in_auto_says_why_gamma_is_not_the_user_s(qtbot, window):
    """Ctrl+] in Auto showed why γ did not change, but the Speculation menu's item showed nothing: the note,
    shown at once, went as the menu closed (a new user's try)."""
    from desktop_app.ui.spec_bar import TIP_DELAY_MS
    bar = window.spec_bar
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Speculation")
    menu.popup(window.mapToGlobal(window.rect().topLeft()))
    qtbot.waitUntil(menu.isVisible)
    menu.setActiveAction(bar.gamma_up_action)
    qtbot.keyClick(menu, Qt.Key_Return)
    qtbot.wait(TIP_DELAY_MS + 450)                        # (shown at once, it was there, then gone with the menu)
    assert not menu.isVisible() and QToolTip.isVisible()
    assert QToolTip.text().startswith("Auto chooses γ itself") and bar.gamma.value() == 4
