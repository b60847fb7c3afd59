"""The model bar's Pairs menu: the demo pair, the pairs loaded before, and the models folders added to
the lists (one can be added, and each added one taken off again: a folder added by mistake stayed in
the lists for good, and only an edit of the settings file took it off)."""
from __future__ import annotations

import os

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QMenu

REMOVE_FOLDERS = "Remove a models folder"
REMOVE_TIP = "Its files are no longer listed; nothing is deleted"


class PairsMenu(QMenu):
    demoRequested = Signal()
    loadRequested = Signal(str, object)     # target path, draft path or None
    addFolderRequested = Signal()
    folderRemoved = Signal(str)

    def fill(self, recent_pairs: list[dict], demo_available: bool, demo_pair: tuple[str, str | None] | None,
             folders: list[str]) -> None:
        """`demo_pair`: the demo pair's paths, which its own entry loads (a recent pair equal to it is not
        listed again); `folders`: the models folders added."""
        self.clear()
        demo = self.addAction("Demo pair: Qwen2.5-Coder 1.5B + 0.5B" + ("" if demo_available else " (fetch 1.6 GB)"))
        demo.triggered.connect(self.demoRequested)
        self.addAction("Add a models folder…").triggered.connect(self.addFolderRequested)
        if folders:
            remove = self.addMenu(REMOVE_FOLDERS)
            remove.setToolTipsVisible(True)
            for folder in folders:
                action = remove.addAction(folder)
                action.setToolTip(REMOVE_TIP)
                action.triggered.connect(lambda _=False, f=folder: self.folderRemoved.emit(f))
        recent_pairs = [p for p in recent_pairs if (p.get("target"), p.get("draft")) != demo_pair]
        if recent_pairs:
            self.addSeparator()
        for pair in recent_pairs:
            t, d = pair.get("target"), pair.get("draft")
            action = self.addAction(os.path.basename(t) + (f" + {os.path.basename(d)}" if d else ""))
            action.triggered.connect(lambda _=False, t=t, d=d: self.loadRequested.emit(t, d))
