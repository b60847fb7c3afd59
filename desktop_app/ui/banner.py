"""The banner across the top of the chat: a message for the user, with up to two actions."""
from __future__ import annotations

from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton


class Banner(QFrame):
    """A message across the top of the chat, with up to two actions."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("banner")
        self.setFrameShape(QFrame.StyledPanel)
        row = QHBoxLayout(self)
        self.label = QLabel()
        self.label.setWordWrap(True)
        row.addWidget(self.label, 1)
        self.buttons = [QPushButton(), QPushButton()]
        self._callbacks = [None, None]
        for i, b in enumerate(self.buttons):
            b.clicked.connect(lambda _=False, i=i: self._clicked(i))
            row.addWidget(b)
        close = QPushButton("Dismiss")
        close.clicked.connect(self.hide)
        row.addWidget(close)
        self.hide()

    def show_message(self, text: str, actions: list[tuple[str, object]] = ()) -> None:
        self.label.setText(text)
        for i, button in enumerate(self.buttons):
            if i < len(actions):
                button.setText(actions[i][0])
                self._callbacks[i] = actions[i][1]
                button.show()
            else:
                self._callbacks[i] = None
                button.hide()
        self.show()

    def _clicked(self, i: int) -> None:
        callback = self._callbacks[i]
        self.hide()
        if callback is not None:
            callback()
