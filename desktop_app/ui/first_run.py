"""What the window shows while no model is loaded: load the models already on this machine (the demo
pair, or a pair found in the models folders), fetch the demo pair, or pick files."""
from __future__ import annotations

import html
import os

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

# (the last sentence: a new user's try, where on a 2-core CPU auto left the demo pair's draft model unused,
# and drafting with it in every round ran at 0.68× plain, where this page had promised only a speed-up)
INTRO = ("Tandem chats with a model on this machine and tries to speed it up with a small draft model or by "
         "copying earlier text, showing every round and whether it pays here. On many CPUs the draft model "
         "makes replies slower: Auto (the default) then leaves it unused, and says why.")
DEMO_PAIR = "the demo pair — Qwen2.5-Coder 1.5B with a 0.5B draft"
FETCH_TOO = f"Or fetch {DEMO_PAIR}, 1.6 GB, fetched once — or choose other GGUF files."
LOAD_DEMO_TOO = f"Or load {DEMO_PAIR}, already on this machine — or choose other GGUF files."
FETCH = f" Start with {DEMO_PAIR}, 1.6 GB, fetched once — or choose GGUF files you already have."
LOAD_DEMO = f" Start with {DEMO_PAIR}, already on this machine — or choose GGUF files you already have."
FETCH_BUTTON, LOAD_DEMO_BUTTON = "Fetch the demo pair", "Load the demo pair (cached)"


class FirstRun(QWidget):
    """Shown while no model is loaded. With nothing on this machine: fetch the demo pair, or pick
    files; with the demo pair cached, or models found, a Load button for them comes first."""

    fetchRequested = Signal()
    pickRequested = Signal()
    loadRequested = Signal(str, object)      # target path, draft path or None

    def __init__(self, parent=None):
        super().__init__(parent)
        self.offered: tuple[str, str | None] | None = None
        layout = QVBoxLayout(self)
        layout.addStretch(1)
        title = QLabel("<h2>Welcome to Tandem</h2>")
        title.setAlignment(Qt.AlignCenter)
        self.text = QLabel(INTRO + FETCH)
        self.text.setObjectName("firstRunText")
        self.text.setWordWrap(True)
        self.text.setAlignment(Qt.AlignCenter)
        row = QHBoxLayout()
        self.load_button = QPushButton()
        self.load_button.setObjectName("loadFound")
        self.load_button.clicked.connect(self._load)
        self.load_button.hide()
        self.fetch_button = QPushButton(FETCH_BUTTON)
        self.fetch_button.setObjectName("fetchDemo")
        self.fetch_button.clicked.connect(self.fetchRequested)
        pick = self.pick_button = QPushButton("Choose GGUF files…")
        pick.clicked.connect(self.pickRequested)
        row.addStretch(1)
        row.addWidget(self.load_button)
        row.addWidget(self.fetch_button)
        row.addWidget(pick)
        row.addStretch(1)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.hide()
        self.status = QLabel("Getting the models ready… (a message you send meanwhile is sent once they are)")
        self.status.setObjectName("firstRunStatus")
        self.status.setAlignment(Qt.AlignCenter)
        self.status.hide()
        for w in (title, self.text):
            layout.addWidget(w)
        layout.addLayout(row)
        layout.addWidget(self.status)
        layout.addWidget(self.progress)
        layout.addStretch(2)

    def offer(self, target: str | None, draft: str | None = None, demo: bool = False, note: str = "",
              demo_here: bool = False) -> None:
        """Offer to load `target` (+ `draft`) directly: the cached demo pair (demo=True), or models found
        on this machine. With no target: today's page, fetch or choose. `note`: why a model chosen is
        not offered (ModelBar.loadable), said on the page (the demo pair's too: offered in its place).
        `demo_here`: the demo pair is cached, so the page offers to load it, not to fetch 1.6 GB (a
        pair that could not pair offered that: a new user's try)."""
        self.offered = (target, draft) if target else None
        self.fetch_button.setText(LOAD_DEMO_BUTTON if demo_here else FETCH_BUTTON)
        if not target:
            self.load_button.hide()
            self.fetch_button.show()
            self.fetch_button.setDefault(True)
            start = LOAD_DEMO if demo_here else FETCH
            self.text.setText(INTRO + start if not note else html.escape(INTRO) + "<br>"
                              + html.escape(f"{note}.", quote=False) + "<br>" + html.escape(start.strip()))
            return
        if demo:
            self.load_button.setText(LOAD_DEMO_BUTTON)
            why = f"<br>{html.escape(note, quote=False)}.<br>" if note else " "
            self.text.setText(html.escape(INTRO) + why + html.escape(f"{DEMO_PAIR[0].upper()}{DEMO_PAIR[1:]} — is "
                                                                     "already on this machine."))
        else:
            names = f"<b>{html.escape(os.path.basename(target))}</b>"
            if draft:
                names += f" with the draft <b>{html.escape(os.path.basename(draft))}</b>"
            self.load_button.setText("Load this pair" if draft else "Load this model")
            alone = f", alone ({html.escape(note, quote=False)})" if note else ""
            self.text.setText(html.escape(INTRO) + f"<br>Found on this machine: {names}{alone}.<br>"
                              + html.escape(LOAD_DEMO_TOO if demo_here else FETCH_TOO))
        self.load_button.setToolTip(target + (f"\n{draft}" if draft else ""))
        self.load_button.show()
        self.load_button.setDefault(True)
        self.fetch_button.setDefault(False)
        self.fetch_button.setVisible(not demo)

    def set_loading(self, loading: bool) -> None:
        """While models are fetched or loaded, nothing here can be started: the buttons rest, and the
        text says what is happening (the model bar shows the progress)."""
        for b in (self.load_button, self.fetch_button, self.pick_button):
            b.setEnabled(not loading)
        self.status.setVisible(loading)

    def _load(self) -> None:
        if self.offered:
            self.loadRequested.emit(*self.offered)
