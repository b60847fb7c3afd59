"""The reply being generated: which conversation it belongs to, its text so far, and the live views it
feeds as its events arrive — the chat view (when that conversation is shown), the speculation panel
and the speculation bar. The window decides what to show; this owns the reply in flight."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from desktop_app.engine.events import PromptEvent, RoundEvent, TokenEvent

if TYPE_CHECKING:
    from desktop_app.ui.chat_view import MessageWidget


@dataclass(frozen=True)
class Continued:
    """The reply a Continue writes on: its place in the chat (its text and its tokens' origins come
    first), and as the history holds it, its rounds and when it began (the panel tells the whole reply)."""

    widget: MessageWidget
    rounds: list[RoundEvent]
    created_at: float


class LiveReply:
    def __init__(self, chat, panel, bar):
        self.chat, self.panel, self.bar = chat, panel, bar
        self.conversation_id: int | None = None     # the conversation a reply is being generated for
        self.text = ""                               # its text so far
        self.reading: PromptEvent | None = None      # how far its prompt has been read, until its first round
        self.continuing: Continued | None = None     # the reply it writes on (Continue)
        self.started_at = self.ended_at = 0.0        # when the last one was asked for, and ended (monotonic;
                                                     # while one runs, ended_at is the one before it's end)

    @property
    def active(self) -> bool:
        return self.conversation_id is not None

    def start(self, conversation_id: int, continuing: Continued | None = None) -> None:
        """A request went to the worker for `conversation_id` (its reply has not begun yet). `continuing`:
        the reply it writes on (Continue), whose text, tokens and rounds come first."""
        self.conversation_id = conversation_id
        self.continuing = continuing
        self.text = continuing.widget.text if continuing is not None else ""
        if continuing is not None:
            self.chat.continue_from(continuing.widget.origins, len(continuing.rounds))
        else:
            self.chat.continue_from([], 0)
        self.reading = None
        self.started_at = time.monotonic()

    def end(self) -> None:
        """Nothing is being generated any more (finished, failed, refused, or the engine died)."""
        if self.conversation_id is not None:
            self.ended_at = time.monotonic()
        self.conversation_id = None
        self.text = ""
        self.reading = None
        self.continuing = None
        self.bar.end_reply()

    def began(self, conversation_id: int, shown_id: int | None, title: str) -> None:
        """The worker started the reply: the chat gets a reply to stream into if its conversation is the
        one shown, and the panel starts following it."""
        if conversation_id == shown_id:
            self.chat.begin_reply(resume=self.continuing is not None)
        if self.continuing is not None:          # (the panel tells the whole reply, its earlier rounds first)
            self.panel.begin(title, conversation_id, self.continuing.rounds, self.continuing.created_at)
        else:
            self.panel.begin(title, conversation_id)

    def token(self, event: TokenEvent, shown_id: int | None) -> None:
        self.text += event.text
        self.panel.add_token()
        self.chat.record_token(event)
        if self.conversation_id == shown_id:
            self.chat.append_text(event.text)

    def prompt(self, event: PromptEvent, shown_id: int | None) -> None:
        """How far a long prompt has been read: the reply's note and the panel say so."""
        self.reading = event
        self.panel.reading(event)
        if self.conversation_id == shown_id:
            self.chat.reading(event)

    def round(self, event: RoundEvent) -> None:
        self.reading = None
        self.panel.add_round(event)
        self.bar.show_round(event)
        self.chat.record_round(event)

    def interrupt(self, why: str, number: int | None = None) -> None:
        """The engine died mid-reply: the panel keeps what it saw and says so. `number`: the reply's
        place in its conversation (SpecPanel.finish's)."""
        if self.active and self.panel.live:
            self.panel.interrupt(why, number)
