"""A value in the speculation panel's grid of numbers (spec_panel.py): one line, never wrapped, its
parts left out rather than a number cut."""
from __future__ import annotations

import re

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter, QPalette
from PySide6.QtWidgets import QSizePolicy, QWidget

_BREAKS = re.compile(r" (?=\()| (?=/ )")


class StatLabel(QWidget):
    """A value in the grid: one line, never wrapped; when too narrow, its last parts (a parenthesis, or
    what follows a "/") are left out, shown as "(…)" or "/ …", so a number is never cut or parted from
    its unit (a first part wider than the label alone ends in "…"); the full text is in the tooltip, above
    what the value means.
    A value may come with compact forms (setText's `compact`, longest first), shown before any part is
    left out: the plain rate a "× plain" is over, which "0.73× (…)" hid in a 1000-px window (a new
    user's try); parts are left out of the full form first, then of the compact ones.
    Its size never depends on its text, so a new value repaints the label alone (a QLabel would ask
    the whole panel to lay itself out again, several times a second)."""

    def __init__(self, text: str = "–", parent=None, explanation: str = ""):
        super().__init__(parent)
        self._text = text
        self._compact: tuple[str, ...] = ()
        self.explanation = explanation           # under the value in its tooltip (the row title's: the value
                                                 # alone, "1.00× (plain 9.19 tok/s)", explained nothing)
        self.setToolTip(explanation)
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)

    def text(self) -> str:
        return self._text

    def sizeHint(self) -> QSize:
        return QSize(80, self.fontMetrics().height() + 2)

    def minimumSizeHint(self) -> QSize:
        return QSize(0, self.fontMetrics().height() + 2)

    def shown_text(self) -> str:
        """What fits in the label's width: the text, or its first parts and "(…)" or "/ …"."""
        text, width = self._text, self.contentsRect().width()
        fm = self.fontMetrics()
        for shown in (text, *self._compact):
            if shown and fm.horizontalAdvance(shown) <= width:
                return shown
        firsts = []
        for form in (text, *self._compact):     # (the compact form's parts too: "270 + end in 85 r…" cut the
            if not form:                        # full form's first part where the compact's fitted whole)
                continue
            parts = _BREAKS.split(form)         # a number keeps its unit: parts end before "(" or "/ "
            while len(parts) > 1:
                dropped = parts.pop()
                # ("(…)" where a parenthesis was left out: "7 …" read as "7 or more", a new user's try)
                shown = " ".join(parts) + (" (…)" if dropped.startswith("(") else " / …")
                if fm.horizontalAdvance(shown) <= width:
                    return shown
            firsts.append(parts[0])
        first = min(firsts, key=fm.horizontalAdvance)          # (a part that does not fit alone ends in "…")
        return first if fm.horizontalAdvance(first) <= width else fm.elidedText(first, Qt.ElideRight, width)

    def setText(self, text: str, *compact: str) -> None:
        """`compact`: shorter forms of the same value, longest first, each shown where the ones before
        it do not fit ("" for none)."""
        if (text, compact) != (self._text, self._compact):
            self._text, self._compact = text, compact
            self.setToolTip("\n\n".join(part for part in (text if text != "–" else "", self.explanation) if part))
            self.update()

    def paintEvent(self, _event) -> None:
        painter = QPainter(self)
        painter.setPen(self.palette().color(QPalette.WindowText))
        painter.drawText(self.contentsRect(), Qt.AlignLeft | Qt.AlignVCenter, self.shown_text())
