"""One-line widgets that never ask for their text's width: where narrower than the text, they show a
shorter form of it when given some, else end it in "…"; text() is always the whole text (the reply
footer, the speculation bar's mode)."""
from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QLabel, QPushButton, QSizePolicy


class _Elided:
    """Mixin for a widget with setText/text (listed before the Qt class)."""

    def _init_elided(self) -> None:
        self._full, self._shorter = "", ()
        self.setSizePolicy(QSizePolicy.Ignored, self.sizePolicy().verticalPolicy())

    def setText(self, text: str, *shorter: str) -> None:
        """`shorter`: what to show instead where `text` does not fit, longest first (the last is cut
        where none fits)."""
        self._full, self._shorter = text, shorter
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
        forms = (self._full, *self._shorter)
        shown = [fm.elidedText(t, Qt.ElideRight, width) for t in forms]
        # (whole where the eliding itself leaves it whole: a text whose rounded advance just fits can
        # still be cut, as "Speculation: au…" was in a bar 121 px wide, where "auto" would have fit)
        super().setText(next((e for t, e in zip(forms, shown) if e == t), shown[-1]))


class ElidedLabel(_Elided, QLabel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self._init_elided()


class ElidedButton(_Elided, QPushButton):
    def __init__(self, parent=None):
        super().__init__(parent)
        self._init_elided()
