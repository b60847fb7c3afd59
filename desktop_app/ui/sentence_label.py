"""A word-wrapped label for sentences with rates in them, whose lines never break inside "tok/s".

Qt breaks a line after a slash (as in a path), so a sentence could end a line in "13.3 tok/" and start
the next with "s" (a new user's try). The label shows the unit with a word joiner (U+2060, no width,
no glyph) after the slash; text() is the text as given.
"""
from __future__ import annotations

from PySide6.QtWidgets import QLabel

UNIT, JOINED = "tok/s", "tok/\u2060s"


def unbroken(text: str) -> str:
    """`text` as shown: no line break inside "tok/s"."""
    return text.replace(UNIT, JOINED)


class SentenceLabel(QLabel):
    def __init__(self, text: str = "", parent=None):
        super().__init__(parent)
        self.setWordWrap(True)
        self.setText(text)

    def setText(self, text: str) -> None:
        self._text = text
        super().setText(unbroken(text))

    def text(self) -> str:
        return self._text
