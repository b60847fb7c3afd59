"""One-line widgets that never ask for their text's width: where narrower than the text, they show a
shorter form of it when given one, else end it in "…"; text() is always the whole text (the reply
footer, the speculation bar's mode)."""
from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QLabel, QPushButton, QSizePolicy


class _Elided:
    """Mixin for a widget with setText/text (listed before the Qt class)."""

    def _init_elided(self) -> None:
        self._full = self._short = ""
        self.setSizePolicy(QSizePolicy.Ignored, self.sizePolicy().verticalPolicy())

    def setText(self, text: str, short: str = "") -> None:
        """`short`: what to show instead where `text` does not fit (itself cut where it does not either)."""
        self._full, self._short = text, short
        self.setAccessibleName(text)                 # (Qt's own text() is the shown, elided one)
        self._elide()

    def text(self) -> str:
        return self._full

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._elide()

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.FontChange, QEvent.StyleChange):   # a style sheet's bold font, say
            self._elide()

    def _elide(self) -> None:
        fm, width = self.fontMetrics(), max(0, self.contentsRect().width() - 2)
        text = self._short if self._short and fm.horizontalAdvance(self._full) > width else self._full
        super().setText(fm.elidedText(text, Qt.ElideRight, width))


class ElidedLabel(_Elided, QLabel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self._init_elided()


class ElidedButton(_Elided, QPushButton):
    def __init__(self, parent=None):
        super().__init__(parent)
        self._init_elided()
