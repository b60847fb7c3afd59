"""The conversation view: one block per message, Markdown rendered by Qt, streaming without flicker
and without stealing the scroll position from a user who scrolled up."""
from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (QFrame, QHBoxLayout, QLabel, QPushButton, QScrollArea, QSizePolicy, QTextBrowser,
                               QVBoxLayout, QWidget)

STATUS_NOTES = {"streaming": "writing…", "interrupted": "incomplete: interrupted while writing",
                "cancelled": "stopped", "error": "failed"}


class MessageText(QTextBrowser):
    """A read-only Markdown view as tall as its text."""

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
        self._markdown = ""

    def set_markdown(self, text: str) -> None:
        if text != self._markdown:
            self._markdown = text
            self.setMarkdown(text)

    @property
    def markdown(self) -> str:
        return self._markdown

    def _fit(self, size) -> None:
        extra = self.horizontalScrollBar().sizeHint().height() if self.horizontalScrollBar().isVisible() else 0
        self.setFixedHeight(int(size.height()) + 2 * self.frameWidth() + 4 + extra)


class MessageWidget(QFrame):
    showRounds = Signal(int)        # message id

    def __init__(self, role: str, text: str, status: str = "done", message_id: int | None = None,
                 has_rounds: bool = False, parent=None):
        super().__init__(parent)
        self.role = role
        self.message_id = message_id
        self.setObjectName("userMessage" if role == "user" else "assistantMessage")
        self.setFrameShape(QFrame.StyledPanel)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        head = QHBoxLayout()
        self.title = QLabel("<b>You</b>" if role == "user" else "<b>Assistant</b>")
        self.status = QLabel()
        self.status.setObjectName("messageStatus")
        head.addWidget(self.title)
        head.addWidget(self.status)
        head.addStretch(1)
        self.rounds_button = QPushButton("Rounds")
        self.rounds_button.setToolTip("Show this reply's rounds in the speculation panel")
        self.rounds_button.setFlat(True)
        self.rounds_button.clicked.connect(lambda: self.showRounds.emit(self.message_id or -1))
        self.copy_button = QPushButton("Copy")
        self.copy_button.setFlat(True)
        self.copy_button.clicked.connect(self.copy)
        head.addWidget(self.rounds_button)
        head.addWidget(self.copy_button)
        self.rounds_button.setVisible(role == "assistant" and has_rounds)
        layout.addLayout(head)
        self.body = MessageText(self)
        layout.addWidget(self.body)
        self.set_text(text)
        self.set_status(status)

    def set_text(self, text: str) -> None:
        self.body.set_markdown(text)

    def set_status(self, status: str) -> None:
        note = STATUS_NOTES.get(status, "")
        self.status.setText(f"<i>{note}</i>" if note else "")

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.body.markdown)

    @property
    def text(self) -> str:
        return self.body.markdown


class ChatView(QScrollArea):
    """Messages stacked top to bottom. While a reply streams, text is buffered and painted at most
    every `REPAINT_MS` so a fast model does not re-layout the view for every token."""

    REPAINT_MS = 40
    showRounds = Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.NoFrame)
        self._container = QWidget()
        self._layout = QVBoxLayout(self._container)
        self._layout.setContentsMargins(12, 12, 12, 12)
        self._layout.setSpacing(8)
        self._layout.addStretch(1)
        self.setWidget(self._container)
        self.messages: list[MessageWidget] = []
        self._streaming: MessageWidget | None = None
        self._pending = ""
        self._stick = True
        bar = self.verticalScrollBar()
        bar.rangeChanged.connect(self._on_range)
        bar.valueChanged.connect(self._on_scroll)
        self._timer = QTimer(self)
        self._timer.setInterval(self.REPAINT_MS)
        self._timer.timeout.connect(self._flush)

    # -- scrolling: follow the bottom only while the user is there
    def _on_scroll(self, value: int) -> None:
        self._stick = value >= self.verticalScrollBar().maximum() - 8

    def _on_range(self, _lo: int, hi: int) -> None:
        if self._stick:
            self.verticalScrollBar().setValue(hi)

    @property
    def following(self) -> bool:
        return self._stick

    # -- content
    def clear(self) -> None:
        self._timer.stop()
        self._streaming = None
        self._pending = ""
        self.truncate(0)
        self._stick = True

    def truncate(self, n: int) -> None:
        """Remove the messages from index n on."""
        for w in self.messages[n:]:
            w.setParent(None)
            w.deleteLater()
        del self.messages[n:]

    def add_message(self, role: str, text: str, status: str = "done", message_id: int | None = None,
                    has_rounds: bool = False) -> MessageWidget:
        w = MessageWidget(role, text, status, message_id, has_rounds, self._container)
        w.showRounds.connect(self.showRounds)
        self._layout.insertWidget(self._layout.count() - 1, w)
        self.messages.append(w)
        return w

    def begin_reply(self) -> MessageWidget:
        self._stick = True
        self._streaming = self.add_message("assistant", "", "streaming")
        self._pending = ""
        self._timer.start()
        return self._streaming

    def append_text(self, text: str) -> None:
        self._pending += text

    def _flush(self) -> None:
        if self._streaming is not None and self._pending:
            self._streaming.set_text(self._streaming.text + self._pending)
            self._pending = ""

    def end_reply(self, text: str, status: str, message_id: int | None, has_rounds: bool) -> None:
        self._timer.stop()
        if self._streaming is not None:
            self._pending = ""
            self._streaming.set_text(text)
            self._streaming.set_status(status)
            self._streaming.message_id = message_id
            self._streaming.rounds_button.setVisible(has_rounds)
        self._streaming = None

    @property
    def streaming(self) -> MessageWidget | None:
        return self._streaming
