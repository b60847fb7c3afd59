"""What is typed in the message box belongs to the conversation it was typed in (a new user's try: a
half-typed message followed them into another conversation, and was sent there)."""
from __future__ import annotations

from desktop_app.ui.window_conversations import EDIT_NOTE, Draft


def exchange(window, title: str, question: str, answer: str) -> int:
    cid = window.store.create_conversation(title, "SYSTEM")
    window.store.add_message(cid, "user", question)
    window.store.add_message(cid, "assistant", answer)
    window.refresh_conversations()
    return cid


def test_each_conversation_keeps_what_was_typed_in_its_box(qtbot, window):
    w = window
    cats = exchange(w, "Cats", "Tell me about cats.", "Cats purr.")
    dogs = exchange(w, "Dogs", "Tell me about dogs.", "Dogs bark.")
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
    cats = exchange(w, "Cats", "Tell me about cats.", "Cats purr.")
    dogs = exchange(w, "Dogs", "Tell me about dogs.", "Dogs bark.")
    w.open_conversation(cats, show=True)
    w.edit_last()
    w.composer.setPlainText("Tell me about lions.")
    w.open_conversation(dogs, show=True)
    assert not w.editing
    w.store.add_message(cats, "user", "And tigers?")      # (another window went on meanwhile)
    w.open_conversation(cats, show=True)
    assert not w.editing and w.composer.toPlainText() == "Tell me about lions."
    assert "back in the box as a new message" in w.banner.label.text() and w.banner.label.text() != EDIT_NOTE


def test_a_message_stored_after_its_conversation_was_left_is_not_kept_as_typed(qtbot, window):
    """Sent, then another conversation opened before the history had it: the text put away with its
    conversation goes once it is stored, as the box empties when it stays open (_on_message_stored)."""
    w = window
    cats = exchange(w, "Cats", "Tell me about cats.", "Cats purr.")
    dogs = exchange(w, "Dogs", "Tell me about dogs.", "Dogs bark.")
    w.open_conversation(cats, show=True)
    w.composer.setPlainText("And lions?")
    w.pending_text = "And lions?"                        # (as submit leaves it, until the history has it)
    w.open_conversation(dogs, show=True)
    assert w.drafts[cats] == Draft("And lions?")
    w.composer.setPlainText("And wolves?")
    w._on_message_stored(cats)
    assert cats not in w.drafts and w.composer.toPlainText() == "And wolves?" and w.pending_text == ""


def test_the_window_opens_on_the_conversation_used_last_with_the_box_ready(qtbot, tmp_path):
    """It opened on nothing, typing went into the search box, and once models were loaded the view was
    blank (a new user's try): the conversation used last is open again, the box has the focus, and a
    view with no messages says how to start."""
    from desktop_app.ui.main_window import MainWindow

    history, settings = str(tmp_path / "history.db"), str(tmp_path / "settings.json")
    first = MainWindow(history, settings)
    qtbot.addWidget(first)
    assert first.current_id is None and first.focusWidget() is first.composer
    first.new_conversation()
    assert first.chat.messages == [] and first.chat.empty_note.isVisibleTo(first.chat)
    cats = exchange(first, "Cats", "Tell me about cats.", "Cats purr.")
    exchange(first, "Dogs", "Tell me about dogs.", "Dogs bark.")
    first.store.add_message(cats, "user", "And lions?")        # (the cats' is now the one used last)
    first.close()
    again = MainWindow(history, settings)
    qtbot.addWidget(again)
    try:
        assert again.current_id == cats and again.focusWidget() is again.composer
        assert [m.text for m in again.chat.messages][-1] == "And lions?"
        assert not again.chat.empty_note.isVisibleTo(again.chat)
        assert again.sidebar.current_id() == cats
    finally:
        again.close()
