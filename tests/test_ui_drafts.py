"""What is typed in the message box belongs to the conversation it was typed in (a new user's try: a
half-typed message followed them into another conversation, and was sent there)."""
from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from desktop_app.ui.window_conversations import EDIT_NOTE, Draft
from desktop_app.ui.worker import GenerateRequest, LoadedPair
from tests.test_ui_window import stored_exchange as exchange


def cats_and_dogs(w) -> tuple[int, int]:
    """Two conversations of one question and its answer each."""
    return (exchange(w, "Cats", "Tell me about cats.", "Cats purr."),
            exchange(w, "Dogs", "Tell me about dogs.", "Dogs bark."))


def edit_put_away(w) -> tuple[int, int]:
    """The cats' last message edited into "Tell me about lions.", then the dogs' conversation opened."""
    cats, dogs = cats_and_dogs(w)
    w.open_conversation(cats, show=True)
    w.edit_last()
    w.composer.setPlainText("Tell me about lions.")
    w.open_conversation(dogs, show=True)
    return cats, dogs


def test_each_conversation_keeps_what_was_typed_in_its_box(qtbot, window):
    w = window
    cats, dogs = cats_and_dogs(w)
    w.composer.setPlainText("typed with none open")      # (goes along to the conversation opened)
    w.open_conversation(cats, show=True)
    assert w.composer.toPlainText() == "typed with none open"
    w.composer.setPlainText("half typed for the cats")
    w.open_conversation(dogs, show=True)
    assert w.composer.toPlainText() == ""
    w.composer.setPlainText("and for the dogs")
    w.new_conversation()
    assert w.composer.toPlainText() == ""
    w.composer.setPlainText("   ")                        # (blank: nothing to keep)
    w.open_conversation(cats, show=True)
    assert w.composer.toPlainText() == "half typed for the cats"
    assert w.composer.textCursor().atEnd()               # (typing goes on where it stopped)
    w.open_conversation(dogs, show=True)
    assert w.composer.toPlainText() == "and for the dogs"
    w.open_conversation(dogs, show=True)                 # (the one open, again: the box as it is)
    assert w.composer.toPlainText() == "and for the dogs"
    w._delete(cats)                                      # (a conversation deleted: what was typed for it goes)
    assert cats not in w.drafts and w.composer.toPlainText() == "and for the dogs"
    assert [m.content for m in w.store.messages(dogs)] == ["Tell me about dogs.", "Dogs bark."]


def test_an_edit_put_away_comes_back_as_a_message_if_its_message_changed(qtbot, window):
    w = window
    cats, dogs = edit_put_away(w)
    assert not w.editing
    w.store.add_message(cats, "user", "And tigers?")      # (another window went on meanwhile)
    w.open_conversation(cats, show=True)
    assert not w.editing and w.composer.toPlainText() == "Tell me about lions."
    assert "back in the box as a new message" in w.banner.label.text() and w.banner.label.text() != EDIT_NOTE


def test_what_was_typed_and_not_sent_is_back_after_a_restart(qtbot, tmp_path):
    """A new user's text was lost at every restart: each conversation's, an edit under way with it,
    is kept at Quit and back in its box when the conversation opens; and, once read, out of the
    history, so a message sent since would not come back after a crash."""
    from desktop_app.ui.main_window import MainWindow

    history, settings = str(tmp_path / "history.db"), str(tmp_path / "settings.json")
    first = MainWindow(history, settings)
    qtbot.addWidget(first)
    cats, dogs = edit_put_away(first)
    gone = exchange(first, "Gone", "Tell me about moas.", "Moas are extinct.")
    first.open_conversation(gone, show=True)
    first.composer.setPlainText("for a conversation deleted")
    first.open_conversation(dogs, show=True)
    first.composer.setPlainText("half typed for the dogs")
    first.store.delete_conversation(gone)                # (by another window)
    first.close()
    again = MainWindow(history, settings)
    qtbot.addWidget(again)
    try:
        assert again.store.unsent() == {}
        again.open_conversation(dogs, show=True)
        assert again.composer.toPlainText() == "half typed for the dogs" and not again.editing
        again.open_conversation(cats, show=True)
        assert again.composer.toPlainText() == "Tell me about lions." and again.editing
        assert again.banner.label.text().startswith(EDIT_NOTE)
        assert set(again.drafts) == {dogs}
    finally:
        again.close()


def test_unsent_text_is_each_window_s_own_and_what_was_typed_with_none_open_is_kept_too(qtbot, tmp_path):
    """A second window's Quit deleted the first one's unsent text, and its New conversation took the
    other's new empty conversation (a review's finds); text typed with no conversation open was lost at
    Quit, and a message sent but not yet stored came back after the restart, as well as in the history."""
    from desktop_app.chat.history import HistoryStore
    from desktop_app.ui.main_window import MainWindow

    history, settings = str(tmp_path / "history.db"), str(tmp_path / "settings.json")
    a, b = MainWindow(history, settings), MainWindow(history, settings)
    qtbot.addWidget(a)
    qtbot.addWidget(b)
    cats, dogs = cats_and_dogs(a)
    a.open_conversation(cats, show=True)
    a.composer.setPlainText("half typed in A")
    b.new_conversation()
    a.open_conversation(dogs, show=True)
    a.new_conversation()
    assert a.current_id != b.current_id                  # (B's new one is B's)
    b.composer.setPlainText("And lions?")
    b.pending_text = "And lions?"                        # (sent: as submit leaves it, until the history has it)
    a.close()
    b.close()
    assert HistoryStore(history).unsent() == {cats: ("half typed in A", None)}
    again = MainWindow(history, settings)
    qtbot.addWidget(again)
    try:
        again.composer.setPlainText("typed with none open")
        again.close()
        last = MainWindow(history, settings)
        qtbot.addWidget(last)
        assert last.composer.toPlainText() == "typed with none open" and last.drafts == {cats: Draft("half typed in A")}
        last.close()
    finally:
        again.close()


def test_a_message_stored_after_its_conversation_was_left_is_not_kept_as_typed(qtbot, window):
    """Sent, then another conversation opened before the history had it: the text put away with its
    conversation goes once it is stored, as the box empties when it stays open (_on_message_stored)."""
    w = window
    cats, dogs = cats_and_dogs(w)
    w.open_conversation(cats, show=True)
    w.composer.setPlainText("And lions?")
    w.pending_text = "And lions?"                        # (as submit leaves it, until the history has it)
    w.open_conversation(dogs, show=True)
    assert w.drafts[cats] == Draft("And lions?")
    w.composer.setPlainText("And wolves?")
    w._on_message_stored(cats)
    assert cats not in w.drafts and w.composer.toPlainText() == "And wolves?" and w.pending_text == ""


def test_edit_last_does_not_write_over_a_message_not_sent(qtbot, window):
    """Ctrl+E put the last message in place of what was typed, and Esc then left the box empty (a new
    user's try): with other text in the box, it says to send or clear it first."""
    w = window
    cats, _ = cats_and_dogs(w)
    w.open_conversation(cats, show=True)
    w.composer.setPlainText("draft B")
    w.edit_last()
    assert not w.editing and w.composer.toPlainText() == "draft B"
    assert w.banner.label.text().startswith("The box holds a message you have not sent")
    w.composer.setPlainText("draft B, longer")           # (typing on: the note stays)
    assert not w.banner.isHidden()
    w.worker.busyChanged.emit(True)                      # (a regenerate begins: it is past; it stayed up, a
    assert w.banner.isHidden()                           # new user's try)
    w.worker.busyChanged.emit(False)
    w.edit_last()
    w.composer.clear()                                   # (emptied: past too)
    assert w.banner.isHidden()
    w.composer.setPlainText("Tell me about cats.")       # (the message itself, or nothing: editing starts)
    w.edit_last()
    assert w.editing and w.banner.label.text() == EDIT_NOTE


def test_deleting_the_open_conversation_deletes_what_was_typed_for_it(qtbot, window):
    """(Kept, it followed into the next conversation opened: the very thing the box per conversation ends.)"""
    w = window
    cats, dogs = cats_and_dogs(w)
    w.open_conversation(cats, show=True)
    w.composer.setPlainText("half typed for the cats")
    bar = w.sidebar
    w.refresh_conversations()                            # (the list shows it chosen, as after a click)
    assert bar.current_id() == cats and bar.rename_button.isEnabled() and bar.delete_button.isEnabled()
    w._delete(cats)
    assert w.composer.toPlainText() == "" and cats not in w.drafts
    # none is open, nor chosen in the list: Rename and Delete rest (they stayed on and did nothing: a
    # new user's try) until one is
    assert w.current_id is None and bar.list.count() == 1
    assert not bar.rename_button.isEnabled() and not bar.delete_button.isEnabled()
    bar.list.setCurrentRow(0)
    assert w.current_id == dogs and bar.rename_button.isEnabled() and bar.delete_button.isEnabled()
    w.open_conversation(dogs, show=True)
    assert w.composer.toPlainText() == ""


def test_an_edit_put_away_behind_text_typed_with_none_open_says_why_it_is_a_message(qtbot, window):
    w = window
    cats, dogs = edit_put_away(w)
    w._delete(dogs)                                       # (no conversation open)
    w.composer.setPlainText("typed with none open")
    w.open_conversation(cats, show=True)
    assert not w.editing and w.composer.toPlainText() == "typed with none open\n\nTell me about lions."
    assert "it follows what you typed with no conversation open" in w.banner.label.text()


# -- a message sent while a reply runs: the window with its requests to the worker recorded, not sent

@pytest.fixture
def recorded(window):
    """The window as if models were loaded, its requests to the worker recorded in `window.sent`."""
    w = window
    w.sent = []
    for signal in (w.requestGenerate, w.requestDrop):
        signal.disconnect()
    w.requestGenerate.connect(lambda r: w.sent.append((r.kind, r.conversation_id, r.text)))
    w.requestDrop.connect(lambda c, _options, text: w.sent.append(("drop", c, text)))
    w.loaded = LoadedPair("/models/target.gguf", None, "", 2048)
    w.stack.setCurrentWidget(w.chat)
    return w


def enter(w, text):
    w.composer.setPlainText(text)
    w.submit(text)


def reply_ends(w):
    w.reply.end()
    w.worker.busyChanged.emit(False)


def test_a_message_sent_while_a_reply_runs_goes_once_when_it_ends(qtbot, recorded):
    w = recorded
    cats = exchange(w, "Cats", "Tell me about cats.", "Cats purr.")
    w.open_conversation(cats, show=True)
    enter(w, "And lions?")
    assert w.sent == [("send", cats, "And lions?")] and w.busy
    enter(w, "And lions?")                                # (Enter twice: it is on its way, nothing waits)
    assert w.queued is None and w.banner.isHidden()
    w._on_message_stored(cats)
    enter(w, "And tigers?")
    assert w.banner.label.text() == "A reply is being written; your message will be sent when it ends."
    reply_ends(w)
    assert w.sent[1:] == [("send", cats, "And tigers?")] and w.banner.isHidden() and w.queued is None
    reply_ends(w)                                         # (sent once)
    assert len(w.sent) == 2


def test_a_stop_as_a_reply_ends_does_not_stop_the_waiting_message_s_reply(qtbot, recorded, monkeypatch):
    """Stop pressed as a reply ended reached the window after the reply of the message that waited had
    begun, and stopped that one (a new user's try). Within STOP_GRACE_S of it beginning by itself as the
    reply before it ended, a Stop is taken as meant for that reply: the banner says so, and a second Stop
    stops it. Not a reply sent by hand, nor one sent by itself long after the last reply ended."""
    import types

    from desktop_app.ui import live_reply, window_models
    from desktop_app.ui.window_models import STOP_GRACE_S

    now = [1000.0]
    clock = types.SimpleNamespace(monotonic=lambda: now[0])
    monkeypatch.setattr(live_reply, "time", clock)
    monkeypatch.setattr(window_models, "time", clock)
    w = recorded
    cancels = []
    monkeypatch.setattr(w.worker, "cancel", lambda: cancels.append(w.generating_id))
    cats = exchange(w, "Cats", "Tell me about cats.", "Cats purr.")
    w.open_conversation(cats, show=True)
    enter(w, "And lions?")
    w._on_message_stored(cats)
    enter(w, "And tigers?")
    now[0] += 5.0
    reply_ends(w)                                         # (the waiting message goes at once)
    assert w.sent[1:] == [("send", cats, "And tigers?")] and w.busy
    now[0] += 0.9 * STOP_GRACE_S
    assert w.stop() and cancels == []
    assert w.banner.label.text().startswith("The reply had ended as you pressed Stop, and the message that waited "
                                            "was sent: its reply goes on.")
    assert w.stop() and cancels == [cats]                 # (pressed again: stopped)
    now[0] += 0.1
    reply_ends(w)
    enter(w, "And bears?")                                # a reply begun by Send is stopped at once,
    assert w.stop() and cancels == [cats] * 2             # however soon after the last one ended
    w._on_message_stored(cats)
    enter(w, "And wolves?")
    reply_ends(w)
    now[0] += STOP_GRACE_S                                # (later than that, it is meant for the new reply)
    assert w.stop() and cancels == [cats] * 3
    w._on_message_stored(cats)
    enter(w, "And foxes?")
    now[0] += 2 * STOP_GRACE_S                            # (sent by itself, but long after a reply ended: a
    w.worker.busyChanged.emit(False)                      # compare's end, say)
    assert w.sent[-1] == ("send", cats, "And foxes?")
    assert w.stop() and cancels == [cats] * 4


def test_a_message_that_waited_goes_to_its_own_conversation_while_another_is_open(qtbot, recorded):
    """A user looked at another conversation while their message waited, and it was not sent, though the
    banner had said it would be: it is sent in its own conversation, wherever the user is then. One
    message waits at a time; changed meanwhile, it is not sent, and the banner says so."""
    w = recorded
    cats, dogs = cats_and_dogs(w)
    w.open_conversation(cats, show=True)
    enter(w, "And lions?")
    w._on_message_stored(cats)
    enter(w, "And tigers?")
    w.open_conversation(dogs, show=True)
    assert w.banner.label.text().endswith("will be sent when it ends.") and w.composer.toPlainText() == ""
    enter(w, "And wolves?")                               # (one at a time: this one stays in its box)
    assert w.banner.label.text().startswith("A message is waiting already, in “Cats”")
    w.open_conversation(cats, show=True)                  # (there and back: it still waits)
    assert w.composer.toPlainText() == "And tigers?"
    w.open_conversation(dogs, show=True)
    reply_ends(w)
    assert w.sent == [("send", cats, "And lions?"), ("send", cats, "And tigers?")] and w.banner.isHidden()
    assert w.current_id == dogs and w.composer.toPlainText() == "And wolves?"
    w._on_message_stored(cats)
    assert cats not in w.drafts
    w.open_conversation(cats, show=True)
    enter(w, "And bears?")
    w.open_conversation(dogs, show=True)
    w.drafts[cats] = Draft("And bears? No, and foxes.")   # (changed meanwhile, as if typed there)
    reply_ends(w)
    assert len(w.sent) == 2 and "was not sent" in w.banner.label.text()
    assert w.drafts[cats] == Draft("And bears? No, and foxes.")
    w.open_conversation(dogs, show=True)
    enter(w, "And wolves?")                               # (a reply in the dogs' conversation now)
    w.open_conversation(cats, show=True)
    enter(w, "And foxes?")
    w.open_conversation(dogs, show=True)
    w._delete(cats)                                       # (its conversation deleted: it waits no more)
    assert w.queued is None and w.banner.isHidden(), w.banner.label.text()
    reply_ends(w)
    assert w.sent[2:] == [("send", dogs, "And wolves?")] and w.banner.isHidden()


def test_a_message_that_waited_leaves_an_overflow_banner_and_its_choices_alone(qtbot, recorded):
    w = recorded
    cats = exchange(w, "Cats", "Tell me about cats.", "Cats purr.")
    w.open_conversation(cats, show=True)
    enter(w, "And lions?")
    enter(w, "And tigers?")
    w._on_overflow(cats, "The conversation does not fit.", True, "And lions?")
    reply_ends(w)
    assert w.sent == [("send", cats, "And lions?")]       # (not "And tigers?" in its place)
    assert w.banner.label.text().startswith("The conversation does not fit.")
    shown = lambda: [b.text() for b in w.banner.buttons if b.isVisibleTo(w.banner)]   # noqa: E731
    assert shown() == ["Leave out oldest turns and send", "New conversation", "Raise the context size…"]
    w._on_overflow(cats, "Only the last message fits.", True, "And lions?", only_last=True)
    assert shown() == ["Leave out every earlier turn and send", "New conversation", "Raise the context size…"]


def test_esc_ends_an_edit_while_models_load(qtbot, recorded):
    """Loads keep the window busy too: Esc stopped nothing, and the edit stayed."""
    w = recorded
    cats = exchange(w, "Cats", "Tell me about cats.", "Cats purr.")
    w.open_conversation(cats, show=True)
    w.edit_last()
    w.busy = True                                         # (as a load leaves it: no reply, no compare)
    w._escape()
    assert not w.editing and w.composer.toPlainText() == ""


def test_a_message_refused_in_another_conversation_goes_back_to_its_own_box(qtbot, recorded):
    w = recorded
    cats, dogs = cats_and_dogs(w)
    w.open_conversation(dogs, show=True)
    w.composer.setPlainText("for the dogs")
    w._on_request_refused(GenerateRequest("send", cats, "And lions?", w._options()), "The engine is not running.")
    assert w.composer.toPlainText() == "for the dogs" and w.drafts[cats] == Draft("And lions?")
    w._on_request_refused(GenerateRequest("edit", dogs, "Tell me about wolves.", w._options()), "Not running.")
    assert w.composer.toPlainText() == "for the dogs"     # (the box is not written over)


@pytest.mark.network
def test_the_conversation_used_last_opens_once_models_are_loaded(qtbot, tmp_path, test_model_path):
    """After a restart the view was blank (a new user's try): once models are loaded the conversation used
    last opens; not before, where a message sent from the welcome page would have gone into it out of
    sight. At start the box has the focus (typing went into the search box), and a view with no
    messages says how to start."""
    from desktop_app.ui.main_window import MainWindow
    from tests.test_ui_window import load

    history, settings = str(tmp_path / "history.db"), str(tmp_path / "settings.json")
    first = MainWindow(history, settings)
    qtbot.addWidget(first)
    assert first.focusWidget() is first.composer
    first.new_conversation()
    assert first.chat.messages == [] and first.chat.empty_note.isVisibleTo(first.chat)
    cats = exchange(first, "Cats", "Tell me about cats.", "Cats purr.")
    exchange(first, "Dogs", "Tell me about dogs.", "Dogs bark.")
    first.store.add_message(cats, "user", "And lions?")        # (the cats' is now the newest)
    first._delete(first.current_id)                            # (the empty one: none is open at Quit)
    first.close()
    again = MainWindow(history, settings)
    qtbot.addWidget(again)
    try:
        assert again.current_id is None and again.focusWidget() is again.composer
        load(qtbot, again, test_model_path, None)
        assert again.current_id == cats and again.stack.currentWidget() is again.chat
        assert [m.text for m in again.chat.messages][-1] == "And lions?"
        assert not again.chat.empty_note.isVisibleTo(again.chat) and again.sidebar.current_id() == cats
    finally:
        again.close()


def test_after_a_restart_the_conversation_open_at_quit_opens_and_text_typed_with_none_open_stays_apart(
        qtbot, tmp_path):
    """The newest conversation opened after a restart, not the one open at Quit; and text typed with none
    open joined that conversation's own unsent text (a new user's tries). open_latest runs once models
    are loaded (test_the_conversation_used_last_opens_once_models_are_loaded)."""
    from desktop_app.ui.main_window import MainWindow

    history, settings = str(tmp_path / "history.db"), str(tmp_path / "settings.json")
    first = MainWindow(history, settings)
    qtbot.addWidget(first)
    cats, dogs = cats_and_dogs(first)                  # (the dogs' is the newest)
    first.open_conversation(cats, show=True)
    first.composer.setPlainText("for the cats")
    first.open_conversation(dogs, show=True)
    first.open_conversation(cats, show=True)
    first.close()
    again = MainWindow(history, settings)
    qtbot.addWidget(again)
    again.store_settings()                   # (as loading the models does, before any conversation is open: it
    again.open_latest()                      # wrote "none open" over the one open at Quit, a new user's try)
    assert again.current_id == cats and again.composer.toPlainText() == "for the cats"
    again._delete(cats)
    again.composer.setPlainText("typed with none open")
    again.close()
    last = MainWindow(history, settings)
    qtbot.addWidget(last)
    try:
        last.open_latest()
        assert last.current_id is None and last.composer.toPlainText() == "typed with none open"
    finally:
        last.close()


def test_leaving_out_turns_and_answering_is_one_busy_spell(qtbot, tmp_path):
    """The worker said it was idle between leaving out the turns and answering, and a message waiting
    for the reply's end went before the reply (a review's find)."""
    from types import SimpleNamespace

    from desktop_app.chat.session import ContextOverflow
    from desktop_app.ui.worker import EngineWorker

    class Session:                                        # what drop_oldest_turns asks of a session
        overflow = False
        store = SimpleNamespace(messages=lambda cid: [])

        def add_user_message(self, cid, text):
            pass

        def drop_oldest_turns(self, cid, options):
            if self.overflow:
                raise ContextOverflow(5000, 2048, 0, False)

        def take_back(self, cid, text):
            return True

    worker = EngineWorker(str(tmp_path / "history.db"))
    worker.session = Session()
    busy, answered = [], []
    worker.busyChanged.connect(busy.append)
    worker.generate = lambda request: answered.append((list(busy), request.kind, request.text))
    worker.drop_oldest_turns(7, None, "And lions?")
    assert answered == [([True], "reply", "And lions?")]  # (busy from the start to the answer's own end)
    busy.clear()
    worker.session.overflow = True
    worker.drop_oldest_turns(7, None, "And lions?")
    assert busy == [True, False] and len(answered) == 1


def test_edit_and_regenerate_say_why_they_wait_and_the_menu_offers_them_only_where_they_apply(qtbot, recorded):
    """Ctrl+E during a reply did nothing and said nothing; in an empty conversation the Chat menu offered
    Regenerate and Edit last message while their buttons were greyed out (a new user's try)."""
    w = recorded
    w.new_conversation()
    assert not w.regenerate_action.isEnabled() and not w.edit_action.isEnabled()
    cats, _ = cats_and_dogs(w)
    w.open_conversation(cats, show=True)
    assert w.regenerate_action.isEnabled() and w.edit_action.isEnabled()
    enter(w, "And lions?")
    assert w.busy and w.edit_action.isEnabled() and not w.edit_button.isEnabled()
    w.edit_last()
    assert not w.editing and w.banner.label.text().startswith("Edit last message waits for what is running to end")
    w.regenerate()
    assert w.banner.label.text().startswith("Regenerate waits") and len(w.sent) == 1
    enter(w, "And tigers?")                               # (a message that waits: its note is not replaced)
    w.edit_last()
    assert w.banner.kind == "queued"


def test_the_rename_dialog_shows_a_title_made_from_a_first_message_whole(qtbot):
    """At Qt's own width (200 px) the rename field showed the last 25 characters of a title made from a
    first message, its start scrolled out of view; it is now as wide as the title, within bounds."""
    from PySide6.QtWidgets import QLineEdit
    from desktop_app.ui.conversation_list import RENAME_WIDTH, ConversationList, rename_dialog
    bar = ConversationList()
    qtbot.addWidget(bar)
    title = "Write a Python function that checks whether a number is prime, with tests"
    dialog = rename_dialog(bar, title)
    dialog.show()
    field = dialog.findChild(QLineEdit)
    qtbot.waitUntil(lambda: field.isVisible())
    assert field.text() == title and dialog.windowTitle() == "Rename conversation"
    assert field.width() > field.fontMetrics().horizontalAdvance(title)
    dialog.close()
    assert rename_dialog(bar, "Cats").width() == RENAME_WIDTH[0]
    assert rename_dialog(bar, title * 4).width() == RENAME_WIDTH[1]


def test_the_list_takes_a_title_as_soon_as_its_message_is_stored(qtbot, recorded):
    """An edit of a first message renames the conversation (ChatSession.replace_last_user_message); the
    list showed the old title until a reply started, which a refusal or a fault may stop (a review)."""
    w = recorded
    cid = exchange(w, "What is the capital of Australia?", "What is the capital of Australia?", "Canberra.")
    w.open_conversation(cid, show=True)
    w.store.rename(cid, "What is the capital of New Zealand?")   # (what the worker's edit did, in the history)
    w._on_message_stored(cid)
    assert w.sidebar.list.currentItem().text() == "What is the capital of New Zealand?"


def test_regenerate_and_compare_are_off_while_the_last_message_is_edited(qtbot, recorded):
    """They answer the message as stored: Regenerate during an edit wrote a third reply to the old
    message, the edited text still in the box and the banner still saying "Editing …" (a new user's try)."""
    w = recorded
    cats, _ = cats_and_dogs(w)
    w.open_conversation(cats, show=True)
    assert w.regenerate_button.isEnabled() and w.compare_button.isEnabled() and w.regenerate_action.isEnabled()
    w.edit_last()
    w.composer.setPlainText("Tell me about lions.")
    assert not w.regenerate_button.isEnabled() and not w.regenerate_action.isEnabled()
    assert not w.compare_button.isEnabled()
    w.regenerate()                                        # (as Ctrl+R would, were it on)
    w.compare()
    assert not w.sent and not w.busy and w.editing and w.banner.kind == "edit"
    assert [m.content for m in w.store.messages(cats)] == ["Tell me about cats.", "Cats purr."]
    w._cancel_edit()
    assert w.regenerate_button.isEnabled() and w.compare_button.isEnabled() and w.regenerate_action.isEnabled()


def test_a_context_raised_but_still_too_small_keeps_the_ways_on(qtbot, recorded):
    """After Apply and reload, the banner says whether the context now holds what the conversation needs:
    where it does, its choices are past (they stayed beside "press Send": a new user's try); where it
    does not, they stay, and it says how far short it is."""
    w = recorded
    cats = exchange(w, "Cats", "Tell me about cats.", "Cats purr.")
    w.open_conversation(cats, show=True)
    w.settings_panel.max_tokens.setValue(1024)
    w._on_overflow(cats, "The conversation does not fit.", True, "And lions?", n_prompt=3700)
    w._overflow_after_load(4096)        # (3700 + 256 would fit, but a reply's room grows with the context: 512)
    assert w.banner.label.text() == ("The context now holds 4096 tokens (it held 2048), still short of the prompt's "
                                     "3700 tokens plus 512 to begin a reply.")
    shown = [b.text() for b in w.banner.buttons if b.isVisibleTo(w.banner)]
    assert shown == ["Leave out oldest turns and send", "New conversation", "Raise the context size…"]
    w._overflow_after_load(8192)
    assert w.banner.label.text() == ("The context now holds 8192 tokens (it held 4096), enough for the prompt's "
                                     "3700 tokens plus 1024 to begin a reply: press Send to send the message in the box.")
    assert not [b for b in w.banner.buttons if b.isVisibleTo(w.banner)] and w.composer.toPlainText() == "And lions?"


def test_esc_in_another_conversation_says_which_reply_it_stopped(qtbot, recorded):
    """Esc where no reply is written stops the one written elsewhere, as the busy note says ("stop it
    (Esc)"): it was stopped out of sight, and nothing said so (a new user's try)."""
    w = recorded
    cats, dogs = cats_and_dogs(w)
    w.open_conversation(cats, show=True)
    enter(w, "And lions?")
    assert w.generating_id == cats
    w.open_conversation(dogs, show=True)
    w._escape()
    assert w.banner.label.text() == "Stopped the reply in 'Cats'." and w.banner.buttons[0].text() == "Open it"
    qtbot.mouseClick(w.banner.buttons[0], Qt.LeftButton)
    assert w.current_id == cats
    w._escape()                                           # (in its own conversation: Stop says nothing more)
    assert w.banner.isHidden()


def test_a_right_click_on_a_conversation_offers_rename_export_and_delete(qtbot, window, monkeypatch):
    """Right-click on a conversation in the list chose it and offered nothing (a new user's try): it now
    offers what the buttons and the File menu do, for that conversation. (Rename's and Export's own
    dialogs are tested with their menu items; here, that the menu holds those very items.)"""
    from PySide6.QtWidgets import QMessageBox
    w = window
    cats, dogs = cats_and_dogs(w)
    w.open_conversation(dogs, show=True)
    menu = w.sidebar.context_menu()
    rename = next(a for a in w.actions() if a.text() == "Rename conversation")
    assert menu.actions() == [rename, w.export_action, w.sidebar.delete_action]
    row = next(i for i in range(w.sidebar.list.count()) if w.sidebar.list.item(i).text() == "Cats")
    w.sidebar._menu_at(w.sidebar.list.visualItemRect(w.sidebar.list.item(row)).center())
    assert w.current_id == cats and w.sidebar.menu.isVisible()      # (chosen, as a click chooses it)
    w.sidebar.menu.close()
    assert w.export_action.isEnabled() and w.sidebar.delete_action.isEnabled()
    monkeypatch.setattr(QMessageBox, "question", lambda *a: QMessageBox.Yes)
    menu.actions()[2].trigger()
    assert [c.id for c in w.store.list_conversations()] == [dogs]
