"""A word-wrapped label for sentences with rates in them, whose lines never break inside "tok/s".

Qt breaks a line after a slash (as in a path), so a sentence could end a line in "13.3 tok/" and start
the next with "s" (a new user's try). The label shows the unit with a word joiner (U+2060, no width,
no glyph) after the slash; text() is the text as given.

A text may come with a brief form (setText's `brief`): the label then shows it and a "more ▸" link,
which unfolds the whole text (and "less ▴" folds it again). Unfolded once, it stays unfolded for the
texts that follow, until folded again.
"""
from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

UNIT, JOINED = "tok/s", "tok/\u2060s"
MORE, LESS = "more ▸", "less ▴"


def unbroken(text: str) -> str:
    """`text` as shown: no line break inside "tok/s"."""
    return text.replace(UNIT, JOINED)


class SentenceLabel(QLabel):
    def __init__(self, text: str = "", parent=None):
        super().__init__(parent)
        self.setWordWrap(True)
        self.unfolded = False
        self._brief = ""
        self.linkActivated.connect(self._fold)
        self.setText(text)

    def setText(self, text: str, brief: str = "") -> None:
        """`brief`: a shorter form to show until the user asks for the whole ("" or `text`: none)."""
        self._text, self._brief = text, (brief if brief != text else "")
        self._show()

    def text(self) -> str:
        return self._text

    def shown(self) -> str:
        """The text as the label shows it now: the brief form and its link, or the whole (and "less")."""
        if not self._brief:
            return self._text
        return f"{self._text} {LESS}" if self.unfolded else f"{self._brief} {MORE}"

    def _fold(self, link: str) -> None:
        self.unfolded = link == "more"
        self._show()

    def _show(self) -> None:
        # (a Tab stop only while it has a link, whose focus shows: Tab stopped on the bare sentence)
        self.setTextInteractionFlags(Qt.LinksAccessibleByMouse | Qt.LinksAccessibleByKeyboard if self._brief
                                     else Qt.NoTextInteraction)
        if self._brief:                # (by Tab alone: a click on the link took the focus from the message box)
            self.setFocusPolicy(Qt.TabFocus)
        if not self._brief:
            self.setTextFormat(Qt.PlainText)
            super().setText(unbroken(self._text))
            return
        shown, link, word = (self._text, "less", LESS) if self.unfolded else (self._brief, "more", MORE)
        self.setTextFormat(Qt.RichText)
        super().setText(f'{html.escape(unbroken(shown))} <a href="{link}">{word}</a>')
