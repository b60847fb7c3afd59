"""The round strip: every round of a reply, one row each, in a virtualised list (QListView over a
QAbstractListModel of RoundEvents, painted by a delegate), so a long reply costs no more to show than
the rows on screen.

A row: "#N drafter γ", then one chip per token — kept drafts (green), the first rejected draft (red,
struck), drafts after it (grey, struck: discarded, never judged), the target's own token (orange: a
correction; blue: a bonus; grey-blue: a plain step) — and an end marker when the reply ended there.
Whitespace is shown (space ·, newline ⏎, tab ⇥) and special tokens read as names (<|im_end|> → im_end
in italic small capitals). Hovering a chip tells q, p and min(1, p/q), or the target token's kind.
From the keyboard (Tab to the strip), the row in focus is outlined, the arrow keys move it and Enter
or Space shows what hovering its label and chips would.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from PySide6.QtCore import QAbstractListModel, QEvent, QItemSelectionModel, QModelIndex, QPoint, QRect, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPalette, QPen
from PySide6.QtWidgets import QAbstractItemView, QListView, QStyle, QStyledItemDelegate, QToolTip

from desktop_app.engine.events import RoundEvent
from desktop_app.engine.number_text import duration_text
from desktop_app.ui.follow_bottom import FollowBottom

# -- what a row shows (no Qt: tests and other views can use it)

KEPT, REJECTED, DISCARDED = "kept", "rejected", "discarded"
CORRECTION, BONUS, PLAIN, END = "correction", "bonus", "plain", "end"
DRAFT_KINDS = (KEPT, REJECTED, DISCARDED)
TARGET_KINDS = (CORRECTION, BONUS, PLAIN)
DRAFTER_NAMES = {"model": "draft model", "lookup": "lookup"}
MAX_CHIP_CHARS = 18
ENDS = {"eos": ("eos", "an end-of-generation token"), "max_tokens": ("max tokens", "the token limit (max tokens)"),
        "stop_string": ("stop string", "a stop string (one set in Settings, or a model without a chat template "
                                       "starting the user's next turn)"),
        "cancelled": ("stopped", "you stopped it"), "context_full": ("context full", "the context was full")}
# (RoundEvent.end: name, why)


def end_name(r: RoundEvent, why: bool = False) -> str:
    """How the strip names the end a round carries (RoundEvent.end), or with `why`, says why it came."""
    return ENDS.get(r.end, (r.end, r.end))[why]

_SPECIAL = re.compile(r"^<(\|[^|<>\s]{1,40}\||/?s|[a-z_]{2,24})>$")
_TARGET_TIPS = {CORRECTION: "the target's token in place of the first rejected draft",
                BONUS: "the target's extra token: every draft was kept",
                PLAIN: "a plain step: the target's token, nothing drafted"}


@dataclass(frozen=True)
class Chip:
    kind: str            # kept, rejected, discarded, correction, bonus, plain, end
    text: str            # the token's text as the model spells it ("" for the end marker)
    tip: str


def drafter_label(r: RoundEvent) -> str:
    """What drafted this round: "draft model", "lookup", or "plain" (nothing drafted)."""
    return DRAFTER_NAMES.get(r.drafter, r.drafter) if r.gamma else "plain"


def row_label(r: RoundEvent) -> str:
    return f"#{r.index + 1} {drafter_label(r)}" + (f" γ{r.gamma}" if r.gamma else "")


def round_tip(r: RoundEvent) -> str:
    """The row label's tooltip: the round's drafter, γ, kept count and timing."""
    what = (f"{drafter_label(r)} drafted {r.gamma}, the target kept {r.accepted}" if r.gamma
            else "plain step: nothing drafted")
    return (f"round {r.index + 1}: {what}\ndraft {duration_text(r.t_draft_s)} + verify {duration_text(r.t_verify_s)}, "
            f"{r.n_past} tokens of context before it" + (f"\nthe reply ended here ({end_name(r)})" if r.end else ""))


def is_special(text: str) -> bool:
    return bool(_SPECIAL.match(text))


def visible(text: str) -> str:
    """A token's text as a chip shows it: whitespace made visible, special tokens by name."""
    if is_special(text):
        return text.strip("<>|/") or text
    shown = text.replace(" ", "·").replace("\n", "⏎").replace("\t", "⇥").replace("\r", "↵")
    if not shown:
        return "∅"
    return shown if len(shown) <= MAX_CHIP_CHARS else shown[:MAX_CHIP_CHARS - 1] + "…"


def _draft_tip(r: RoundEvent, i: int, kind: str) -> str:
    head = f"draft {i + 1} of {r.gamma} ({drafter_label(r)}): {r.drafted_text[i]!r} — {kind}"
    if kind == DISCARDED:
        head += " (after the first rejection: discarded, not judged)"
    if i < len(r.q) and i < len(r.p):
        q, p = r.q[i], r.p[i]
        ratio = min(1.0, p / q) if q > 0 else 1.0
        head += f"\nq = {q:.3f} (draft), p = {p:.3f} (target), min(1, p/q) = {ratio:.3f}"
    return head


def round_chips(r: RoundEvent) -> list[Chip]:
    """The chips of one round, in order: its drafts (kept, the first rejected, discarded), the target's
    token when the round got that far, and the end marker when the reply ended in it."""
    chips = []
    for i, text in enumerate(r.drafted_text):
        kind = KEPT if i < r.accepted else REJECTED if i == r.accepted else DISCARDED
        chips.append(Chip(kind, text, _draft_tip(r, i, kind)))
    if len(r.emitted_text) > r.accepted:
        kind = r.kinds[r.accepted].value if len(r.kinds) > r.accepted else PLAIN
        text = r.emitted_text[r.accepted]
        chips.append(Chip(kind, text, f"{kind}: {text!r} — {_TARGET_TIPS.get(kind, kind)}"))
    if r.end:
        chips.append(Chip(END, "", f"the reply ended here: {end_name(r, why=True)}"))
    return chips


def row_tip(r: RoundEvent) -> str:
    """A whole row's tooltip, for the keyboard: the label's, then each chip's on a line of its own."""
    return round_tip(r) + "".join("\n" + c.tip.replace("\n", "; ") for c in round_chips(r) if c.kind != END)


# -- the model

class RoundListModel(QAbstractListModel):
    RoundRole = Qt.UserRole + 1

    def __init__(self, parent=None):
        super().__init__(parent)
        self._rounds: list[RoundEvent] = []

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._rounds)

    def data(self, index, role=Qt.DisplayRole):
        if not index.isValid() or not 0 <= index.row() < len(self._rounds):
            return None
        r = self._rounds[index.row()]
        if role == self.RoundRole:
            return r
        if role == Qt.DisplayRole:
            return row_label(r) + "  " + " ".join(visible(c.text) if c.kind != END else f"[{end_name(r)}]"
                                                   for c in round_chips(r))
        return None

    def round(self, row: int) -> RoundEvent:
        return self._rounds[row]

    @property
    def rounds(self) -> list[RoundEvent]:
        return list(self._rounds)

    def append(self, rounds: list[RoundEvent]) -> None:
        if not rounds:
            return
        n = len(self._rounds)
        self.beginInsertRows(QModelIndex(), n, n + len(rounds) - 1)
        self._rounds.extend(rounds)
        self.endInsertRows()

    def replace_last(self, r: RoundEvent) -> None:
        if self._rounds:
            self._rounds[-1] = r
            index = self.index(len(self._rounds) - 1)
            self.dataChanged.emit(index, index)

    def set_rounds(self, rounds: list[RoundEvent]) -> None:
        self.beginResetModel()
        self._rounds = list(rounds)
        self.endResetModel()


# -- painting

class Colours:
    def __init__(self, dark: bool):
        if dark:
            self.kept, self.rejected, self.correction, self.bonus, self.plain = (
                "#1f5130", "#6b2228", "#6b4a12", "#1c4a8c", "#34435a")
            self.discarded, self.discarded_text, self.label = "#2e2e2e", "#8a8a8a", "#9a9a9a"
        else:
            self.kept, self.rejected, self.correction, self.bonus, self.plain = (
                "#c8efd2", "#f6c6c9", "#fbe0b5", "#b3cef9", "#dde3ec")   # (bonus bluer: beside
                                                                               # plain it read alike, a user's try)
            self.discarded, self.discarded_text, self.label = "#eeeeee", "#8a8a8a", "#808080"

    def background(self, kind: str) -> str:
        return {KEPT: self.kept, REJECTED: self.rejected, DISCARDED: self.discarded, CORRECTION: self.correction,
                BONUS: self.bonus, PLAIN: self.plain}.get(kind, self.plain)

    def legend_html(self) -> str:
        def chip(kind, text, struck=False, colour=""):
            text = text.replace(" ", "&nbsp;")        # a chip wraps whole or not at all
            body = f"<s>&nbsp;{text}&nbsp;</s>" if struck else f"&nbsp;{text}&nbsp;"
            style = f"background:{self.background(kind)}" + (f";color:{colour}" if colour else "")
            return f'<span style="{style}">{body}</span>'
        return " ".join([chip(KEPT, "kept"), chip(REJECTED, "rejected", True),   # ("kept draft" wrapped "■ end"
                                                                                   # onto a line of its own at
                                                                                   # 1366 and 1280 px: a user's try)
                         chip(DISCARDED, "discarded", True, self.discarded_text),
                         chip(CORRECTION, "correction"), chip(BONUS, "bonus"), chip(PLAIN, "plain"),
                         '<span style="border:1px solid gray">&nbsp;■&nbsp;end&nbsp;</span>'])   # (one word: never parted)


@dataclass
class _Item:
    rect: QRect
    text: str
    kind: str            # "label" or a chip kind
    tip: str = ""
    special: bool = False


class RoundDelegate(QStyledItemDelegate):
    PAD_X, PAD_Y, GAP, MARGIN = 3, 1, 3, 4

    def __init__(self, view: QListView, colours: Colours):
        super().__init__(view)
        self._view = view
        self.colours = colours
        self._sizes: dict[int, tuple[int, QSize]] = {}     # row -> (width, size)

    def forget_sizes(self) -> None:
        self._sizes.clear()

    def _fonts(self, option_font: QFont) -> tuple[QFont, QFont]:
        special = QFont(option_font)
        special.setItalic(True)
        special.setCapitalization(QFont.SmallCaps)
        return option_font, special

    def layout(self, r: RoundEvent, rect: QRect, font: QFont) -> tuple[list[_Item], int]:
        """Where the label and each chip go in a row of this width (chips wrap): items and height."""
        plain_font, special_font = self._fonts(font)
        fm, sfm = QFontMetrics(plain_font), QFontMetrics(special_font)
        line_h = fm.height() + 2 * self.PAD_Y
        left, right = rect.left() + self.MARGIN, rect.right() - self.MARGIN
        x, y = left, rect.top() + 2
        items = []
        label = row_label(r)
        entries = [("label", label, round_tip(r), False)]
        for c in round_chips(r):
            if c.kind == END:
                entries.append((END, "■ " + end_name(r), c.tip, False))
            else:
                entries.append((c.kind, visible(c.text), c.tip, is_special(c.text)))
        indent = left
        for kind, text, tip, special in entries:
            metrics = sfm if special else fm
            w = metrics.horizontalAdvance(text) + (0 if kind == "label" else 2 * self.PAD_X)
            if x > indent and x + w > right:
                x, y = indent, y + line_h + 2
            items.append(_Item(QRect(x, y, w, line_h), text, kind, tip, special))
            x += w + (2 * self.GAP if kind == "label" else self.GAP)
            if kind == "label" and x + 60 < right:
                indent = x                       # wrapped chips line up after the label
        return items, y + line_h + 2 - rect.top()

    def _width(self) -> int:
        return max(120, self._view.viewport().width())

    def line_height(self, font: QFont) -> int:
        """The height of a row whose chips fit on one line (as layout() gives it, plus sizeHint's 1)."""
        return QFontMetrics(font).height() + 2 * self.PAD_Y + 5

    def sizeHint(self, option, index) -> QSize:
        row, width = index.row(), self._width()
        cached = self._sizes.get(row)
        if cached and cached[0] == width:
            return cached[1]
        r = index.data(RoundListModel.RoundRole)
        _, h = self.layout(r, QRect(0, 0, width, 1000), option.font)
        size = QSize(width, h + 1)
        self._sizes[row] = (width, size)
        return size

    def paint(self, painter, option, index) -> None:
        r = index.data(RoundListModel.RoundRole)
        if r is None:
            return
        plain_font, special_font = self._fonts(option.font)
        items, _ = self.layout(r, option.rect, option.font)
        c = self.colours
        text_colour = option.palette.color(QPalette.Text)
        painter.save()
        for item in items:
            if item.kind == "label":
                painter.setFont(plain_font)
                painter.setPen(QColor(c.label))
                painter.drawText(item.rect, Qt.AlignLeft | Qt.AlignVCenter, item.text)
                continue
            painter.setFont(special_font if item.special else plain_font)
            if item.kind == END:
                painter.setPen(QPen(QColor(c.label)))
                painter.setBrush(Qt.NoBrush)
                painter.drawRoundedRect(item.rect.adjusted(0, 0, -1, -1), 3, 3)
                painter.drawText(item.rect, Qt.AlignCenter, item.text)
                continue
            painter.setPen(Qt.NoPen)
            painter.setBrush(QColor(c.background(item.kind)))
            painter.drawRoundedRect(item.rect, 3, 3)
            painter.setPen(QColor(c.discarded_text) if item.kind == DISCARDED else text_colour)
            painter.drawText(item.rect, Qt.AlignCenter, item.text)
            if item.kind in (REJECTED, DISCARDED):
                mid = item.rect.center().y() + 1
                painter.drawLine(item.rect.left() + 2, mid, item.rect.right() - 2, mid)
        if option.state & QStyle.State_HasFocus:          # (the keyboard's row: no selection shows it)
            painter.setPen(QPen(option.palette.color(QPalette.Highlight), 1))
            painter.setBrush(Qt.NoBrush)
            painter.drawRoundedRect(option.rect.adjusted(1, 0, -2, -1), 3, 3)
        painter.restore()

    def tooltip_at(self, index, rect: QRect, pos: QPoint, font: QFont) -> str:
        r = index.data(RoundListModel.RoundRole)
        if r is None:
            return ""
        for item in self.layout(r, rect, font)[0]:
            if item.rect.contains(pos):
                return item.tip
        return ""

    def helpEvent(self, event, view, option, index) -> bool:
        if event.type() == QEvent.ToolTip and index.isValid():
            tip = self.tooltip_at(index, option.rect, event.pos(), option.font)
            if tip:
                QToolTip.showText(event.globalPos(), tip, view)
            else:
                QToolTip.hideText()
                event.ignore()
            return True
        return super().helpEvent(event, view, option, index)


class RoundStrip(QListView):
    """The view: rows appended at the bottom, followed while the user is at the bottom. It never
    shrinks below MIN_ROWS one-line rows: in a short window the panel scrolls instead (the charts
    below it left it three at 1000×700)."""

    MIN_ROWS = 5

    def __init__(self, colours: Colours, parent=None):
        super().__init__(parent)
        self.setObjectName("roundStrip")
        self.round_model = RoundListModel(self)
        self.setModel(self.round_model)
        self.round_delegate = RoundDelegate(self, colours)
        self.setItemDelegate(self.round_delegate)
        self.setSelectionMode(QAbstractItemView.NoSelection)
        self.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.setVerticalScrollMode(QAbstractItemView.ScrollPerPixel)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setResizeMode(QListView.Adjust)
        self.setLayoutMode(QListView.Batched)
        self.setBatchSize(200)
        self.setUniformItemSizes(False)
        self.setMouseTracking(True)
        self._follow = FollowBottom(self, margin=4)
        self._fit_rows()

    def _fit_rows(self) -> None:
        self.setMinimumHeight(self.MIN_ROWS * self.round_delegate.line_height(self.font()) + 2 * self.frameWidth())

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.FontChange:           # (a new system or app font: rows of its height)
            self.round_delegate.forget_sizes()
            self._fit_rows()

    @property
    def following(self) -> bool:
        return self._follow.on

    def focusInEvent(self, event) -> None:
        """From the keyboard, the focus lands on the last row in sight, not on the first row (Qt's
        choice: out of sight in a long reply, and the next arrow key scrolled to the top)."""
        rows = self.round_model.rowCount()
        if not self.currentIndex().isValid() and rows and event.reason() != Qt.MouseFocusReason:
            index = self.indexAt(QPoint(self.viewport().width() // 2, self.viewport().height() - 2))
            if not index.isValid():                       # (rows end above the bottom: the last)
                index = self.round_model.index(rows - 1)
            self.selectionModel().setCurrentIndex(index, QItemSelectionModel.NoUpdate)
        super().focusInEvent(event)

    def keyPressEvent(self, event) -> None:
        index = self.currentIndex()
        if event.key() in (Qt.Key_Return, Qt.Key_Enter, Qt.Key_Space) and index.isValid():
            rect = self.visualRect(index)
            QToolTip.showText(self.viewport().mapToGlobal(rect.bottomLeft()),
                              row_tip(self.round_model.round(index.row())), self.viewport(), rect)
            return
        super().keyPressEvent(event)

    def resizeEvent(self, event) -> None:
        self.round_delegate.forget_sizes()
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self.scheduleDelayedItemsLayout()   # (QListView lays its rows out again only when its height
            # changes, flowing top to bottom: narrower, rows wrapped onto more lines were drawn over the
            # next one, e.g. as the panel's own scroll bar appeared after a restart; a new user's try)

    # -- content
    def append(self, rounds: list[RoundEvent]) -> None:
        self.round_model.append(rounds)
        if self.hasFocus() and not self.currentIndex().isValid() and rounds:   # (focused before any round:
            self.selectionModel().setCurrentIndex(self.round_model.index(self.round_model.rowCount() - 1),
                                                  QItemSelectionModel.NoUpdate)   # the next arrow key went to the top)

    def set_rounds(self, rounds: list[RoundEvent]) -> None:
        self.round_delegate.forget_sizes()
        self._follow.on = True
        self.round_model.set_rounds(rounds)
        self.scrollToBottom()

    def clear(self) -> None:
        self.set_rounds([])

    def end_last(self, r: RoundEvent) -> None:
        """Show the last round as `r`: the same round, marked as where the reply ended."""
        self.round_delegate.forget_sizes()
        self.round_model.replace_last(r)
        self.scheduleDelayedItemsLayout()              # (the mark may take a line of its own)

    def chips(self, row: int) -> list[Chip]:
        return round_chips(self.round_model.round(row))

    def label(self, row: int) -> str:
        return row_label(self.round_model.round(row))

    def tooltip_at(self, row: int, pos: QPoint) -> str:
        """The tooltip hovering at `pos` (viewport coordinates) in this row would show."""
        index = self.round_model.index(row)
        return self.round_delegate.tooltip_at(index, self.visualRect(index), pos, self.font())

    def chip_rects(self, row: int) -> list[tuple[QRect, str]]:
        """Where each chip of a row is painted (viewport coordinates), with its kind."""
        index = self.round_model.index(row)
        items, _ = self.round_delegate.layout(self.round_model.round(row), self.visualRect(index), self.font())
        return [(i.rect, i.kind) for i in items if i.kind != "label"]
