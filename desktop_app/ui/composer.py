"""Where the user writes: Enter sends, Shift+Enter starts a new line."""
from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import QPlainTextEdit, QSizePolicy


class Composer(QPlainTextEdit):
    submitted = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setPlaceholderText("Write a message — Enter sends, Shift+Enter for a new line")
        self.setTabChangesFocus(True)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)     # as tall as its text asks
        self.textChanged.connect(self.updateGeometry)

    LINES = (3, 7)               # it shows this many lines at least, and grows with its text up to the most

    def sizeHint(self) -> QSize:
        """Three lines, growing with the text to seven (then it scrolls): a box four buttons high took
        130 px that the chat lost at 1000×700 (a user's try)."""
        shown = int(self.document().size().height())    # lines as laid out, a long one wrapped (a plain
        lines = min(max(shown, self.LINES[0]), self.LINES[1])   # text document's height is in lines)
        margins = self.contentsMargins()
        height = lines * self.fontMetrics().lineSpacing() + 2 * self.document().documentMargin() \
            + margins.top() + margins.bottom()
        return QSize(super().sizeHint().width(), int(height))

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.updateGeometry()                            # narrower, the text wraps into more lines

    def keyPressEvent(self, event) -> None:
        if event.key() in (Qt.Key_Return, Qt.Key_Enter) and not (event.modifiers() & Qt.ShiftModifier):
            text = self.toPlainText().strip()
            if text:
                self.submitted.emit(text)
            return
        super().keyPressEvent(event)
