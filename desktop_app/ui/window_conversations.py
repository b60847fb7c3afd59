"""The main window's conversations: the list (and its search), opening one into the chat view, new,
rename, delete, the conversation's system prompt, editing its last message, and showing a stored
reply's rounds in the panel. A mixin of MainWindow (main_window.py)."""
from __future__ import annotations

from typing import NamedTuple

from PySide6.QtGui import QTextCursor

from desktop_app.chat.history import HistoryError
from desktop_app.chat.reply_footer import version_line
from desktop_app.chat.rules import last_user_message
from desktop_app.chat.session import DEFAULT_TITLE

EDIT_NOTE = "Editing your last message: Enter resends it and replaces what followed."


class Draft(NamedTuple):
    """What was typed in a conversation's box and not sent, kept while another conversation is open.
    `edit_of`: the last message it edits, as it was (an edit under way), or None (a message to send)."""
    text: str
    edit_of: str | None = None


class ConversationsMixin:
    def refresh_conversations(self) -> None:
        query = self.sidebar.search.text().strip()
        conversations = (self._history(self.store.search, query, default=[]) if query
                         else self._history(self.store.list_conversations, default=[]))
        self.sidebar.set_conversations(conversations, self.current_id)

    def open_latest(self) -> None:
        """Models are ready and no conversation is open: the one open at the last Quit opens, else the
        newest (the view was blank after a restart; then the newest opened, not the one open at Quit:
        new users' tries). Not before: behind the welcome page a message sent would have gone into a
        conversation out of sight. Nor where the box holds text typed with none open: it would have
        joined that conversation's own unsent text (a new user's try)."""
        if self.current_id is not None or self.composer.toPlainText().strip():
            return
        ids = [c.id for c in self._history(self.store.list_conversations, default=[])]
        last = self.settings["window"].get("conversation", "")
        if ids:
            self.open_conversation(int(last) if last.isdigit() and int(last) in ids else ids[0])
            self.refresh_conversations()

    def new_conversation(self, *, take_box: bool = False) -> None:
        """A new conversation, with the system prompt typed while none was open (else the default one).
        An open conversation with nothing in it yet is that new conversation: no second empty one; nor is
        one made while the list holds an empty one with that system prompt and nothing typed for it: that
        one opens, at the top of the list.
        `take_box`: what the box holds goes along (a message the context could not hold); else it stays
        with the conversation it was typed in. (Keyword only: a menu item's triggered(bool) would set it.)"""
        if self.current_id is not None and not self.chat.messages and self.generating_id != self.current_id:
            self.sidebar.search.clear()
            self.composer.setFocus()
            return
        typed = self.settings_panel.system_prompt.toPlainText() if self.current_id is None else ""
        prompt = typed or self.settings["generation"]["system_prompt"]
        cid = self._history(self.store.reuse_empty_conversation, DEFAULT_TITLE, prompt, self.drafts,
                            self.opened_here, self.started_at) \
            or self._history(self.store.create_conversation, DEFAULT_TITLE, prompt)   # (one empty in the list)
        if cid is None:
            return
        taken = self.composer.toPlainText() if take_box else ""
        if take_box:
            self.composer.clear()                   # (an edit under way ends: its text is a new message there)
        self.spec_panel.clear()
        self.sidebar.search.clear()
        self.open_conversation(cid)
        if taken:
            self.composer.setPlainText(taken)
        self.refresh_conversations()
        self.composer.setFocus()

    @property
    def editing(self) -> bool:
        """Whether Enter replaces the last message (edit_last). Meanwhile Regenerate and Compare are off:
        they answer the message as stored, not as edited (a new user's try: Regenerate during an edit
        wrote a third reply to the old message, the edit still in the box and the banner on)."""
        return self._editing

    @editing.setter
    def editing(self, on: bool) -> None:
        self._editing = on
        if getattr(self, "regenerate_button", None) is not None:     # (not while the window is built)
            self._update_buttons()

    def edit_last(self, *, note: str = "") -> None:
        """The last message of the conversation open, into the box to be edited (Enter resends it).
        `note`: said after the banner's "Editing …" (why the message is to be edited). (Keyword only:
        a button's or menu item's clicked(bool) passed False as the note, and the banner said "False".)"""
        if self.current_id is None:
            return
        if self.busy:
            self.say_busy("Edit last message")
            return
        last = last_user_message(self._history(self.store.messages, self.current_id, default=[]))
        typed = self.composer.toPlainText().strip()
        if last is not None and typed and not self.editing and typed != last.content.strip():
            self.banner.show_message("The box holds a message you have not sent: send it or clear it first, then "
                                     "edit your last message.", about=self.current_id, kind="unsent")
            return                                  # (it was written over)
        if last is not None:
            self.editing = True
            self.edit_original = last.content
            self.composer.setPlainText(last.content)
            self.composer.moveCursor(QTextCursor.End)    # (typing goes on where the message ends)
            self.composer.setFocus()
            self._edit_note(note)

    def _unsent_note_is_past(self, busy: bool | None = None) -> None:
        """Edit's note on the unsent text goes once it is past: a run begins or another version is shown
        (`busy` True), or the box is emptied (None: the box changed). It stayed up through a regenerate
        and a version switch (a new user's try)."""
        if self.banner.kind == "unsent" and (busy or (busy is None and not self.composer.toPlainText().strip())):
            self.banner.hide()
        elif self.banner.kind == "busy" and busy is False:   # ("stop the reply first" stayed up after the
            self.banner.hide()                                # reply ended, a new user's try)

    def say_busy(self, what: str) -> None:
        """`what` (a key or menu item) cannot be done while a reply, compare or load runs: the banner says
        so (Ctrl+E during a reply did nothing and said nothing: a new user's try), unless it says that a
        message waits (replaced, it would not be sent)."""
        if self.banner.kind != "queued" or self.banner.isHidden():
            self.banner.show_message(f"{what} waits for what is running to end: wait for it, or stop it (Esc).",
                                     about=self.current_id, kind="busy")

    def _edit_note(self, note: str = "") -> None:
        """The banner says an edit is under way, with its way out: "Cancel edit" alone (beside it, a new
        user read Dismiss as the same)."""
        self.banner.show_message(f"{EDIT_NOTE} {note}".strip(), [("Cancel edit", self._cancel_edit)],
                                 about=self.current_id, dismiss=False, kind="edit")

    def _edit_note_again(self) -> None:
        """The banner was hidden while an edit is under way: it says so again. (Another message took its
        place, and once that was dismissed nothing said that Enter would replace the last message, nor
        offered to cancel it.)"""
        if self.editing and not self._closing:
            self._edit_note()

    def _cancel_edit(self) -> None:
        """No longer editing: the box empties, and the banner saying so goes."""
        self.editing = False
        self.composer.clear()
        if self.banner.kind == "edit":
            self.banner.hide()

    def _put_away_draft(self) -> None:
        """Another conversation is to be opened: what the box holds is kept for the one open (a new user's
        try: a half-typed message followed them into another conversation, and was sent there), an edit
        under way with it (Enter would have put its text in place of the next one's last message). Text
        typed with no conversation open goes along to the one opened."""
        if self.current_id is None:
            return
        draft = self._draft_here()
        if self.editing:
            self._cancel_edit()
        if draft:
            self.drafts[self.current_id] = draft
        else:
            self.drafts.pop(self.current_id, None)
        self.composer.clear()

    def _draft_here(self) -> Draft | None:
        """What the box holds for the conversation open, as a Draft (None: nothing, or an edit that
        changed nothing)."""
        text = self.composer.toPlainText()
        edit_of = self.edit_original if self.editing else None
        return Draft(text, edit_of) if text.strip() and text.strip() != (edit_of or "").strip() else None

    def read_unsent(self) -> None:
        """The unsent text kept at the last Quit (keep_unsent), each back with its conversation (what was
        typed with none open, in the box), and out of the history: were the window to die later, a
        message sent since would not come back. They are this window's now (opened_here)."""
        kept = self._history(self.store.unsent, default={})
        typed = kept.pop(None, None)
        if typed:
            self.composer.setPlainText(typed[0])
        self.drafts.update({cid: Draft(*text) for cid, text in kept.items()})
        self.opened_here.update({*kept, *([None] if typed else [])})
        if self.store.writable and self.opened_here:
            self._history(self.store.keep_unsent, {}, self.opened_here)

    def keep_unsent(self, *_args) -> None:
        """Every conversation's unsent text (an edit under way too, and what is typed with none open) into
        the history, for the next start: at Quit, and when the desktop session ends (a new user's text
        was lost at every restart). Not a message sent and not yet stored (it would come back after the
        restart as well as in the history), nor another window's."""
        drafts = {**self.drafts, self.current_id: self._draft_here()}
        texts = {cid: tuple(d) for cid, d in drafts.items() if d and not (self.pending_text and
                                                                       d.text.strip() == self.pending_text)}
        if self.store.writable:
            self._history(self.store.keep_unsent, texts, {*self.opened_here, self.current_id})

    def _take_out_draft(self, conversation_id: int) -> None:
        """The conversation just opened: what was typed in its box is back, an edit under way with it
        (unless its last message changed since: then it is a message to send, and the banner says so)."""
        draft = self.drafts.pop(conversation_id, None)
        if draft is None:
            return
        typed = self.composer.toPlainText().strip()     # (typed with no conversation open: kept too)
        self.composer.setPlainText(f"{typed}\n\n{draft.text}" if typed else draft.text)
        self.composer.moveCursor(QTextCursor.End)
        if draft.edit_of is None:
            return
        last = last_user_message(self._history(self.store.messages, conversation_id, default=[]))
        if last is None or last.content != draft.edit_of:
            why = "the message it edited has changed"
        elif typed:
            why = "it follows what you typed with no conversation open"
        else:
            self.editing = True
            self.edit_original = draft.edit_of
            self._edit_note()
            return
        self.banner.show_message(f"Your unsent edit of the last message is back in the box as a new message: {why}.",
                                 about=conversation_id)

    def _on_message_stored(self, conversation_id: int) -> None:
        """The message is safe in the history: now the box may be emptied (unless more was typed). Where
        another conversation was opened meanwhile, the text kept for this one goes."""
        if conversation_id != self.current_id:
            if conversation_id in self.drafts and self.drafts[conversation_id].text.strip() == self.pending_text:
                del self.drafts[conversation_id]
        elif self.composer.toPlainText().strip() == self.pending_text:
            self.composer.clear()
        self.pending_text = ""
        self.refresh_conversations()      # (a first message, or its edit, names the conversation: said at once,
                                          # not only when a reply starts, which a refusal or a fault may stop)

    def _choose_conversation(self, conversation_id: int) -> None:
        """A conversation clicked in the list: opened, and shown even before any model is loaded (a
        click on the one open brings it back from the welcome page)."""
        if conversation_id != self.current_id or self.stack.currentWidget() is not self.chat:
            self.open_conversation(conversation_id, show=True)

    def open_conversation(self, conversation_id: int, show: bool = False) -> None:
        """Show the conversation in the chat view; the view takes the place of the welcome page once
        models are loaded, or at once when `show` (a conversation the user chose: it can be read before
        any model is loaded)."""
        switched = conversation_id != self.current_id
        another = switched and conversation_id != self.generating_id
        if switched:                                # another conversation: the box's text is kept for this
            self._put_away_draft()                  # one, and the panel shows its last reply (below), or
            if conversation_id == self.generating_id:   # the one it is writing now
                self.spec_panel.show_live()
            else:
                self.spec_panel.clear()
        self.current_id = conversation_id
        self.opened_here.add(conversation_id)
        self.banner.conversation_opened(conversation_id)
        if switched:
            self._take_out_draft(conversation_id)
        self.chat.clear()
        if self.store.writable and conversation_id != self.generating_id:   # an empty reply a crash left where
            self._history(self.store.drop_empty_reply, conversation_id)      # a regenerate began: the old one
        try:
            conversation = self.store.conversation(conversation_id)
        except (KeyError, HistoryError) as exc:
            if isinstance(exc, HistoryError):
                self.banner.show_message(f"{exc}.")
            self.current_id = None
            self._update_buttons()
            return
        self._show_system_prompt(conversation.system_prompt)
        messages = conversation.messages
        live = self.generating_id == conversation_id
        if live and messages and messages[-1].role == "assistant":
            messages = messages[:-1]
        for m in messages:
            self.chat.add_message(m.role, m.content, m.status, m.id, bool(m.rounds), stats=m.stats,
                                  settings=m.settings, rounds=m.rounds)
        self.mark_left_out(conversation_id, conversation)
        if another:                  # (it said "No reply selected" beside a conversation of replies: a user's try)
            self._show_last_reply(conversation_id, conversation.title, messages)
        if live:
            self.chat.begin_reply().set_text(self.live_text)
            if self.reply.reading is not None:           # (its prompt still being read)
                self.chat.reading(self.reply.reading)
        if self.stack.currentWidget() is not self.chat and (self.loaded or show):
            self.stack.setCurrentWidget(self.chat)
        self._update_buttons()

    def _show_last_reply(self, conversation_id: int, title: str, messages) -> None:
        """The panel shows the last reply of `messages` that has rounds, as a click on its footer does."""
        for n in range(len(messages), 0, -1):
            m = messages[n - 1]
            if m.role == "assistant" and m.rounds:
                self.spec_panel.show_stored(m.rounds, m.stats, conversation_id, title, m.created_at, n, m.status)
                return

    def show_versions(self, enabled: bool) -> None:
        """The last reply's ‹ n/m ›, where Regenerate has kept the replies it replaced (reply_versions);
        none beside the replies before it (the reply to a newer message let their others go)."""
        for w in self.chat.messages[:-1]:
            w.versions.hide()
        for action in getattr(self, "version_actions", ()):    # (the Chat menu's: offered where they apply)
            action.setEnabled(False)
        if self.current_id is not None and self.chat.messages and self.chat.messages[-1].role == "assistant":
            versions = self._history(self.store.last_reply_versions, self.current_id, default=[])
            lines = []
            if len(versions) > 1:                    # how each was made, and its speed, side by side
                shown = self._history(self.store.messages, self.current_id, default=[])[-1:]
                earlier = {e.id: e for e in self._history(self.store.earlier_replies, self.current_id,
                                                          shown[0].position, default=[])} if shown else {}
                replies = [shown[0] if v is None else earlier.get(v) for v in versions] if shown else []
                lines = [version_line(n, m.stats, m.settings, m.status) for n, m in enumerate(replies, 1) if m]
            self.chat.messages[-1].versions.set_versions(versions.index(None) + 1 if versions else 0, len(versions),
                                                         enabled and self.store.writable, lines)
            at = versions.index(None) if versions else 0        # (the one shown)
            for action, there in zip(getattr(self, "version_actions", ()), (at > 0, at < len(versions) - 1)):
                action.setEnabled(there and enabled and self.store.writable)

    def _step_version(self, step: int) -> None:
        """‹ or ›: the version before or after takes the last reply's place, in the history too (the
        conversation goes on from the reply shown), and the panel shows its rounds."""
        if self.busy or self.current_id is None or not self.store.writable:
            return
        self._unsent_note_is_past(True)
        versions = self._history(self.store.last_reply_versions, self.current_id, default=[])
        i = versions.index(None) + step if versions else -1
        if not 0 <= i < len(versions):
            return
        try:
            self._history(self.store.swap_reply, self.current_id, versions[i])
        except KeyError:                  # (the history changed meanwhile: shown as it is)
            pass
        self.open_conversation(self.current_id)
        messages = self._history(self.store.messages, self.current_id, default=[])
        if messages and messages[-1].rounds:         # (its rounds, not an earlier reply's)
            m = messages[-1]
            self.spec_panel.show_stored(m.rounds, m.stats, self.current_id, self._title(self.current_id),
                                        m.created_at, len(messages), m.status)
        else:
            self.spec_panel.clear()

    def _rename(self, conversation_id: int, title: str) -> None:
        self._history(self.store.rename, conversation_id, title)
        self.refresh_conversations()
        self.spec_panel.retitle(conversation_id, self._title(conversation_id))

    def _ask_delete(self, conversation_id: int) -> None:
        """Delete, as the list's Delete asks: confirmed first, unless _delete refuses it at once (it is
        writing a reply)."""
        if conversation_id == self.generating_id or self.sidebar.confirm_delete(conversation_id):
            self._delete(conversation_id)

    def _delete(self, conversation_id: int) -> None:
        if conversation_id == self.generating_id:
            self.banner.show_message("Stop the reply before deleting this conversation.", kind="busy")
            return
        if self._history(self.store.delete_conversation, conversation_id, default=False) is False:
            return
        self.drafts.pop(conversation_id, None)
        if self.queued and self.queued[0] == conversation_id:   # (a message waiting to be sent there: gone too)
            self._drop_queued()
        if conversation_id == self.current_id:      # what was typed for it goes with it (an edit too: Enter
            self._cancel_edit()                     # would have put its text in place of the next one's last
            self.current_id = None                  # message; kept, it followed into the next one opened)
            self.chat.clear()
            self.spec_panel.clear()
            self._show_system_prompt(self.settings["generation"]["system_prompt"])   # (for the next one)
        self.refresh_conversations()
        self._update_buttons()

    def mark_left_out(self, conversation_id: int, conversation=None) -> None:
        """The chat's line before the first turn the model reads of `conversation_id` (ChatView.mark_left_out)."""
        try:
            conversation = conversation or self.store.conversation(conversation_id)
        except (KeyError, HistoryError):
            return
        self.chat.mark_left_out(conversation.first_turn)

    def _show_system_prompt(self, text: str) -> None:
        self.settings_panel.system_prompt.blockSignals(True)
        self.settings_panel.system_prompt.setPlainText(text)
        self.settings_panel.system_prompt.blockSignals(False)

    def _system_prompt_edited(self, text: str) -> None:
        if self.current_id is not None:
            self._history(self.store.set_system_prompt, self.current_id, text)

    def _title(self, conversation_id: int) -> str:
        try:
            return self.store.conversation(conversation_id).title
        except (KeyError, HistoryError):
            return ""

    def _show_rounds(self, message_id: int) -> None:
        if self.current_id is None:
            return
        for n, m in enumerate(self._history(self.store.messages, self.current_id, default=[]), 1):
            if m.id == message_id:
                self.spec_panel.show_stored(m.rounds, m.stats, self.current_id, self._title(self.current_id),
                                            m.created_at, n, m.status)
                self.tabs.setCurrentWidget(self.spec_scroll)
