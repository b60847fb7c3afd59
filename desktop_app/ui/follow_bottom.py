"""Scrolling that follows the bottom of a growing view only while the user is there: scrolled up, the
view keeps its place; back at the bottom, it follows again (the chat and the round strip)."""
from __future__ import annotations

from PySide6.QtWidgets import QAbstractScrollArea


class FollowBottom:
    def __init__(self, view: QAbstractScrollArea, margin: int):
        self._bar = view.verticalScrollBar()
        self._margin = margin                    # pixels from the bottom that still count as there
        self.on = True
        self._bar.valueChanged.connect(self._on_scroll)
        self._bar.rangeChanged.connect(self._on_range)

    def _on_scroll(self, value: int) -> None:
        self.on = value >= self._bar.maximum() - self._margin

    def _on_range(self, _lo: int, hi: int) -> None:
        if self.on:
            self._bar.setValue(hi)
