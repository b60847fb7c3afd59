"""Help ▸ Keyboard shortcuts and Reading the speculation panel (a new user's try: the Help menu held only
the system report, several keys were in no menu, and nothing explained γ, α or a bonus token)."""
from __future__ import annotations

import re

from PySide6.QtCore import QPoint, QRect
from PySide6.QtGui import QKeySequence

from desktop_app.ui.help_dialog import PANEL_HELP
from desktop_app.ui.round_strip import Colours


def test_the_shortcuts_list_every_key_the_window_answers(qtbot, window):
    dialog = window.show_shortcuts()
    qtbot.addWidget(dialog)
    shown = dialog.text.toPlainText()
    keyed = [a for a in window.actions() if not a.shortcut().isEmpty()]
    assert len(keyed) >= 15
    for action in keyed:
        assert action.shortcut().toString(QKeySequence.NativeText) in shown, action.text()
    for keys, what in (("Esc", "end a search, or else an edit"), ("Ctrl+F", "Search"), ("F2", "Rename"),
                       ("Ctrl+L", "Go to the message box"), ("Enter", "Send"), ("Shift+Enter", "new line")):
        assert re.search(rf"(^|\n){re.escape(keys)}\n[^\n]*{re.escape(what)}", shown), keys
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    assert [a.text() for a in menu.actions() if a.text()] == ["Keyboard shortcuts", "Reading the speculation panel",
                                                              "About Tandem and this system…"]
    f1 = [a.text() for a in keyed if a.shortcut() == QKeySequence(QKeySequence.HelpContents)]
    assert f1 == ["Reading the speculation panel"]       # (F1 opened CPU flags and folders: a new user's try)


def test_the_panel_help_names_every_colour_of_the_legend(qtbot, window):
    dialog = window.show_panel_help()
    qtbot.addWidget(dialog)
    legend = re.sub(r"<[^>]+>", " ", Colours(False).legend_html()).replace("&nbsp;", " ")
    names = [n for n in ("kept", "rejected", "discarded", "correction", "bonus", "plain", "end") if n in legend]
    assert len(names) == 7 and len(re.findall(r"<span", Colours(False).legend_html())) == 7
    for name in names:
        assert f"<b>{name}</b>" in PANEL_HELP
    shown = dialog.text.toPlainText()
    for label in ("γ", "Acceptance α", "vs plain (measured)", "Predicted (cost model)", "Does it pay?"):
        assert label in shown
    from desktop_app.ui.panel_rows import STATS     # every row of the grid, and the charts (Kept per drafted
    for _, title, _ in STATS:                       # round, Draft / target time and the charts were nowhere in
        assert title in shown, title               # it: a new user's try)
    assert "Charts" in shown and '"other"' in shown and "#12 lookup γ5" in shown
    assert "(1 − αγ+1) / (1 − α)" in shown               # (the formula of the brief; γ+1 is a superscript)


def test_the_panel_help_opens_beside_the_panel_and_leaves_it_usable(qtbot, window):
    """(It opened over the panel's edge, modal: a new user could not read both at once.) In a window as
    narrow as the screen, with the panel folded away and the Settings page showing, it unfolds the panel,
    shows its page, and fits beside it on the screen; asked for again, the one open comes to the front."""
    from desktop_app.ui.window_layout import PANEL, SIDEBAR

    screen = window.screen().availableGeometry()
    window.resize(min(1366, screen.width()), min(740, screen.height()))
    window.move(screen.topLeft())
    window.show()
    qtbot.waitExposed(window)
    window.show_side(SIDEBAR, False)
    window.show_side(PANEL, False)
    window.tabs.setCurrentWidget(window.settings_scroll)
    dialog = window.show_panel_help()
    qtbot.addWidget(dialog)
    qtbot.waitExposed(dialog)
    assert window.side_shown(PANEL) and window.tabs.currentWidget() is window.spec_scroll
    on_screen = QRect(window.tabs.mapToGlobal(QPoint(0, 0)), window.tabs.size())
    assert not dialog.isModal() and dialog.isVisible()
    assert not dialog.frameGeometry().intersects(on_screen), (dialog.frameGeometry(), on_screen)
    assert screen.contains(dialog.geometry()), (dialog.geometry(), screen)
    assert window.show_panel_help() is dialog
