"""The main window when a reply cannot go on: a failed generation, the engine process dying, a request
refused for want of models, a conversation outgrowing the context (and dropping its oldest turns to
go on), a reply cut off when it filled the context. Each says what happened and keeps what was
written. A mixin of MainWindow (main_window.py)."""
from __future__ import annotations

from PySide6.QtGui import QTextCursor

from desktop_app.chat.rules import last_user_message
from desktop_app.chat.session import reply_room
from desktop_app.engine.events import FinishEvent, StopReason
from desktop_app.ui.window_conversations import Draft
from desktop_app.ui.worker import GenerateRequest


class FaultsMixin:
    def _on_generation_failed(self, conversation_id: int, message: str) -> None:
        if self._closing:          # already-queued worker signals after close
            return
        self.reply.end()
        self.banner.show_message(message)
        if conversation_id == self.current_id:
            self.open_conversation(conversation_id)

    def _say_why_it_ended(self, event: FinishEvent, conversation_id: int) -> None:
        """What the engine said of a reply it ended (the context filling up mid-reply), with the way on."""
        if not event.message:
            return
        if event.stop_reason == StopReason.CONTEXT_FULL:          # (the window's words: the engine's count slots)
            size = f" ({self.loaded.n_ctx} tokens)" if self.loaded is not None and self.loaded.n_ctx else ""
            self.banner.show_message(f"The reply was cut off: the conversation filled the context{size}. To go on, "
                                     "start a new conversation, or raise the context size in Settings (Apply and "
                                     "reload).", [("New conversation", self._new_with_box)],
                                     about=conversation_id)
        else:
            self.banner.show_message(event.message[:1].upper() + event.message[1:])

    def _on_engine_died(self, conversation_id: int, message: str) -> None:
        """The engine process died: the window and the conversation stay, the partial reply is saved as
        interrupted, and one click loads the models again in a new engine process."""
        if self._closing:          # already-queued worker signals after close
            return
        if self.loaded is not None:
            self.lost_pair = (self.loaded.target, self.loaded.draft)
        elif self.lost_pair is None:
            self.lost_pair = (self.model_bar.target_path(), self.model_bar.draft_path())
        number = len(self._history(self.store.messages, conversation_id, default=[])) if conversation_id >= 0 else 0
        self.reply.interrupt("Interrupted: the model engine stopped before this reply was finished.", number or None)
        self.loaded = None
        self.spec_bar.set_draft_available(None)            # the bar says nothing runs until a reload
        self.reply.end()
        self.busy = False                       # (what was running has ended with the engine)
        self.queued = None                      # (a message waiting for a load stays in the box; a load
                                                # that was running answers loadFailed, and one waiting runs)
        self.setWindowTitle("Tandem")
        self.model_bar.show_error("The model engine stopped. The models need loading again.")
        if self.lost_pair and self.lost_pair[0]:
            self.banner.show_message(message, [("Reload the models", self.reload_lost_pair)])
        else:
            self.banner.show_message(message)
        if conversation_id == self.current_id and conversation_id >= 0:
            self.open_conversation(conversation_id)
        self._update_buttons()

    def _on_request_refused(self, request: GenerateRequest, message: str) -> None:
        """A message that reached the worker after the engine died: it was not stored, so it goes back
        in its conversation's box, and the view shows the conversation as stored."""
        if self._closing:
            return
        self.reply.end()
        if request.text and request.conversation_id != self.current_id:     # (its own box, not the one shown)
            last = last_user_message(self._history(self.store.messages, request.conversation_id, default=[]))
            edit_of = last.content if request.kind == "edit" and last is not None else None
            self.drafts.setdefault(request.conversation_id, Draft(request.text, edit_of))
        elif request.text and not self.composer.toPlainText().strip():
            self.composer.setPlainText(request.text)
            self.editing = request.kind == "edit"
        if request.conversation_id == self.current_id:
            self.open_conversation(request.conversation_id)
        actions = [("Reload the models", self.reload_lost_pair)] if self.lost_pair and self.lost_pair[0] else []
        self.banner.show_message(message, actions)
        self._update_buttons()

    def reload_lost_pair(self) -> None:
        if self.lost_pair and self.lost_pair[0]:
            self.load_pair(*self.lost_pair)

    def _new_with_box(self) -> None:
        """The banner's New conversation: the message that did not fit (or what was typed to go on) goes
        along, in the box."""
        self.new_conversation(take_box=True)

    def _on_overflow(self, conversation_id: int, message: str, can_drop: bool, text: str = "",
                     only_last: bool = False, n_prompt: int = 0) -> None:
        """The conversation does not fit in the context. A message just sent (`text`) was taken back out
        of the history: it goes back to the box, and the banner's choices send it on (found by a user's
        try: it had stayed stored, unanswered, and "New conversation" left it behind). `only_last`:
        leaving turns out leaves only the last message, which the button says, beside a larger context
        (it read "Leave out oldest turns and send", and the model saw the new message alone). `n_prompt`:
        the prompt's tokens (0: not known)."""
        if self._closing:          # already-queued worker signals after close
            return
        self.reply.end()
        if conversation_id != self.current_id:      # (another was opened meanwhile: the box and the banner's
            self.open_conversation(conversation_id)  # choices are about this one)
        if text:
            typed = self.composer.toPlainText().strip()
            if not typed.startswith(text):           # (typed on after it, the box still holds it)
                self.composer.setPlainText(f"{text}\n\n{typed}" if typed else text)
            message += " Your message was not sent: it is still in the box."
        edited = not text and self.pending_edit and bool(self.pending_text)   # an edit, checked before it was
        if edited:                                                          # stored: the history is as it was
            self.editing = True                      # (Enter sends it as the edit it is)
            message += (" Your edited message was not sent: it is still in the box, and the conversation is "
                        "as it was.")
        turns = "every earlier turn" if only_last else "oldest turns"
        drop = ((f"Leave out {turns} and send", lambda: self._drop_and_retry(conversation_id, send=True))
                if text else (f"Leave out {turns}", lambda: self._drop_and_retry(conversation_id)))
        if can_drop:                       # (a larger context too: the first banner offered it, the next not)
            actions = [drop, ("New conversation", self._new_with_box)] + self._larger_context()
        else:
            actions = [("Edit the message", self._shorten if text or edited else lambda: self.edit_last(note=message),
                        True)] + self._larger_context()
        self.banner.show_message(message, actions, about=conversation_id, kind="overflow")
        self._overflow = (self.loaded.n_ctx if self.loaded is not None else 0, actions, n_prompt)
        if conversation_id == self.current_id:
            self.open_conversation(conversation_id)
        if text:                       # (taken back, a first message took its title along: the list named the
            self.refresh_conversations()   # empty conversation after the message not sent, a new user's try)

    def _overflow_after_load(self, n_ctx: int) -> None:
        """Models loaded with a larger context while the banner says the conversation does not fit: its
        numbers are of the context before ("the context holds 256" stayed up after Apply and reload had
        raised it to 1024, a new user's try), so it says the size now and the way on, its choices kept (it
        may not fit yet). Where it now fits, the choices go ("Edit the message" and "Raise the context
        size…" stayed beside "press Send": a new user's try)."""
        before, actions, n_prompt = getattr(self, "_overflow", (0, [], 0))
        if self.banner.kind != "overflow" or self.banner.isHidden() or not before or n_ctx <= before:
            return
        way = "press Send to send the message in the box" if self.composer.toPlainText().strip() else "try again"
        said = f"The context now holds {n_ctx} tokens (it held {before})"
        room = reply_room(n_ctx, self._options().max_tokens)     # (as the next try will price it: more, in more)
        need = f"the prompt's {n_prompt} tokens plus {room} to begin a reply"
        if n_prompt + room > n_ctx:
            said += f", still short of {need}."
        else:
            said += f", enough for {need}: {way}." if n_prompt else f": {way}."
            actions = [] if n_prompt else actions
        self.banner.show_message(said, actions, about=self.banner.about, kind="overflow")
        self._overflow = (n_ctx, actions, n_prompt)

    def _larger_context(self) -> list:
        """The banner's way to a larger context: the Settings tab at its Context size (local models;
        a llama-server's context is its own). A message too long even alone got "New conversation",
        which cannot help: a new conversation holds the same message."""
        if self.loaded is not None and self.loaded.server is not None:
            return []
        return [("Raise the context size…", self._show_context_size, True)]

    def _show_context_size(self) -> None:
        self.tabs.setCurrentWidget(self.settings_scroll)
        self.settings_scroll.ensureWidgetVisible(self.settings_panel.n_ctx)
        self.settings_panel.n_ctx.setFocus()
        self.settings_panel.n_ctx.selectAll()

    def _shorten(self) -> None:
        self.composer.moveCursor(QTextCursor.End)
        self.composer.setFocus()

    def _drop_and_retry(self, conversation_id: int, send: bool = False) -> None:
        """Leave out the oldest turns of `conversation_id`, then answer its last message; with `send`,
        the message in the box, sent as Enter would send it (the box empties once it is stored)."""
        text = ""
        if send:
            text = self.composer.toPlainText().strip()
            if self.busy or not self.loaded or not text:
                self.composer.setFocus()
                return
            if conversation_id != self.current_id:
                self.open_conversation(conversation_id)
                if conversation_id != self.current_id:    # (deleted meanwhile: the history said so)
                    return
            self.editing = False
            self.pending_text = text
            self.chat.add_message("user", text)
        self.reply.start(conversation_id)
        self.busy = True
        self._update_buttons()
        self.requestDrop.emit(conversation_id, self._options(), text)
