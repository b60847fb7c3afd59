"""Compare: the last user message answered with speculation off and on, side by side (chat.compare).

A non-modal dialog: it says which run is going, then shows both runs' time to first token, tokens per
second and total time, the speed-up measured in this compare, whether the texts are identical or where
they first differ and why, and each text. Nothing it shows is stored.
"""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QTextCursor
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QFrame, QGridLayout, QLabel, QPlainTextEdit, QPushButton,
                               QScrollArea, QSplitter, QTextEdit, QVBoxLayout, QWidget)

from desktop_app.chat.compare import CompareResult, CompareRun, marked, shown
from desktop_app.counts import count
from desktop_app.engine.explain import stopped_by
from desktop_app.engine.number_text import duration_text, rate_number, rate_text, share_text
from desktop_app.ui.sentence_label import SentenceLabel

ROWS = (("ttft", "Time to first token"), ("speed", "Tokens per second"), ("total", "Total time"),
        ("tokens", "Tokens"), ("prompt", "Prompt tokens read (the rest cached)"), ("drafts", "Drafts kept"),
        ("vs_off", "Speed-up over speculation off"), ("stop", "Stopped by"))
COLUMNS = ("off", "on")
TEXT_LINES = 12            # each reply's text shows at least this many lines, however long the notes above
NOT_DRAWN = ("Neither run is shown while it is written, so both can be faster than a reply in the chat, which "
             "the window draws as it streams: on 2 cores, a streamed reply ran at 0.87–0.90× the speed.")
# (measured: docs/window-cost.txt, scripts/window_render_cost.py)


def run_cells(run: CompareRun, off_tokens_per_s: float) -> dict[str, str]:
    """What the table shows of one run; its speed over the run with speculation off, measured in the same
    compare (each reply's own "× plain" in the panel is against a plain rate timed apart, and would set
    a third number beside these two), not for a run Stop cut short (its speed is of a part of a reply)."""
    s = run.stats
    cells = {"ttft": duration_text(s.ttft_s), "speed": rate_text(s.tokens_per_s),
             "total": duration_text(s.t_total_s), "tokens": str(s.n_tokens),
             "prompt": f"{s.n_prompt_evaluated} of {s.n_prompt_tokens}",
             "drafts": (f"{s.n_accepted} of {s.n_drafted}"        # (the per cent spaced as the panel's)
                        + (f" ({share_text(s.acceptance_rate)})" if s.acceptance_rate is not None else ""))
             if s.n_drafted else "–",
             "vs_off": f"{s.tokens_per_s / off_tokens_per_s:.2f}×" if off_tokens_per_s and run.finished else "–",
             "stop": stopped_by(s.stop_reason, "Max tokens", "the Stop button") or "–"}
    return cells


def first_token_note(result: CompareResult) -> str:
    """Why speculation's first token came later, where it did by half as much again: it comes at the end of
    the first round, after the drafts and their check, where plain decoding's comes after one pass (492 ms
    against 84, with both prompts read already, was left unexplained: a new user's try). "" otherwise, and
    where the first round drafted nothing (auto's never does; a lookup may find nothing to copy)."""
    on, off = result.on.stats, result.off.stats
    if not (result.on.first_gamma and on.n_tokens and off.ttft_s and on.ttft_s > 1.5 * off.ttft_s):
        return ""
    return (f" The first token took {duration_text(on.ttft_s)} with speculation against {duration_text(off.ttft_s)}: "
            f"it comes at the end of the first round, after its {count(result.on.first_gamma, 'draft')} and their "
            "check, where plain decoding's comes after one pass.")


def total_times(result: CompareResult) -> str:
    """The two runs' total times, called shorter or longer only for replies of one length: "shorter with
    speculation" was said of a sampled reply of 156 tokens against 343 at 1.01× the speed (a new user's
    try)."""
    on, off = result.on.stats, result.off.stats
    if on.n_tokens != off.n_tokens:
        return (f"total time {duration_text(on.t_total_s)} for {count(on.n_tokens, 'token')} against "
                f"{duration_text(off.t_total_s)} for {off.n_tokens}: replies of different lengths.")
    change = ("the same" if duration_text(on.t_total_s) == duration_text(off.t_total_s)
              else "shorter" if on.t_total_s < off.t_total_s else "longer")
    return (f"total time {duration_text(on.t_total_s)} against {duration_text(off.t_total_s)}, {change} "
            "with speculation.")


def spec_words(run: CompareRun, off_in_chat: bool = False) -> str:
    """The column's heading; `off_in_chat`: speculation is off in the chat, so the run with it uses the
    bar's last choice, and says so (it was used silently: a new user's try)."""
    spec = run.spec
    if not spec.speculating:
        return "Speculation off"
    if spec.auto:                # auto chooses the drafter round by round: the setting's drafter is only
        drafters = "draft model or prompt lookup" if spec.drafter == "model" else "prompt lookup"   # its offer
        done = run.stats.n_tokens and not run.stats.n_drafted
        how = f"auto: {drafters}, round by round{'; it drafted nothing' if done else ''}"
    else:
        how = f"{'draft model' if spec.drafter == 'model' else 'prompt lookup'}, γ = {spec.draft_max}"
    return f"Speculation on ({'off in the chat; its last setting: ' if off_in_chat else ''}{how})"


class CompareDialog(QDialog):
    """`stopRequested` asks the window to cancel the compare in progress."""

    stopRequested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Compare with and without speculation")
        self.setModal(False)
        screen = (parent.screen() if parent is not None else self.screen()).availableGeometry()
        self.resize(min(980, int(0.95 * screen.width())), min(860, int(0.9 * screen.height())))
        self.result: CompareResult | None = None
        self.running = False
        layout = QVBoxLayout(self)
        self.status = SentenceLabel()
        self.status.setObjectName("compareStatus")
        layout.addWidget(self.status)

        grid = QGridLayout()
        self.headers = {c: QLabel() for c in COLUMNS}
        for j, c in enumerate(COLUMNS, start=1):
            self.headers[c].setText(f"<b>Speculation {c}</b>")
            self.headers[c].setWordWrap(True)  # ("Speculation on (auto: draft model or prompt lookup, …; it drafted
            grid.addWidget(self.headers[c], 0, j)   # nothing)" on one line ran the dialog off a 1024-px screen)
        self.cells: dict[str, dict[str, QLabel]] = {}
        for i, (key, title) in enumerate(ROWS, start=1):
            grid.addWidget(QLabel(title), i, 0)
            self.cells[key] = {}
            for j, c in enumerate(COLUMNS, start=1):
                cell = self.cells[key][c] = QLabel("–")
                cell.setTextInteractionFlags(Qt.TextSelectableByMouse)
                grid.addWidget(cell, i, j)
        layout.addLayout(grid)

        self.speedup = SentenceLabel()
        self.speedup.setObjectName("compareSpeedup")
        self.verdict = QLabel()
        self.verdict.setObjectName("compareVerdict")
        self.verdict.setWordWrap(True)
        self.verdict.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.reason = QLabel()
        self.reason.setObjectName("compareReason")
        self.reason.setWordWrap(True)
        self.reason.setTextInteractionFlags(Qt.TextSelectableByMouse)
        # The notes scroll and the texts keep TEXT_LINES lines at least: three paragraphs of notes left the
        # two replies, what a user opens Compare to see, four lines each (a new user's try)
        notes = QWidget()
        notes_layout = QVBoxLayout(notes)
        notes_layout.setContentsMargins(0, 0, 0, 0)
        for w in (self.speedup, self.verdict, self.reason):
            notes_layout.addWidget(w)
        notes_layout.addStretch(1)
        self.notes = QScrollArea()
        self.notes.setWidgetResizable(True)
        self.notes.setFrameShape(QFrame.NoFrame)
        self.notes.setWidget(notes)

        texts = QWidget()
        grid_texts = QGridLayout(texts)
        grid_texts.setContentsMargins(0, 0, 0, 0)
        self.texts: dict[str, QPlainTextEdit] = {}
        for j, c in enumerate(COLUMNS):
            box = self.texts[c] = QPlainTextEdit()
            box.setReadOnly(True)
            box.setObjectName(f"compareText_{c}")
            box.setMinimumHeight(min(TEXT_LINES * box.fontMetrics().lineSpacing(), screen.height() // 4))
            grid_texts.addWidget(box, 0, j)
        self.split = QSplitter(Qt.Vertical)
        self.split.setChildrenCollapsible(False)
        self.split.addWidget(self.notes)
        self.split.addWidget(texts)
        layout.addWidget(self.split, 1)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.stop_button = QPushButton("Stop")
        self.stop_button.clicked.connect(self.stopRequested.emit)
        buttons.addButton(self.stop_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.close)
        layout.addWidget(buttons)
        self.start()

    # -- what the window tells it
    def start(self, off_in_chat: bool = False) -> None:
        """A compare has been asked for: clear the last one. `off_in_chat`: spec_words'."""
        self.off_in_chat = off_in_chat
        self.result = None
        self._off_rate = 0.0            # the run without speculation's tokens per second, once it ended
        self.running = True
        self.stop_button.setEnabled(True)
        self.status.setText("Starting the compare…")
        for row in self.cells.values():
            for cell in row.values():
                cell.setText("–")
        for w in (self.speedup, self.verdict, self.reason):
            w.setText("")
        for box in self.texts.values():
            box.setPlainText("")
            box.setExtraSelections([])

    def show_progress(self, what: str) -> None:
        self.status.setText(what)

    def show_run(self, run: CompareRun) -> None:
        """One run, as soon as it ends: its column's numbers and text (the "on" run's speed-up over the
        "off" run's, shown already)."""
        self.headers[run.label].setText(f"<b>{spec_words(run, self.off_in_chat)}</b>")
        self.texts[run.label].setPlainText(run.text)
        if run.finished or run.stats.n_tokens:   # (a run Stop cut short: what it wrote, its cells all "–"
            for key, text in run_cells(run, self._off_rate if run.label == "on" else run.stats.tokens_per_s).items():
                self.cells[key][run.label].setText(text)
            if run.label == "off":                # beside its text: a new user's try)
                self._off_rate = run.stats.tokens_per_s

    def show_failed(self, message: str) -> None:
        self.running = False
        self.stop_button.setEnabled(False)
        self.status.setText(f"The compare could not run: {message}")

    def show_result(self, result: CompareResult) -> None:
        self._show_result(result)
        self._fit_notes()

    def _show_result(self, result: CompareResult) -> None:
        self.result = result
        self.running = False
        self.stop_button.setEnabled(False)
        sampling = result.sampling
        how = ("greedy (temperature 0)" if sampling.greedy      # (sampled, neither is the chat's own reply)
               else f"sampled at temperature {sampling.temperature:g}, seed {sampling.seed} for both runs: "
                    "two new replies, not the one in the chat")
        self.status.setText(f"The last message answered twice, {how}, at most {result.max_tokens} tokens; "
                            f"nothing was stored. {NOT_DRAWN}" if not result.cancelled
                            else "Cancelled: what ran is shown; nothing was stored.")
        self._off_rate = 0.0
        for run in (result.off, result.on):
            self.show_run(run)
        if result.cancelled:
            return
        n = result.common
        if result.speedup is not None and n is not None:
            self.speedup.setText(f"Speed-up with speculation, measured in this compare: {result.speedup:.2f}× over the "
                                 f"first {n} tokens of each reply ({duration_text(result.on.seconds_to(n))} against "
                                 f"{duration_text(result.off.seconds_to(n))}: a pass slows as a reply grows, so replies "
                                 f"of different lengths are compared over the tokens they share). In all, "
                                 f"{rate_number(result.on.stats.tokens_per_s)} tok/s against "
                                 f"{rate_text(result.off.stats.tokens_per_s)}; {total_times(result)}"
                                 + (f" {result.caveat}" if result.caveat else "") + first_token_note(result))
            self.cells["vs_off"]["on"].setText(f"{result.speedup:.2f}× (first {n} tokens)")
        elif result.speedup is not None:
            self.speedup.setText(f"Speed-up with speculation, measured in this compare: {result.speedup:.2f}× "
                                 f"the tokens per second ({rate_number(result.on.stats.tokens_per_s)} against "
                                 f"{rate_text(result.off.stats.tokens_per_s)}); {total_times(result)}"
                                 + (f" {result.caveat}" if result.caveat else "") + first_token_note(result))
        if result.identical:
            self.verdict.setText(f"Identical texts: both runs wrote the same {count(len(result.on.tokens), 'token')}.")
            self.reason.setText("" if sampling.greedy else
                                "(Sampled texts agree only by chance or where the model is nearly certain: "
                                "the two runs spend their random draws differently.)")
            return
        d = result.first_difference
        self.verdict.setText(f"The texts first differ at token {d.position}: without speculation {shown(d.off_piece)}, "
                             f"with it {shown(d.on_piece)}." + (f"\nBefore it: “…{marked(d.before)}”" if d.before else "")
                             + f"\nThen, without: {_after(d.off_after)}"
                             f"\nThen, with: {_after(d.on_after)}")
        for c, run in (("off", result.off), ("on", result.on)):      # mark where each text parts
            _mark(self.texts[c], run.text_before(d.position))
        self.reason.setText(d.reason)

    def _fit_notes(self) -> None:
        """Give the notes the height they need, up to half the splitter and never into the texts' least (the
        dialog is shown empty, and a splitter keeps the sizes of its first layout: notes 68 px tall)."""
        total = sum(self.split.sizes())
        if not total:                           # (not laid out yet: showEvent fits them)
            return
        texts = self.split.widget(1).minimumSizeHint().height()
        need = self.notes.widget().heightForWidth(self.notes.viewport().width())
        notes = max(0, min(need if need > 0 else self.notes.widget().sizeHint().height(), total - texts, total // 2))
        self.split.setSizes([notes, total - notes])

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self._fit_notes()

    def closeEvent(self, event) -> None:
        if self.running:                  # closing stops a compare that is still going
            self.stopRequested.emit()
        super().closeEvent(event)



def _after(text: str) -> str:
    """A reply's text from where the two part, quoted, or that it ends there ("“…”" read as text left out,
    a new user's try)."""
    return f"“{marked(text)}…”" if text else "nothing more: the reply ends there"


def _mark(box: QPlainTextEdit, start: int) -> None:
    """Highlight a text box from character `start` to its end (where the two texts part)."""
    cursor = box.textCursor()
    cursor.setPosition(min(start, len(box.toPlainText())))
    cursor.movePosition(QTextCursor.End, QTextCursor.KeepAnchor)
    selection = QTextEdit.ExtraSelection()
    selection.cursor = cursor
    selection.format.setBackground(QColor(255, 230, 160))
    box.setExtraSelections([selection])
