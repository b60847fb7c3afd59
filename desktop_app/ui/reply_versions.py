"""The "‹ 2/3 ›" beside the last reply once Regenerate has replaced it: the replies it replaced stay
in the history (HistoryStore.earlier_replies) until the reply to the next message starts, and the
arrows bring one back, so a regenerate loses nothing, and replies written with and without
speculation can be compared, each with its footer's speed."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QWidget

TIP = ("Regenerate keeps the replies it replaced. ‹ and › choose which one the conversation keeps, each "
       "with its footer's speed. Your next message goes on from the reply shown: once its reply starts, the "
       "others are deleted, as they are when you edit your message.")

REGENERATE_TIP = ("Write the last reply again (Ctrl+R); the reply it replaces is kept, behind ‹ ›. At temperature 0 "
                  "(greedy: Settings ▸ Temperature) the new reply is the same text, except where a near-tie parts "
                  "them")      # (an identical 2/2 came without a word: a new user's try)


EACH_AT_ITS_TIME = "Each speed is as measured when that reply was written: the machine may have been busier then."


class VersionSwitch(QWidget):
    """Which of a reply's versions is shown, of how many, and arrows to the one before and after."""

    step = Signal(int)               # -1: the version before, +1: the one after

    def __init__(self, parent=None):
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        self.back, self.label, self.on = QToolButton(), QLabel(), QToolButton()
        for button, text, step in ((self.back, "‹", -1), (self.on, "›", 1)):
            button.setText(text)
            button.setAutoRaise(True)
            font = button.font()                 # (at the text's size they were a hard target: a glance
            font.setPointSizeF(font.pointSizeF() * 1.4)    # at the window)
            font.setBold(True)
            button.setFont(font)
            button.clicked.connect(lambda _=False, s=step: self.step.emit(s))
        self.back.setToolTip("The version before this one (Alt+Left)")
        self.on.setToolTip("The version after this one (Alt+Right)")
        self.label.setToolTip(TIP)
        layout.addWidget(self.back)
        layout.addWidget(self.label)
        layout.addWidget(self.on)
        self.hide()

    def set_versions(self, index: int, count: int, enabled: bool = True, lines: list[str] = ()) -> None:
        """Version `index` (from 1, oldest first) of `count` is shown; hidden with fewer than two. The
        arrows are off while a reply is written (`enabled` False). `lines`: each version in a line
        (reply_footer.version_line), listed in the tooltip, so their speeds can be read together."""
        self.label.setText(f"{index}/{count}")
        listed = "\n".join(lines)
        self.label.setToolTip(f"{TIP}\n\n{listed}\n\n{EACH_AT_ITS_TIME}" if lines else TIP)
        self.back.setEnabled(enabled and index > 1)
        self.on.setEnabled(enabled and index < count)
        self.setVisible(count > 1)
