"""A message's text in the conversation view: a read-only view as tall as its text, a reply's Markdown
rendered by Qt (code blocks shaded and coloured by Pygments, their line breaks kept), or a reply's
tokens coloured by where each came from, with a tooltip naming its round; a message as typed."""
from __future__ import annotations

from bisect import bisect_right

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QColor, QFontMetricsF, QPalette, QTextCharFormat, QTextCursor, QTextFormat
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextBrowser, QToolTip, QWidget

from desktop_app.chat.line_breaks import keep_line_breaks
from desktop_app.chat.token_origins import TokenOrigin, shown_positions
from desktop_app.engine.events import TokenKind
from desktop_app.ui.code_highlight import CodeHighlighter, code_language
from desktop_app.ui.round_strip import Colours

CODE_SHADE = {False: "#e3e5e8", True: "#2b2b2b"}    # a code block's background, light and dark
HANG = 4                                           # spaces a wrapped line of code goes on past its indentation
KIND_PROPERTY = QTextFormat.UserProperty + 1      # a highlighted token's kind (TokenKind value)
TOKEN_PROPERTY = QTextFormat.UserProperty + 2     # its place in the reply (keeps tokens apart as fragments)


def _dark(widget: QWidget) -> bool:
    return widget.palette().color(QPalette.Window).lightness() < 128


def _is_code(block) -> bool:
    """A line of a fenced or indented code block (Qt's Markdown keeps such lines unbroken)."""
    return block.isValid() and (block.blockFormat().nonBreakableLines() or code_language(block) is not None)


class MessageText(QTextBrowser):
    """A read-only view as tall as its text: Markdown (with a reply's tokens coloured by origin, when
    highlighted), or a message as typed. `clicked`: a click that selected nothing and opened no link."""

    clicked = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setFrameShape(QFrame.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAsNeeded)
        self.setOpenExternalLinks(True)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)
        self.viewport().setAutoFillBackground(False)
        self.setStyleSheet("QTextBrowser { background: transparent; }")
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self.dark = _dark(self)             # (as the palette is now: the style sheet makes it transparent)
        self.highlighter = CodeHighlighter(self.document(), self.dark)
        self.colours = Colours(self.dark)
        self._markdown: str | None = ""
        self._tip_starts: list[int] = []              # highlighted tokens: where each starts in the text,
        self._tip_spans: list[tuple[int, int, str]] = []   # and (start, end, tooltip)

    def mouseReleaseEvent(self, event) -> None:
        super().mouseReleaseEvent(event)
        if (event.button() == Qt.LeftButton and not self.textCursor().hasSelection()
                and not self.anchorAt(event.position().toPoint())):
            self.clicked.emit()

    def set_markdown(self, text: str) -> None:
        if text != self._markdown:
            self._markdown = text
            self._tip_starts, self._tip_spans = [], []
            self._render(text)

    def _render(self, text: str) -> None:
        """`text` as Markdown, its code blocks on a shade of their own with room after them, their long
        lines wrapped: a line wider than the chat would otherwise scroll the whole reply sideways. A
        wrapped line of code goes on HANG spaces past its own indentation (it went on at column 0, where
        it read as a line of its own, a new user's try), its spaces still in the text to copy. Its line
        breaks and indentation show as written (line_breaks.py)."""
        self.setMarkdown(keep_line_breaks(text))
        cursor = QTextCursor(self.document())
        cursor.beginEditBlock()
        block = self.document().begin()
        while block.isValid():
            fmt = block.blockFormat()
            if _is_code(block):
                fmt.setNonBreakableLines(False)
                fmt.setBackground(QColor(CODE_SHADE[self.dark]))
                line = block.text()
                hang = (len(line) - len(line.lstrip(" ")) + HANG) * QFontMetricsF(
                    block.begin().fragment().charFormat().font() if line else block.charFormat().font()
                ).horizontalAdvance(" ")
                fmt.setLeftMargin(fmt.leftMargin() + hang)
                fmt.setTextIndent(-hang)                    # (the first line starts where it did)
                if not _is_code(block.next()):
                    fmt.setBottomMargin(max(fmt.bottomMargin(), 8))
                cursor.setPosition(block.position())
                cursor.setBlockFormat(fmt)
            block = block.next()
        cursor.endEditBlock()

    @property
    def markdown(self) -> str:
        return self._markdown or ""

    def set_plain(self, text: str) -> None:
        """Show `text` as typed: every line break and space kept (a message's pasted code stays code)."""
        if self._markdown is not None or self.toPlainText() != text:
            self._markdown = None
            self._tip_starts, self._tip_spans = [], []
            self.setPlainText(text)

    # -- tokens coloured by origin
    def _format(self, o: TokenOrigin, n: int) -> QTextCharFormat:
        """The token's colour, tooltip and kind, merged into the Markdown's own formats."""
        fmt = QTextCharFormat()
        c = self.colours
        colour = {TokenKind.ACCEPTED: c.kept, TokenKind.CORRECTION: c.correction,
                  TokenKind.BONUS: c.bonus}.get(o.kind)
        if colour:
            fmt.setBackground(QColor(colour))
        fmt.setToolTip(o.tooltip)
        fmt.setProperty(KIND_PROPERTY, o.kind.value)
        fmt.setProperty(TOKEN_PROPERTY, n)
        return fmt

    def append_spans(self, spans: list[tuple[str, TokenOrigin | None]], first: int = 0) -> None:
        """While a reply streams: its tokens' pieces (numbered from `first`) appended as plain text, each
        on its colour. Rendering the Markdown afresh every few tokens (show_spans) would hold the window
        up on a long reply; it is rendered once the reply ends. first = 0 starts afresh."""
        if first == 0:
            self._markdown = None
            self._tip_starts, self._tip_spans = [], []
            self.document().clear()
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.End)
        for n, (piece, o) in enumerate(spans, first):
            start = cursor.position()
            cursor.insertText(piece, self._format(o, n) if o is not None else QTextCharFormat())
            if o is not None and piece:
                self._tip_starts.append(start)
                self._tip_spans.append((start, cursor.position(), o.tooltip))

    def show_spans(self, text: str, spans: list[tuple[str, TokenOrigin | None]]) -> None:
        """Show `text` as Markdown, each token's characters on its origin's colour. `spans`: the pieces
        of `text` in order, with their tokens (token_origins.align); characters the Markdown hides (a
        code fence, "**") have no colour to show."""
        self._markdown = None                             # (not plain Markdown: set_markdown renders afresh)
        self._tip_starts, self._tip_spans = [], []
        self._render(text)
        shown = self.toPlainText()
        where = shown_positions(text, shown)
        units = [0]                                       # where each character starts in the document,
        for ch in shown:                                  # which counts UTF-16 units
            units.append(units[-1] + (2 if ord(ch) > 0xFFFF else 1))
        cursor = QTextCursor(self.document())
        cursor.beginEditBlock()                           # (one layout for all the tokens' formats)
        start = 0
        for n, (piece, o) in enumerate(spans):
            at = [p for p in where[start:start + len(piece)] if p >= 0]
            start += len(piece)
            if o is None:
                continue
            fmt = self._format(o, n)
            while at:                                     # each run of consecutive shown characters
                k = 1
                while k < len(at) and at[k] == at[k - 1] + 1:
                    k += 1
                first, end = units[at[0]], units[at[k - 1] + 1]
                cursor.setPosition(first)
                cursor.setPosition(end, QTextCursor.KeepAnchor)
                cursor.mergeCharFormat(fmt)
                self._tip_starts.append(first)
                self._tip_spans.append((first, end, o.tooltip))
                at = at[k:]
        cursor.endEditBlock()

    def tooltip_at_position(self, position: int) -> str:
        """The tooltip of the highlighted token holding the character at `position` ("" if none)."""
        i = bisect_right(self._tip_starts, position) - 1
        if i >= 0:
            start, end, tip = self._tip_spans[i]
            if start <= position < end:
                return tip
        return ""

    def tooltip_at(self, point) -> str:
        """The tooltip of the highlighted token under a point of the viewport."""
        if not self._tip_spans:
            return ""
        cursor = self.cursorForPosition(point)
        position = cursor.position()
        if point.x() < self.cursorRect(cursor).x():        # the character left of the cursor
            position -= 1
        return self.tooltip_at_position(position)

    def viewportEvent(self, event) -> bool:
        if event.type() == QEvent.ToolTip and self._tip_spans:
            tip = self.tooltip_at(event.pos())
            if tip:
                QToolTip.showText(event.globalPos(), tip, self.viewport())
            else:
                QToolTip.hideText()
            return True
        return super().viewportEvent(event)

    def _fit(self, size) -> None:
        extra = self.horizontalScrollBar().sizeHint().height() if self.horizontalScrollBar().isVisible() else 0
        self.setFixedHeight(int(size.height()) + 2 * self.frameWidth() + 4 + extra)
