"""The conversation view: one block per message, your messages as typed and the replies' Markdown
rendered by Qt (code blocks coloured by Pygments), streaming without flicker and without stealing
the scroll position from a user who scrolled up. Under each reply, a footer says how it was made
(click: its rounds in the speculation panel); with "Highlight token origins" on, a reply's text shows
where each token came from."""
from __future__ import annotations

import time
from dataclasses import replace

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QScrollArea, QVBoxLayout, QWidget

from desktop_app.chat.rules import LEFT_OUT_NOTE
from desktop_app.chat.reply_footer import SHORT_NOTES, footer_forms, made_with, reading_note, reply_note
from desktop_app.chat.token_origins import TokenOrigin, align, origin, origins_from_rounds
from desktop_app.engine.events import GenerationStats, PromptEvent, RoundEvent, TokenEvent
from desktop_app.ui.elided import ElidedButton, ElidedLabel
from desktop_app.ui.follow_bottom import FollowBottom
from desktop_app.ui.message_text import MessageText
from desktop_app.ui.reply_versions import VersionSwitch


CONTINUE_TIP = ("Write on from where this reply ended (Ctrl+Shift+Enter): the rest is added to this reply, "
                "with as many tokens again as Max tokens allows")
COPIED_MS = 1500                 # how long a message's Copy button reads "Copied" after a click
EMPTY_NOTE = ("Write a message below to start. Under each reply a line says how it was made and how fast; "
              "the speculation panel shows its rounds: the drafts the target kept, the one it rejected, "
              "and the tokens it wrote itself.")


class MessageWidget(QFrame):
    showRounds = Signal(int)        # message id
    continueClicked = Signal()

    def __init__(self, role: str, text: str, status: str = "done", message_id: int | None = None,
                 has_rounds: bool = False, parent=None, *, stats: dict | GenerationStats | None = None,
                 settings: dict | None = None, rounds: list | None = None, highlight: bool = False):
        super().__init__(parent)
        self.role = role
        self.message_id = message_id
        self.has_rounds = has_rounds
        self.setObjectName("userMessage" if role == "user" else "assistantMessage")
        self.setFrameShape(QFrame.StyledPanel)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        head = QHBoxLayout()
        self.title = QLabel("<b>You</b>" if role == "user" else "<b>Assistant</b>")
        self.status = ElidedLabel()          # never widens the chat: "cut off: the reply reached Max tokens
        self.status.setObjectName("messageStatus")   # (Settings)" made a 490 px minimum, and a narrower
        font = self.status.font()                     # chat scrolled sideways (a user's try at 1000×700)
        font.setItalic(True)
        self.status.setFont(font)
        head.addWidget(self.title)
        head.addWidget(self.status, 1)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setFlat(True)
        self.copy_button.setToolTip("Copy this message's text")
        self.copy_button.clicked.connect(self.copy)
        widths = []
        for label in ("Copied", "Copy"):                # as wide as it will read once clicked
            self.copy_button.setText(label)
            widths.append(self.copy_button.sizeHint().width())
        self.copy_button.setMinimumWidth(max(widths))
        self._copied = QTimer(self, singleShot=True, interval=COPIED_MS)    # "Copied" reads this long
        self._copied.timeout.connect(lambda: self.copy_button.setText("Copy"))
        self.versions = VersionSwitch()           # (the last reply's, once regenerated: the window sets it)
        head.addWidget(self.versions)
        self.continue_button = QPushButton("Continue", objectName="continueButton", toolTip=CONTINUE_TIP)
        self.continue_button.setFlat(True)        # (the last reply's, where it ended before its end: the
        self.continue_button.hide()               # window shows it, ChatView.set_continuable)
        self.continue_button.clicked.connect(self.continueClicked)
        head.addWidget(self.continue_button)
        head.addWidget(self.copy_button)
        layout.addLayout(head)
        self.body = MessageText(self)
        self.body.clicked.connect(self._footer_clicked)   # (a reply showed its rounds only from its footer,
        layout.addWidget(self.body)                       # and nothing said so: a new user's try)
        self.footer = ElidedButton()          # never widens the chat: a narrow column ends it in "…"
        self.footer.setObjectName("replyFooter")
        self.footer.setFlat(True)
        self.footer.setCursor(Qt.PointingHandCursor)
        self.footer.setStyleSheet("QPushButton#replyFooter { text-align: left; border: none; padding: 1px 0;"
                                  " color: palette(placeholder-text); }"
                                  " QPushButton#replyFooter:hover { text-decoration: underline; }")
        self.footer.clicked.connect(self._footer_clicked)
        self.footer.hide()
        layout.addWidget(self.footer)
        self._text = ""
        self._status = status
        self._read: PromptEvent | None = None     # how far a streaming reply's prompt has been read
        self._stats = stats
        self._settings = settings
        self._rounds = rounds               # stored rounds: the origins are made from them when first shown
        self._origins: list[TokenOrigin] | None = None
        self._streamed = 0                  # origins appended while streaming highlighted (-1: start afresh)
        self.highlight = highlight and role == "assistant"
        self.set_text(text)
        self.set_status(status)

    # -- text
    def set_text(self, text: str) -> None:
        reading = self._status == "streaming" and not self._text
        self._text = text
        self._streamed = 0
        if self.highlight:
            self._show_origins()
        elif self.role == "user":                      # as typed: Markdown would join its lines
            self.body.set_plain(text)
        else:
            self.body.set_markdown(text)
        if reading and text:        # no longer reading the prompt (a reply shown again mid-way, after another
            self._update_footer()   # conversation, said "reading the prompt…" over its text: a new user's try)

    def set_highlight(self, on: bool) -> None:
        on = on and self.role == "assistant"
        if on != self.highlight:
            self.highlight = on
            self.set_text(self._text)

    @property
    def origins(self) -> list[TokenOrigin]:
        """Where each of this reply's tokens came from (from the live events, or its stored rounds)."""
        if self._origins is None:
            stats = GenerationStats.from_json(self._stats)
            self._origins = origins_from_rounds(self._rounds, stats.n_tokens if stats and stats.n_tokens else None)
        return self._origins

    def _show_origins(self) -> None:
        spans, rest = align(self.origins, self._text)
        self.body.show_spans(self._text, spans + ([(rest, None)] if rest else []))

    def stream(self, text: str, origins: list[TokenOrigin]) -> None:
        """The streaming reply so far: its text and the origins of its tokens. Highlighted, the new
        tokens are appended as they come (MessageText.append_spans); the reply's end renders it."""
        if self._read is not None and text:           # (text came: no longer reading the prompt)
            self._read = None
            self._update_footer()
        if not self.highlight:
            self._origins = origins
            self.set_text(text)                  # (its note then says it is no longer reading the prompt)
        else:
            first = not self._text and text
            self._append(text, origins)
            if first:
                self._update_footer()

    def _append(self, text: str, origins: list[TokenOrigin]) -> None:
        new = origins[self._streamed:]
        if self._streamed > 0 and text == self._text + "".join(o.text for o in new):
            self.body.append_spans([(o.text, o) for o in new], self._streamed)
            self._streamed = len(origins)
        else:                                   # (a first piece, or text that is not the tokens' alone)
            spans, rest = align(origins, text)
            self.body.append_spans(spans + ([(rest, None)] if rest else []))
            self._streamed = -1 if rest else len(origins)
        self._text, self._origins = text, origins

    # -- status and footer
    def set_status(self, status: str) -> None:
        self._status = status
        self._update_footer()

    def set_reading(self, read: PromptEvent) -> None:
        """How far the prompt before this (streaming, still empty) reply has been read."""
        self._read = read
        self._update_footer()

    def set_stats(self, stats: dict | GenerationStats | None, settings: dict | None) -> None:
        self._stats, self._settings = stats, settings
        self._update_footer()

    def _update_footer(self) -> None:
        # (before its first token a reply's prompt is read: on a busy CPU "writing…" over an empty reply
        # for a minute read as stuck, a new user's try)
        # (a reply written on, Continue, has text while its prompt is read: after a restart, all of it)
        reading = self._status == "streaming" and (not self._text or self._read is not None)
        note = reading_note(self._read) if reading else reply_note(self._status, self._stats)
        self.status.setText(note, *filter(None, [SHORT_NOTES.get(note)]))
        self.status.setToolTip(note)
        forms = footer_forms(self._stats, self._settings, self._status) if self.role == "assistant" else [""]
        text = forms[0]
        self.footer.setText(*forms)
        action = ("Click (here or on the reply): show its rounds in the speculation panel" if self.has_rounds
                  else "No rounds were recorded for this reply")
        made = made_with(self._settings) if self.role == "assistant" else ""
        self.footer.setToolTip("\n\n".join(p for p in (text, made, action) if p))   # (the whole line, which
                                                                                     # a narrow chat cuts)
        self.footer.setVisible(bool(text))

    def _footer_clicked(self) -> None:
        if self.has_rounds and self.role == "assistant":
            self.showRounds.emit(self.message_id or -1)

    @property
    def footer_text(self) -> str:
        return self.footer.text() if self.footer.isVisibleTo(self) else ""

    def copy(self) -> None:
        """Put the message's text on the clipboard; the button says so for a moment (it gave no sign,
        a new user's try)."""
        QGuiApplication.clipboard().setText(self._text)
        self.copy_button.setText("Copied")
        self._copied.start()

    @property
    def text(self) -> str:
        return self._text

    @property
    def settings(self) -> dict | None:
        return self._settings

    @property
    def reply_status(self) -> str:
        """How the reply ended, as the history stores it ("done", "cancelled", …; "streaming" while written)."""
        return self._status

    @property
    def stats(self) -> dict | GenerationStats | None:
        return self._stats


_clock = time.perf_counter       # (tests give renders a cost)


class ChatView(QScrollArea):
    """Messages stacked top to bottom. While a reply streams, text is buffered and rendered at most
    every `REPAINT_MS`, and less often as the reply grows: each render lays out the whole reply's
    Markdown again, and the next waits RENDER_DUTY times as long as that took (at most REPAINT_MAX_MS).
    The window shares the machine's cores with llama.cpp, whose threads wait for each other at every
    step: on two cores, the window's plain steps ran at 0.83-0.88 of the command line's speed. A
    recorded 256-token reply replayed into the window at 12 tokens a second cost it 7.5-8.3 ms of CPU
    per token rendered every 50 ms, 5.7-6.2 every 250 ms (three runs each, under Xvfb)."""

    REPAINT_MS = 250
    REPAINT_MAX_MS = 1000
    RENDER_DUTY = 25             # renders take at most about 1/25 of a core
    showRounds = Signal(int)
    versionStep = Signal(int)          # the last reply's ‹ (-1) or › (+1)
    continueRequested = Signal()       # the last reply's Continue

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.NoFrame)
        self._container = QWidget()
        self._layout = QVBoxLayout(self._container)
        self._layout.setContentsMargins(12, 12, 12, 12)
        self._layout.setSpacing(8)
        self.empty_note = QLabel(EMPTY_NOTE)          # (the view was blank, with no hint: a new user's try)
        self.empty_note.setObjectName("emptyNote")
        self.empty_note.setWordWrap(True)
        self.empty_note.setAlignment(Qt.AlignCenter)
        self.empty_note.setStyleSheet("color: palette(placeholder-text); padding: 24px;")
        self._layout.addWidget(self.empty_note)
        self._layout.addStretch(1)
        self.setWidget(self._container)
        self.messages: list[MessageWidget] = []
        self.left_out_note: QLabel | None = None     # before the first message the model reads (mark_left_out)
        self._left_out_at = 0
        self._streaming: MessageWidget | None = None
        self._pending = ""
        self._follow = FollowBottom(self, margin=8)
        self._highlight = False
        self._live: list[TokenOrigin] = []          # the origins of the reply being generated
        self._live_base, self._round_base = 0, 0    # ... those it had before, when it is continued (continue_from)
        self._round: RoundEvent | None = None
        self._round_i = 0
        self._timer = QTimer(self)
        self._timer.setInterval(self.REPAINT_MS)
        self._timer.timeout.connect(self._flush)

    @property
    def following(self) -> bool:
        """The view follows the bottom (the user has not scrolled up)."""
        return self._follow.on

    # -- token origins
    @property
    def highlight_origins(self) -> bool:
        return self._highlight

    def set_highlight_origins(self, on: bool) -> None:
        """Show replies with each token on the colour of its origin, or without colours."""
        self._highlight = on
        for w in self.messages:
            w.set_highlight(on)

    def continue_from(self, origins: list[TokenOrigin], n_rounds: int = 0) -> None:
        """The reply about to be generated continues one whose tokens came from `origins` in `n_rounds`
        rounds ([] and 0: a new reply): its tokens follow them, its rounds numbered on from theirs."""
        self._live = list(origins)
        self._live_base = len(origins)
        self._round_base = n_rounds

    def record_round(self, event: RoundEvent) -> None:
        """A round of the reply being generated (whichever conversation is shown): its tokens follow."""
        if event.index == 0:
            del self._live[self._live_base:]
        if self._round_base:
            event = replace(event, index=event.index + self._round_base)
        self._round, self._round_i = event, 0

    def record_token(self, event: TokenEvent) -> None:
        if event.index == 0 and len(self._live) > self._live_base:   # (a reply whose first round was not seen)
            del self._live[self._live_base:]
        r = self._round
        if r is not None and self._round_i < len(r.kinds):
            self._live.append(origin(r, self._round_i, event.text))
        else:                                             # no round for it: its kind is all we know
            self._live.append(TokenOrigin(event.text, event.kind, r.index if r else 0, "none", 1, 0, 0))
        self._round_i += 1

    # -- content
    def clear(self) -> None:
        self._timer.stop()
        self._streaming = None
        self._pending = ""
        self.truncate(0)
        self._follow.on = True

    def truncate(self, n: int) -> None:
        """Remove the messages from index n on."""
        if self.left_out_note is not None and n <= self._left_out_at:
            self.mark_left_out(0)
        for w in self.messages[n:]:
            w.setParent(None)
            w.deleteLater()
        del self.messages[n:]
        self.empty_note.setVisible(not self.messages)

    def mark_left_out(self, first: int) -> None:
        """A line before message `first`, the first the model reads: the turns above it were left out
        of the prompt to make room (they stay in the history). Without it they looked like the rest,
        and a user could not tell what the model still saw (a new user's try). 0: none left out."""
        if self.left_out_note is not None:
            self._layout.removeWidget(self.left_out_note)
            self.left_out_note.hide()
            self.left_out_note.deleteLater()
            self.left_out_note = None
        if not 0 < first < len(self.messages):
            return
        note = self.left_out_note = QLabel(LEFT_OUT_NOTE, self._container)
        note.setObjectName("leftOutNote")
        note.setWordWrap(True)
        note.setAlignment(Qt.AlignCenter)
        note.setStyleSheet("font-style: italic; border-top: 1px dashed palette(mid); padding-top: 4px;")
        self._left_out_at = first
        self._layout.insertWidget(self._layout.indexOf(self.messages[first]), note)

    def add_message(self, role: str, text: str, status: str = "done", message_id: int | None = None,
                    has_rounds: bool = False, *, stats: dict | None = None, settings: dict | None = None,
                    rounds: list | None = None) -> MessageWidget:
        """A message; a stored reply passes its stats, settings and rounds (the footer, the origins)."""
        w = MessageWidget(role, text, status, message_id, has_rounds, self._container, stats=stats,
                          settings=settings, rounds=rounds, highlight=self._highlight)
        if self.messages:
            self.messages[-1].continue_button.hide()     # (Continue is the last reply's)
        w.showRounds.connect(self.showRounds)
        w.continueClicked.connect(self.continueRequested)
        w.versions.step.connect(self.versionStep)
        self._layout.insertWidget(self._layout.count() - 1, w)
        self.messages.append(w)
        self.empty_note.hide()
        return w

    def set_continuable(self, on: bool) -> None:
        """Offer Continue under the last message where `on` (the window's rules.continuable), nowhere else."""
        for w in self.messages:
            w.continue_button.setVisible(on and w is self.messages[-1] and w.role == "assistant")

    def begin_reply(self, resume: bool = False) -> MessageWidget:
        """A reply streams in from now: a new one, or with `resume` the last one, written on (Continue)."""
        self._follow.on = True
        if resume and self._streaming is not None and self._streaming is self.messages[-1]:
            return self._streaming                    # (already: the window began it as it asked)
        if resume and self.messages and self.messages[-1].role == "assistant":
            self._streaming = w = self.messages[-1]
            w.continue_button.hide()
            w.has_rounds = False                 # (a click showed the stored reply, as it was, until the end)
            w._read = None
            w.set_stats(None, w.settings)        # (its footer told the reply as it was, under the text growing)
            w.set_status("streaming")
        else:
            self._streaming = self.add_message("assistant", "", "streaming")
        self._pending = ""
        self._timer.start(self.REPAINT_MS)
        return self._streaming

    def append_text(self, text: str) -> None:
        self._pending += text

    def reading(self, read: PromptEvent) -> None:
        """How far the streaming reply's prompt has been read."""
        if self._streaming is not None:
            self._streaming.set_reading(read)

    def _flush(self) -> None:
        if self._streaming is not None and self._pending:
            t0 = _clock()
            self._streaming.stream(self._streaming.text + self._pending, self._live)
            self._pending = ""
            took_ms = 1000 * (_clock() - t0)
            self._timer.setInterval(int(min(self.REPAINT_MAX_MS, max(self.REPAINT_MS, self.RENDER_DUTY * took_ms))))

    def end_reply(self, text: str, status: str, message_id: int | None, has_rounds: bool,
                  stats: GenerationStats | dict | None = None, settings: dict | None = None) -> None:
        """The reply is finished: its final text, and the stats and settings its footer tells."""
        self._timer.stop()
        if self._streaming is not None:
            self._pending = ""
            w = self._streaming
            w.message_id = message_id
            w.has_rounds = has_rounds
            w._origins = self._live
            w.set_stats(stats, settings)
            w.set_text(text)
            w.set_status(status)
        self._streaming = None
        self._live, self._live_base, self._round_base = [], 0, 0

    @property
    def streaming(self) -> MessageWidget | None:
        return self._streaming
