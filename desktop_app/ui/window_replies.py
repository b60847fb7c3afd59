"""The window's actions on the last reply: Regenerate (write it again; the old one is kept behind
‹ ›) and Continue (write on from where it ended, into the same reply). Mixed into MainWindow."""
from __future__ import annotations

from desktop_app.chat.rules import can_regenerate, continuable
from desktop_app.engine.events import RoundEvent
from desktop_app.ui.live_reply import Continued
from desktop_app.ui.worker import GenerateRequest


class RepliesMixin:
    def regenerate(self) -> None:
        if self.busy and self.current_id is not None:
            self.say_busy("Regenerate")
            return
        if self.current_id is None or not self.loaded or self.editing:
            return
        messages = self._history(self.store.messages, self.current_id, default=[])
        if not can_regenerate(messages):
            return
        self.chat.truncate(len(self.chat.messages) - 1)
        self._start(GenerateRequest("regenerate", self.current_id, "", self._options()))

    @property
    def can_continue_here(self) -> bool:
        """The open conversation's last reply can be continued with the models loaded: it ended before its
        end (rules.continuable), models Tandem runs are loaded (a llama-server's chat writes only new
        replies), and no edit is under way (Continue writes on the message as stored)."""
        last = self.chat.messages[-1] if self.chat.messages else None
        return (last is not None and self.current_id is not None and self.loaded is not None
                and self.loaded.server is None and not self.editing
                and continuable(last.role, last.text, last.reply_status, last.stats, last.settings))

    def continue_reply(self) -> None:
        """Continue (the last reply's button, Ctrl+Shift+Enter): the reply streams on in its own place."""
        if self.busy and self.current_id is not None:
            self.say_busy("Continue")
            return
        if not self.can_continue_here:
            return
        if self.banner.about == self.current_id:     # (what it said of this reply, "cut off…", is past)
            self.banner.hide()
        stored = self._history(self.store.messages, self.current_id, default=[])
        if not stored:
            return
        rounds = [RoundEvent.from_record(i, r) for i, r in enumerate(stored[-1].rounds or [])]
        self._start(GenerateRequest("continue", self.current_id, "", self._options()),
                    Continued(self.chat.messages[-1], rounds, stored[-1].created_at))
        self.chat.begin_reply(resume=True)           # (at once: its footer told the reply as it was)

    def _update_continue(self, idle: bool) -> None:
        """Continue is offered (button, Chat menu) where it applies and nothing runs (`idle`)."""
        ok = self.can_continue_here
        self.chat.set_continuable(ok and idle)
        if hasattr(self, "continue_action"):         # (not before the actions are made)
            self.continue_action.setEnabled(ok)
