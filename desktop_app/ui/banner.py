"""The banner across the top of the chat: a message for the user, with up to three actions."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPushButton, QVBoxLayout

from desktop_app.ui.sentence_label import SentenceLabel

ACTIONS_MAX = 3      # (a conversation of which only the last message fits: leave out, new, a larger context)


class Banner(QFrame):
    """A message across the top of the chat, with up to ACTIONS_MAX actions."""

    hidden = Signal()        # it was hidden, however (Dismiss, an action, the window)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("banner")
        self.setFrameShape(QFrame.StyledPanel)
        column = QVBoxLayout(self)                # the text above its buttons: a narrow chat still reads it
        column.setContentsMargins(8, 4, 8, 4)
        column.setSpacing(2)
        self.label = SentenceLabel()
        column.addWidget(self.label)
        row = QHBoxLayout()
        row.addStretch(1)
        column.addLayout(row)
        self.buttons = [QPushButton() for _ in range(ACTIONS_MAX)]
        self._callbacks = [None] * ACTIONS_MAX
        for i, b in enumerate(self.buttons):
            b.clicked.connect(lambda _=False, i=i: self._clicked(i))
            row.addWidget(b)
        self.close_button = QPushButton("Dismiss")
        self.close_button.clicked.connect(self.hide)
        row.addWidget(self.close_button)
        for b in (*self.buttons, self.close_button):     # a click leaves the focus where it was (the message
            b.setFocusPolicy(Qt.TabFocus)                # box: after Dismiss, typing went nowhere); Tab reaches them
        self.about: int | None = None
        self.kind = ""                            # what the message is, for those who must know it is theirs
        self._stays = [False] * ACTIONS_MAX
        self.hide()

    def setVisible(self, visible: bool) -> None:
        super().setVisible(visible)
        if not visible:
            self.hidden.emit()

    def conversation_opened(self, conversation_id: int | None) -> None:
        """Another conversation is shown: a message about the one before goes."""
        if self.about is not None and self.about != conversation_id:
            self.hide()

    def show_message(self, text: str, actions: list[tuple] = (), about: int | None = None,
                     dismiss: bool = True, kind: str = "") -> None:
        """`actions`: (label, callback), or (label, callback, True) for one after which the message
        stays (it says what the action is for: "Edit the message" beside how long it may be).
        `about`: the conversation the message is about (it goes when another is opened); None: the app.
        `dismiss`: whether it has a Dismiss button (not where an action is the way out: "Cancel edit").
        `kind`: a name for the message, read back as Banner.kind while it shows."""
        self.about = about
        self.kind = kind
        self.label.setText(text)
        for i, button in enumerate(self.buttons):
            if i < len(actions):
                button.setText(actions[i][0])
                self._callbacks[i] = actions[i][1]
                self._stays[i] = len(actions[i]) > 2 and actions[i][2]
                button.show()
            else:
                self._callbacks[i] = None
                button.hide()
        self.close_button.setVisible(dismiss)
        self.show()

    def _clicked(self, i: int) -> None:
        callback = self._callbacks[i]
        if not self._stays[i]:
            self.hide()
        if callback is not None:
            callback()
