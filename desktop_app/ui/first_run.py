"""What the window shows while no model is loaded: fetch the demo pair, or pick files."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget


class FirstRun(QWidget):
    """Shown while no model is loaded: fetch the demo pair, or pick files."""

    fetchRequested = Signal()
    pickRequested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.addStretch(1)
        title = QLabel("<h2>Welcome to Tandem</h2>")
        title.setAlignment(Qt.AlignCenter)
        text = QLabel("Tandem chats with a model on this machine and speeds it up with a small draft model, "
                      "showing every round. Start with the demo pair — Qwen2.5-Coder 1.5B with a 0.5B draft, "
                      "1.6 GB, fetched once — or choose GGUF files you already have.")
        text.setWordWrap(True)
        text.setAlignment(Qt.AlignCenter)
        row = QHBoxLayout()
        self.fetch_button = QPushButton("Fetch the demo pair")
        self.fetch_button.setObjectName("fetchDemo")
        self.fetch_button.clicked.connect(self.fetchRequested)
        pick = QPushButton("Choose GGUF files…")
        pick.clicked.connect(self.pickRequested)
        row.addStretch(1)
        row.addWidget(self.fetch_button)
        row.addWidget(pick)
        row.addStretch(1)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.hide()
        for w in (title, text):
            layout.addWidget(w)
        layout.addLayout(row)
        layout.addWidget(self.progress)
        layout.addStretch(2)
