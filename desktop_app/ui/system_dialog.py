"""About Tandem / System: the `tandem doctor` report, with a button that copies it for a bug report.

The window process never loads llama.cpp, so the report comes from `python -m desktop_app doctor
--json` run as a child process (asynchronously: the dialog says "Gathering…" meanwhile), rendered
with diagnostics.format_text, which loads nothing.
"""
from __future__ import annotations

import json
from typing import Sequence

from PySide6.QtCore import QProcess, QProcessEnvironment, QTimer, Signal, Slot
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout

from desktop_app import __version__
from desktop_app.child import child_environment, tandem_command
from desktop_app.diagnostics import format_text

TIMEOUT_MS = 120_000            # doctor may run the CPU probe once (its own limit is 60 s)


def doctor_command() -> list[str]:
    return tandem_command("doctor", "--json")


class SystemDialog(QDialog):
    """Shows the doctor report. `reportReady(dict)` fires with the parsed report, `reportFailed(str)`
    with the reason it could not be gathered. `command` replaces the doctor command (for tests)."""

    reportReady = Signal(dict)
    reportFailed = Signal(str)

    def __init__(self, parent=None, command: Sequence[str] | None = None, in_use: str = ""):
        """`in_use`: what the window has loaded and how it speculates, last in the report (a bug report
        needs it, and the report named neither: a new user's try)."""
        super().__init__(parent)
        self.setWindowTitle("About Tandem and this system")     # (as the Help menu names it)
        self.in_use = in_use
        self.resize(880, 440)
        self.report: dict | None = None
        layout = QVBoxLayout(self)
        self.title = QLabel(f"<b>Tandem {__version__}</b>: local chat sped up by speculative decoding")
        self.status = QLabel("Gathering the system report…")
        self.status.setObjectName("systemStatus")
        self.status.setWordWrap(True)
        self.text = QPlainTextEdit()
        self.text.setObjectName("systemReport")
        self.text.setReadOnly(True)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setPlaceholderText("Gathering…")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.copy_button = QPushButton("Copy to clipboard")
        self.copy_button.setEnabled(False)
        self.copy_button.clicked.connect(self.copy)
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        for w in (self.title, self.status, self.text, buttons):
            layout.addWidget(w)

        command = list(command or doctor_command())
        self.process = QProcess(self)
        environment = QProcessEnvironment()                 # this very copy of Tandem, whatever the folder
        for key, value in child_environment().items():
            environment.insert(key, value)
        self.process.setProcessEnvironment(environment)
        self.process.finished.connect(self._on_finished)
        self.process.errorOccurred.connect(self._on_error)
        self._timer = QTimer(self, singleShot=True, interval=TIMEOUT_MS)
        self._timer.timeout.connect(self._on_timeout)
        self._done = False
        self.process.start(command[0], command[1:])
        self._timer.start()

    # -- the child process
    @Slot(int, QProcess.ExitStatus)
    def _on_finished(self, code: int, status: QProcess.ExitStatus) -> None:
        out = bytes(self.process.readAllStandardOutput()).decode("utf-8", errors="replace")
        err = bytes(self.process.readAllStandardError()).decode("utf-8", errors="replace")
        try:
            doc = json.loads(out)
        except ValueError:
            doc = None
        if status == QProcess.ExitStatus.NormalExit and code == 0 and isinstance(doc, dict) and doc.get("ok"):
            self._show(doc)
            return
        lines = [line for line in err.splitlines() if line.strip()]
        if isinstance(doc, dict) and doc.get("error"):
            reason = doc["error"]
        elif lines:
            reason = lines[-1]
        elif status == QProcess.ExitStatus.NormalExit:
            reason = f"the report process ended with code {code}"
        else:
            reason = "the report process crashed"
        self._fail(reason, err)

    @Slot(QProcess.ProcessError)
    def _on_error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self._fail(f"the report process could not start ({self.process.errorString()})", "")

    def _on_timeout(self) -> None:
        if self.process.state() != QProcess.ProcessState.NotRunning:
            self._fail(f"no report within {TIMEOUT_MS // 1000} s", "")
            self.process.kill()

    # -- showing it
    def _show(self, doc: dict) -> None:
        if self._done:
            return
        self._done = True
        self._timer.stop()
        self.report = doc
        self.text.setPlainText(format_text(doc) + (f"\nIn the window: {self.in_use}" if self.in_use else ""))
        notice = doc.get("repack", {}).get("notice")
        self.status.setText(notice or "Copy this report into a bug report: it holds no personal data beyond "
                                      "folder paths.")
        self.copy_button.setEnabled(True)
        self.reportReady.emit(doc)

    def _fail(self, reason: str, details: str) -> None:
        if self._done:
            return
        self._done = True
        self._timer.stop()
        self.status.setText(f"Could not gather the system report: {reason}")
        self.text.setPlainText(f"Tandem {__version__}\nCould not gather the system report: {reason}\n{details}".strip()
                               + (f"\nIn the window: {self.in_use}" if self.in_use else ""))
        self.copy_button.setEnabled(True)
        self.reportFailed.emit(reason)

    @Slot()
    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.text.toPlainText())
        self.status.setText("Copied to the clipboard.")

    def done(self, result: int) -> None:
        if self.process.state() != QProcess.ProcessState.NotRunning:
            self._done = True
            self.process.kill()
            self.process.waitForFinished(2000)
        super().done(result)
