"""The System dialog: the doctor report gathered in a child process, shown, and copied."""
from __future__ import annotations

import subprocess
import sys

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from desktop_app import __version__
from desktop_app.ui.system_dialog import SystemDialog


@pytest.fixture(autouse=True)
def folders(tmp_path, monkeypatch):
    """The child inherits these: its probe and folders stay in the test's temporary folder."""
    for name in ("CACHE", "DATA", "CONFIG", "MODELS"):
        monkeypatch.setenv(f"TANDEM_{name}_DIR", str(tmp_path / name.lower()))
    monkeypatch.delenv("TANDEM_NO_REPACK", raising=False)


def test_the_dialog_shows_the_report_and_copies_it(qtbot):
    dialog = SystemDialog()
    qtbot.addWidget(dialog)
    dialog.show()
    assert "Gathering" in dialog.status.text() and not dialog.copy_button.isEnabled()
    with qtbot.waitSignal(dialog.reportReady, timeout=180_000) as ready:
        pass
    doc = ready.args[0]
    assert doc["tandem"]["version"] == __version__
    text = dialog.text.toPlainText()
    assert text.startswith(f"Tandem {__version__} · Python")
    repack_line = next(line for line in text.splitlines() if line.startswith("Weight repacking: "))
    assert repack_line.startswith(f"Weight repacking: {doc['repack']['state']} (probed now)")
    QApplication.clipboard().clear()
    qtbot.mouseClick(dialog.copy_button, Qt.MouseButton.LeftButton)
    assert QApplication.clipboard().text() == text
    assert "Copied" in dialog.status.text()


def test_a_failing_report_shows_why_and_can_still_be_copied(qtbot):
    dialog = SystemDialog(command=[sys.executable, "-c", "import sys; sys.exit('tandem: error: no llama.cpp here')"],
                          in_use="Loaded t.gguf (context 4096 tokens). Speculating: auto.")
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.reportFailed, timeout=60_000) as failed:
        pass
    assert failed.args[0] == "tandem: error: no llama.cpp here"
    assert "Could not gather the system report: tandem: error: no llama.cpp here" in dialog.status.text()
    assert dialog.copy_button.isEnabled() and dialog.report is None
    assert f"Tandem {__version__}" in dialog.text.toPlainText()
    # what the window has loaded, for a bug report (the report named no model: a new user's try)
    assert dialog.text.toPlainText().endswith("\nIn the window: Loaded t.gguf (context 4096 tokens). Speculating: auto.")
    assert dialog.windowTitle() == "About Tandem and this system"


def test_a_report_process_that_cannot_start_is_reported(qtbot, tmp_path):
    dialog = SystemDialog(command=[str(tmp_path / "no-such-python")])
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.reportFailed, timeout=60_000) as failed:
        pass
    assert "could not start" in failed.args[0]


def test_the_dialog_does_not_load_llama_cpp_in_the_window_process():
    done = subprocess.run([sys.executable, "-c", "import sys, desktop_app.ui.system_dialog; "
                           "print(sorted(m for m in ('llama_cpp', 'desktop_app.engine') if m in sys.modules))"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_window_opens_it_from_the_help_menu(qtbot, tmp_path):
    from desktop_app.ui.main_window import MainWindow

    window = MainWindow(str(tmp_path / "history.db"), str(tmp_path / "settings.json"))
    qtbot.addWidget(window)
    help_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    about = next(a for a in help_menu.actions() if a.text().startswith("About Tandem"))
    about.trigger()
    dialog = window.findChild(SystemDialog)
    assert dialog is not None and dialog.isVisible()
    with qtbot.waitSignal(dialog.reportReady, timeout=180_000):
        pass
    assert dialog.text.toPlainText().startswith(f"Tandem {__version__}")
    dialog.close()
    window.close()


def test_the_window_s_report_names_what_it_has_loaded(qtbot, tmp_path):
    """Help ▸ About named no model, though offered for a bug report (a new user's try): the window hands
    it the model bar's line and the speculation bar's mode."""
    from desktop_app.ui.main_window import MainWindow

    window = MainWindow(str(tmp_path / "h.db"), str(tmp_path / "s.json"))
    qtbot.addWidget(window)
    dialog = window.show_system()
    try:
        assert dialog.in_use == f"{window.model_bar.status.text()} {window.spec_bar.mode_text()}."
        assert dialog.in_use.startswith("No model loaded.") and "auto" in dialog.in_use
    finally:
        dialog.done(0)
        window.close()
