"""The chat window end to end (pytest-qt, offscreen) on the real test pair."""
from __future__ import annotations

import dataclasses
import gc
import os
import time

import pytest
from PySide6.QtCore import QElapsedTimer, Qt, QTimer
from PySide6.QtGui import QAction

from desktop_app.chat.history import HistoryStore
from desktop_app.engine.events import GenerationStats, RoundEvent
from desktop_app.engine.number_text import rate_text, rates_finer
from desktop_app.chat.rules import LEFT_OUT_NOTE
from desktop_app.chat.session import DEFAULT_TITLE, reply_room
from desktop_app.ui.main_window import MainWindow
from desktop_app.ui.window_conversations import EDIT_NOTE
from desktop_app.ui.window_models import QUEUED_NOTE
from desktop_app.ui.worker import GenerateRequest

LONG_PROMPT = "Write a long story about a dragon who learns to code. Make it at least five paragraphs."
TIMEOUT_MS = 120_000


# Worker signals are waited for through the window's state, not qtbot.waitSignal: the worker emits
# them on its own thread, where waitSignal's timer must not be stopped.

def load(qtbot, window, target, draft):
    window.load_pair(target, draft)
    qtbot.waitUntil(lambda: window.loaded is not None and window.loaded.target == target and not window.busy,
                    timeout=TIMEOUT_MS)


def load_fails(qtbot, window, target, draft):
    before = window.model_bar.status.text()
    window.load_pair(target, draft)
    qtbot.waitUntil(lambda: not window.loading and not window.busy and window.model_bar.status.text() not in (before, ""),
                    timeout=TIMEOUT_MS)


def wait_idle(qtbot, window):
    qtbot.waitUntil(lambda: window.generating_id is None and not window.busy, timeout=TIMEOUT_MS)


def type_and_send(qtbot, window, text):
    window.composer.setFocus()
    window.composer.setPlainText(text)
    qtbot.keyClick(window.composer, Qt.Key_Return)


def stored(window, cid=None):
    store = HistoryStore(window.store.path)
    try:
        return store.messages(cid if cid is not None else window.current_id)
    finally:
        store.close()


@pytest.fixture
def loaded(qtbot, window, test_model_path, q2k_draft_path):
    load(qtbot, window, test_model_path, q2k_draft_path)
    window.settings_panel.temperature.setValue(0.0)
    window.settings_panel.max_tokens.setValue(48)
    return window


def test_first_run_page_without_models(qtbot, window):
    assert window.stack.currentWidget() is window.first_run
    assert window.first_run.fetch_button.isEnabled()
    # Send is not greyed out before a model is loaded (a user took that to mean the message could not go):
    # it does what Enter does, and the banner says how to load a model; the message stays in the box
    assert window.loaded is None and window.send_button.isEnabled()
    window.composer.setPlainText("Hello?")
    qtbot.mouseClick(window.send_button, Qt.LeftButton)
    assert "No model is loaded" in window.banner.label.text() and not window.banner.isHidden()
    assert window.composer.toPlainText() == "Hello?" and window.chat.messages == []
    # a click on Send or on the banner's buttons leaves the focus in the box (typing went nowhere)
    assert window.focusWidget() is window.composer
    window.banner.show_message("Edit the message?", [("Edit", lambda: None, True)])   # (a button that stays)
    qtbot.mouseClick(window.banner.buttons[0], Qt.LeftButton)
    assert not window.banner.isHidden() and window.focusWidget() is window.composer


def test_a_message_sent_while_the_models_load_is_sent_once_they_are_ready(qtbot, window, test_model_path,
                                                                         tmp_path):
    """Enter while the first models load: the banner says the message waits (not "no model is loaded"),
    the welcome page offers nothing meanwhile, and the message goes once the models are ready. When a
    load fails, a waiting message is not sent, and the banner says so."""
    window.settings_panel.max_tokens.setValue(8)
    window.load_pair(test_model_path, None)
    assert window.loading and not window.first_run.load_button.isEnabled()
    assert not window.first_run.fetch_button.isEnabled() and not window.first_run.status.isHidden()
    type_and_send(qtbot, window, "Say hi.")
    assert "will be sent once they are ready" in window.banner.label.text()
    assert window.composer.toPlainText() == "Say hi."             # not taken until it is stored
    qtbot.waitUntil(lambda: window.loaded is not None, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: [m.role for m in window.chat.messages] == ["user", "assistant"], timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)
    assert window.chat.messages[0].text == "Say hi." and window.composer.toPlainText() == ""
    assert not window.loading and window.first_run.status.isHidden()
    # (the session's first load on a CPU where repacking crashes says so, once: run alone, this test is it)
    assert window.banner.isHidden() or window.banner.label.text().startswith("Weight repacking is off")

    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model")
    window.load_pair(str(broken), None)
    type_and_send(qtbot, window, "And again?")
    qtbot.waitUntil(lambda: not window.loading and not window.busy, timeout=TIMEOUT_MS)
    assert "was not sent" in window.banner.label.text() and window.composer.toPlainText() == "And again?"
    assert [m.role for m in window.chat.messages] == ["user", "assistant"]      # nothing sent to the old model

    # written in one conversation, then another opened while the models load: not sent to that one
    first = window.current_id
    window.load_pair(test_model_path, None)
    type_and_send(qtbot, window, "Meant for the first.")
    window.new_conversation()
    qtbot.waitUntil(lambda: not window.loading and not window.busy, timeout=TIMEOUT_MS)
    assert "was not sent" in window.banner.label.text() and window.chat.messages == []
    assert "Meant for the first." not in [m.content for m in stored(window, first)]


@pytest.mark.network
def test_a_message_sent_before_loading_offers_to_load_the_chosen_pair_and_send_it(qtbot, window, test_model_path,
                                                                                  q2k_draft_path, tmp_path):
    window.model_bar.select(test_model_path, q2k_draft_path)
    window.settings_panel.temperature.setValue(0.0)
    window.settings_panel.max_tokens.setValue(8)
    type_and_send(qtbot, window, "Say hello.")
    assert window.loaded is None and window.composer.toPlainText() == "Say hello."
    assert "SmolLM2-135M-Instruct.Q4_1.gguf is chosen in the bar above" in window.banner.label.text()
    assert window.banner.buttons[0].text() == "Load and send"
    # another file chosen meanwhile: the banner speaks of that one (it went on naming the first: a user's try)
    notes = tmp_path / "notes.gguf"
    notes.write_text("not a model")
    window.model_bar.select(str(notes), None)
    assert "/notes.gguf, chosen in the bar above, cannot be loaded" in window.banner.label.text()   # (its whole path)
    assert window.banner.buttons[0].isHidden()
    window.model_bar.select(test_model_path, q2k_draft_path)
    assert "SmolLM2-135M-Instruct.Q4_1.gguf is chosen in the bar above" in window.banner.label.text()
    qtbot.mouseClick(window.banner.buttons[0], Qt.LeftButton)
    qtbot.waitUntil(lambda: window.loaded is not None and window.current_id is not None and len(stored(window)) == 2
                    and window.generating_id is None and not window.busy, timeout=TIMEOUT_MS)
    assert [m.role for m in stored(window)] == ["user", "assistant"] and stored(window)[0].content == "Say hello."
    assert window.loaded.draft == q2k_draft_path and window.composer.toPlainText() == ""


@pytest.mark.network
def test_with_a_draft_that_cannot_pair_the_banner_offers_the_target_alone(qtbot, window, test_model_path, gemma_path):
    """A new user's try: "Load and send" was offered for a pair the bar called unable to pair, and could
    only fail ("The models did not load, so your message was not sent")."""
    window.model_bar.select(test_model_path, gemma_path)
    window.settings_panel.max_tokens.setValue(4)
    type_and_send(qtbot, window, "Say hello.")
    assert ("SmolLM2-135M-Instruct.Q4_1.gguf is chosen in the bar above, but the draft gemma-3-270m.Q4_K_M.gguf "
            "cannot pair with it: the bar above says why") in window.banner.label.text()
    assert window.banner.buttons[0].text() == "Load SmolLM2-135M-Instruct.Q4_1.gguf alone and send"
    qtbot.mouseClick(window.banner.buttons[0], Qt.LeftButton)
    qtbot.waitUntil(lambda: window.loaded is not None and len(stored(window)) == 2 and window.generating_id is None
                    and not window.busy, timeout=TIMEOUT_MS)
    assert window.loaded.draft is None and window.model_bar.draft_path() is None
    assert stored(window)[0].content == "Say hello." and stored(window)[1].complete


def test_stopping_a_reply_does_not_cancel_a_load_asked_for_meanwhile(qtbot, loaded, test_model_path):
    """A pair chosen (from the recent pairs, or by applying loading settings) while a reply runs is loaded
    once the reply ends: Stop stops the reply, not the load waiting behind it."""
    w = loaded
    w.settings_panel.max_tokens.setValue(400)
    type_and_send(qtbot, w, LONG_PROMPT)
    qtbot.waitUntil(lambda: w.generating_id is not None and len(w.live_text) > 10, timeout=TIMEOUT_MS)
    w.load_pair(test_model_path, None)                    # waits behind the reply, and says so
    assert w.model_bar.status.text() == "Loading once the reply or compare ends…"
    bar = w.model_bar.progress                            # (an empty bar: a busy one read as full, a user's try)
    assert bar.isVisible() and (bar.maximum(), bar.value(), bar.format()) == (1000, 0, "")
    w.stop()
    qtbot.waitUntil(lambda: not w.loading and not w.busy, timeout=TIMEOUT_MS)
    assert w.loaded is not None and w.loaded.draft is None, w.model_bar.status.text()
    assert "cancelled" not in w.model_bar.status.text()


def test_esc_while_the_models_load_does_not_cancel_them(qtbot, window, test_model_path):
    """Esc (Stop) stops a reply; a load goes on (the model bar's Cancel is the one that cancels it)."""
    window.load_pair(test_model_path, None)               # (the engine process starts: seconds)
    qtbot.waitUntil(lambda: window.busy, timeout=TIMEOUT_MS)
    qtbot.keyClick(window, Qt.Key_Escape)
    window.stop()
    qtbot.waitUntil(lambda: not window.loading and not window.busy, timeout=TIMEOUT_MS)
    assert window.loaded is not None, window.model_bar.status.text()


def test_cancelling_the_demo_fetch_says_so_and_loads_nothing(qtbot, window, monkeypatch):
    from types import SimpleNamespace

    from desktop_app import models

    def fetch_until_cancelled(model, progress=None, cancel=None):      # a download that never ends by itself
        while not cancel():
            time.sleep(0.01)
        raise models.FetchCancelled(f"fetch of {model.key} cancelled")

    monkeypatch.setattr(models, "inspect", lambda m: SimpleNamespace(verified=False))   # (not fetched yet)
    monkeypatch.setattr(models, "fetch", fetch_until_cancelled)
    window.load_demo()
    qtbot.waitUntil(lambda: window.busy, timeout=TIMEOUT_MS)
    qtbot.mouseClick(window.model_bar.cancel_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: not window.loading and not window.busy, timeout=TIMEOUT_MS)
    assert window.model_bar.status.text() == "Fetching the demo pair was cancelled." and window.loaded is None


def test_the_model_bars_cancel_stops_a_running_load(qtbot, window, test_model_path):
    """Cancel is heard while the worker's thread is busy with the load it cancels (it was queued behind it,
    so the models loaded anyway), and the next load goes ahead. (The engine process takes a second or more
    to start and load, far longer than the click after `busy`.)"""
    window.load_pair(test_model_path, None)               # (the engine process starts: seconds)
    qtbot.waitUntil(lambda: window.busy, timeout=TIMEOUT_MS)
    assert window.model_bar.cancel_button.isVisible()
    qtbot.mouseClick(window.model_bar.cancel_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: not window.loading and not window.busy, timeout=TIMEOUT_MS)
    assert window.loaded is None and window.model_bar.status.text() == "Loading was cancelled."
    load(qtbot, window, test_model_path, None)


@pytest.mark.network
def test_send_streams_a_reply_into_the_view_and_the_database(qtbot, loaded):
    w = loaded
    assert w.stack.currentWidget() is w.chat
    # plain decoding's rate, from the target's pass timed at load in the engine process, is what the
    # panel compares a reply with until it times plain steps of its own
    assert w.loaded.plain_step_s > 0 and w.spec_panel._plain_known == pytest.approx(1 / w.loaded.plain_step_s)
    tokens = []
    w.worker.token.connect(tokens.append)         # runs on the worker thread; a list append is safe
    type_and_send(qtbot, w, "Write a Python function that adds two numbers.")
    qtbot.waitUntil(lambda: w.composer.toPlainText() == "", timeout=TIMEOUT_MS)    # sent, and stored
    wait_idle(qtbot, w)
    assert len(tokens) > 5
    roles = [m.role for m in w.chat.messages]
    assert roles == ["user", "assistant"]
    reply_view = w.chat.messages[-1].text
    db = stored(w)
    assert [m.role for m in db] == ["user", "assistant"] and db[-1].complete
    assert db[-1].content == reply_view and len(reply_view) > 10
    assert "".join(t.text for t in tokens) in reply_view or reply_view.startswith("".join(t.text for t in tokens)[:10])
    assert db[-1].rounds and db[-1].stats["n_tokens"] == len(tokens)
    assert w.sidebar.list.count() == 1 and w.sidebar.list.item(0).text().startswith("Write a Python function")
    # the speculation panel saw the rounds
    assert "tok/s" in w.spec_panel.labels["speed"].text()
    assert w.spec_panel._plain_known == pytest.approx(GenerationStats.from_json(db[-1].stats).plain_tokens_per_s)
    assert w.spec_panel.strip.round_model.rowCount() >= 3
    # 48 tokens (Max tokens) are too few for this answer: the reply says it was cut off beside its name
    assert db[-1].stats["stop_reason"] == "max_tokens" and db[-1].stats["n_tokens"] == 48
    assert w.chat.messages[-1].status.text() == "cut off: the reply reached Max tokens (Settings)"


@pytest.mark.network
def test_shift_enter_makes_a_new_line(qtbot, loaded):
    loaded.composer.setFocus()
    qtbot.keyClicks(loaded.composer, "line one")
    qtbot.keyClick(loaded.composer, Qt.Key_Return, Qt.ShiftModifier)
    qtbot.keyClicks(loaded.composer, "line two")
    assert loaded.composer.toPlainText() == "line one\nline two"
    assert loaded.generating_id is None


@pytest.mark.network
def test_stop_mid_reply_keeps_the_partial_text(qtbot, loaded):
    w = loaded
    w.settings_panel.max_tokens.setValue(2000)
    type_and_send(qtbot, w, LONG_PROMPT)
    qtbot.waitUntil(lambda: len(w.live_text) > 40, timeout=TIMEOUT_MS)
    assert w.send_button.text() == "Stop"
    # in another conversation the button sends, and says why it cannot yet: it stopped the reply out of
    # sight, and Enter there did nothing and said nothing (a new user's try)
    writing = w.current_id
    w.new_conversation()
    waiting = w.current_id
    assert w.send_button.text() == "Send"
    type_and_send(qtbot, w, "What is 2+2?")
    qtbot.mouseClick(w.send_button, Qt.LeftButton)
    assert w.busy and w.generating_id == writing and w.composer.toPlainText() == "What is 2+2?"
    assert w.banner.label.text().startswith("A reply is being written in “")
    items = {w.sidebar.list.item(i).data(Qt.UserRole): w.sidebar.list.item(i) for i in range(w.sidebar.list.count())}
    assert items[writing].font().italic() and "a reply is being written here" in items[writing].toolTip()   # (the
    assert not items[waiting].font().italic()             # list said nothing of which: a new user's try)
    w.settings_panel.temperature.setValue(1.5)            # (changed during a reply, nothing said when it applied)
    assert w.settings_panel.next_reply.isVisibleTo(w.settings_panel) and "next one" in w.settings_panel.next_reply.text()
    assert w.banner.label.text().endswith(f"your message in “{w._title(waiting)}” will be sent when it ends.")
    w.open_conversation(writing)              # (the message waits in its own conversation's box; the note,
    assert "your message in “" in w.banner.label.text()   # which follows, says which: a new user's try)
    assert w.composer.toPlainText() == ""
    assert w.send_button.text() == "Stop"
    qtbot.mouseClick(w.send_button, Qt.LeftButton)
    wait_idle(qtbot, w)
    assert not any(w.sidebar.list.item(i).font().italic() for i in range(w.sidebar.list.count()))
    assert not w.settings_panel.next_reply.isVisibleTo(w.settings_panel)
    w.settings_panel.temperature.setValue(0.7)            # (and nothing said with no reply being written)
    assert not w.settings_panel.next_reply.isVisibleTo(w.settings_panel)
    db = stored(w)
    assert db[-1].status == "cancelled" and len(db[-1].content) > 40
    assert len(db[-1].token_ids) < 2000
    assert "stopped" in w.chat.messages[-1].status.text()
    # the reply stopped: the message that waited goes, in its own conversation (this one stays open)
    qtbot.waitUntil(lambda: [m.role for m in stored(w, waiting)] == ["user", "assistant"] and not w.busy,
                    timeout=TIMEOUT_MS)
    assert stored(w, waiting)[0].content == "What is 2+2?" and w.current_id == writing
    w.open_conversation(waiting)
    assert w.composer.toPlainText() == "" and w.chat.messages[0].text == "What is 2+2?"


@pytest.mark.network
def test_a_message_sent_while_a_reply_is_written_goes_when_it_ends(qtbot, loaded):
    """Enter while a reply is written: the message waits, the banner says so, and it is sent once the
    reply ends. (Enter said to wait and send it again, and that banner stayed after the reply: a new
    user's try.)"""
    w = loaded
    type_and_send(qtbot, w, "Name three colours.")
    assert w.busy
    type_and_send(qtbot, w, "And three animals?")
    assert w.banner.label.text() == "A reply is being written; your message will be sent when it ends."
    assert w.composer.toPlainText() == "And three animals?"
    qtbot.waitUntil(lambda: [m.role for m in stored(w)] == ["user", "assistant", "user", "assistant"]
                    and not w.busy, timeout=TIMEOUT_MS)
    assert [m.content for m in stored(w)][::2] == ["Name three colours.", "And three animals?"]
    assert w.banner.isHidden() and w.composer.toPlainText() == ""
    assert w.chat.messages[-1].text.strip() == stored(w)[-1].content.strip()


@pytest.mark.network
def test_regenerate_replaces_the_last_reply(qtbot, loaded):
    w = loaded
    type_and_send(qtbot, w, "Name three colours.")
    wait_idle(qtbot, w)
    first = stored(w)[-1]
    # (an identical 2/2 at temperature 0 came without a word: the button says greedy writes the same again)
    assert "At temperature 0" in w.regenerate_button.toolTip() and "same text" in w.regenerate_button.toolTip()
    w.settings_panel.temperature.setValue(1.0)
    w.settings_panel.seed.setValue(1234)
    qtbot.mouseClick(w.regenerate_button, Qt.LeftButton)
    wait_idle(qtbot, w)
    db = stored(w)
    assert [m.role for m in db] == ["user", "assistant"]
    assert db[-1].created_at > first.created_at and db[-1].settings["sampling"]["seed"] == 1234
    assert [m.role for m in w.chat.messages] == ["user", "assistant"]
    assert w.chat.messages[-1].text == db[-1].content
    # the reply it replaced is kept: ‹ shows it in its place, in the history and the panel too
    second = db[-1]
    switch = w.chat.messages[-1].versions
    assert switch.isVisibleTo(w) and switch.label.text() == "2/2"
    assert switch.back.isEnabled() and not switch.on.isEnabled()
    lines = switch.label.toolTip().split("\n")            # the two side by side, as their footers say them
    for n, reply in ((1, first), (2, second)):
        speed = rate_text(reply.stats["tokens_per_s"], rates_finer(GenerationStats.from_json(reply.stats)))   # (as
        assert any(line.startswith(f"{n}. auto · {speed}") for line in lines)              # the footer says it)
    qtbot.mouseClick(switch.back, Qt.LeftButton)
    db = stored(w)
    assert db[-1].content == first.content and db[-1].created_at == first.created_at
    assert w.chat.messages[-1].text == first.content and w.chat.messages[-1].versions.label.text() == "1/2"
    assert w.spec_panel.rounds_shown == [RoundEvent.from_record(i, r) for i, r in enumerate(first.rounds)]
    assert first.content != second.content                # (sampled at 1.0: the panel's rounds tell them apart)
    qtbot.keyClick(w.composer, Qt.Key_Right, Qt.AltModifier)     # (the keys, as the arrows)
    assert stored(w)[-1].content == second.content and w.chat.messages[-1].text == second.content
    qtbot.keyClick(w.composer, Qt.Key_Left, Qt.AltModifier)
    assert w.chat.messages[-1].text == first.content
    qtbot.mouseClick(w.chat.messages[-1].versions.on, Qt.LeftButton)
    assert stored(w)[-1].content == second.content and w.chat.messages[-1].text == second.content
    type_and_send(qtbot, w, "And one more?")              # the conversation goes on from the reply shown
    wait_idle(qtbot, w)
    assert [m.content for m in stored(w)[:2]] == ["Name three colours.", second.content]
    assert w.store.last_reply_versions(w.current_id) == [None]
    assert not any(m.versions.isVisibleTo(w) for m in w.chat.messages)


@pytest.mark.network
def test_a_regenerate_that_writes_nothing_shows_the_reply_back(qtbot, loaded, monkeypatch):
    """The new reply ends before any text (here a stop string at its first word; a Stop while the
    prompt is read; a failure): the history gives the place back to the reply it replaced, and the
    view showed an empty reply over it."""
    w = loaded
    type_and_send(qtbot, w, "Name three colours.")
    wait_idle(qtbot, w)
    first = stored(w)[-1]
    options = dataclasses.replace(w._options(), stop=(first.content.split()[0],))
    monkeypatch.setattr(w, "_options", lambda: options)
    w.regenerate()
    wait_idle(qtbot, w)
    assert stored(w)[-1].content == first.content and w.store.last_reply_versions(w.current_id) == [None]
    assert [m.text for m in w.chat.messages] == ["Name three colours.", first.content]
    assert not w.chat.messages[-1].versions.isVisibleTo(w)


@pytest.mark.network
def test_edit_last_message_and_resend(qtbot, loaded):
    w = loaded
    type_and_send(qtbot, w, "What is 2 + 2?")
    wait_idle(qtbot, w)
    qtbot.mouseClick(w.edit_button, Qt.LeftButton)        # (its clicked(False) was the banner's note: "… False")
    assert w.banner.label.text() == EDIT_NOTE
    w._cancel_edit()
    next(a for a in w.findChildren(QAction) if a.text() == "Edit last message").trigger()
    assert w.banner.label.text() == EDIT_NOTE
    assert w.composer.toPlainText() == "What is 2 + 2?"
    assert w.composer.textCursor().position() == len("What is 2 + 2?")      # the caret where it ends
    w.composer.setPlainText("What is 3 + 3?")
    qtbot.keyClick(w.composer, Qt.Key_Return)
    wait_idle(qtbot, w)
    db = stored(w)
    assert [(m.role, m.content if m.role == "user" else "") for m in db] == [("user", "What is 3 + 3?"),
                                                                             ("assistant", "")]
    assert [m.text for m in w.chat.messages if m.role == "user"] == ["What is 3 + 3?"]


def stored_exchange(window, title: str, question: str, answer: str) -> int:
    """A conversation of one question and its answer, in the history and the list; its id."""
    cid = window.store.create_conversation(title, "SYSTEM")
    window.store.add_message(cid, "user", question)
    window.store.add_message(cid, "assistant", answer)
    window.refresh_conversations()
    return cid


def test_an_edit_ends_with_its_conversation(qtbot, window):
    """An edit under way belongs to its conversation: opening another or starting a new one puts it
    away, and it is back, still an edit, when its conversation is; deleting the conversation ends it. It
    stayed on: Enter in the next conversation would have put the first one's message in place of that
    one's last message, and everything after it. An edit that changed nothing just ends."""
    w = window
    first = stored_exchange(w, "Cats", "Tell me about cats.", "Cats purr.")
    second = stored_exchange(w, "Dogs", "Tell me about dogs.", "Dogs bark.")
    w.open_conversation(first, show=True)
    w.edit_last()
    assert w.editing and w.composer.toPlainText() == "Tell me about cats."
    assert w.banner.isVisible() and w.banner.buttons[0].text() == "Cancel edit"
    assert w.banner.close_button.isHidden()       # (beside "Cancel edit", a new user read Dismiss as the same)
    w.open_conversation(second, show=True)
    assert not w.editing and w.composer.toPlainText() == "" and w.banner.isHidden()
    w.edit_last()
    w.composer.setPlainText("Tell me about wolves.")
    w.new_conversation()
    assert not w.editing and w.composer.toPlainText() == "" and w.banner.isHidden()
    w.open_conversation(first, show=True)
    assert not w.editing and w.composer.toPlainText() == ""       # (unchanged, it ended)
    w.open_conversation(second, show=True)
    assert w.editing and w.composer.toPlainText() == "Tell me about wolves."
    assert w.banner.isVisible() and w.banner.label.text() == EDIT_NOTE
    qtbot.keyClick(w.composer, Qt.Key_Escape)      # (Esc ends it too: only Cancel edit did, a new user's try)
    assert not w.editing and w.composer.toPlainText() == "" and w.banner.isHidden()
    w.edit_last()
    w._delete(second)
    assert not w.editing and w.composer.toPlainText() == "" and w.banner.isHidden()
    assert [m.content for m in w.store.messages(first)] == ["Tell me about cats.", "Cats purr."]


def test_opening_a_conversation_shows_its_last_reply_in_the_panel(qtbot, window):
    """The panel said "No reply selected" beside a conversation of replies, until a footer was clicked
    (a new user's try): it shows the conversation's last reply that has rounds, as that click does."""
    from desktop_app.engine.events import RoundEvent, TokenKind
    from desktop_app.ui.panel_rows import stored_header

    w = window
    round_ = RoundEvent(index=0, drafter="lookup", drafted=(5, 6), drafted_text=(" b", " c"), q=(1.0, 1.0),
                        p=(0.9, 0.2), accepted=1, emitted=(5, 7), emitted_text=(" b", " d"),
                        kinds=(TokenKind.ACCEPTED, TokenKind.CORRECTION), target_top=(5, 7, 8), t_draft_s=0.0,
                        t_verify_s=0.02, t_round_s=0.021, n_past=10)
    stats = GenerationStats(n_tokens=2, n_rounds=1, tokens_per_s=95.2, n_drafted=2, n_accepted=1, acceptance_rate=0.5,
                            alpha=0.5, mean_accepted=1.0, mean_drafted=2.0, t_verify_s=0.02, t_target_step_s=0.01)
    first = w.store.create_conversation("Letters", "SYSTEM")
    w.store.add_message(first, "user", "Go on: a")
    reply = w.store.add_message(first, "assistant", " b d")
    w.store.update_message(reply.id, stats=stats.to_json(), rounds=[round_.to_record()])
    second = w.store.create_conversation("Empty", "SYSTEM")
    w.refresh_conversations()
    w.open_conversation(first, show=True)
    stored = w.store.messages(first)[-1]
    assert w.spec_panel.header.text() == stored_header("Letters", stored.created_at, 2, "done", stats.to_json())
    assert w.spec_panel.header.text().endswith("(message 2, finished)")   # (as when it had just ended: "(finished)"
    w.store.update_message(reply.id, status="cancelled")                 # became "(message 2)" once opened
    w.open_conversation(second, show=True)                               # again, a new user's try)
    w.open_conversation(first, show=True)
    assert w.spec_panel.header.text().endswith("(message 2, stopped)")
    w.store.update_message(reply.id, status="error")                    # (as the chat's note says it)
    w.open_conversation(second, show=True)
    w.open_conversation(first, show=True)
    assert w.spec_panel.header.text().endswith("(message 2, failed)")
    assert w.spec_panel.strip.round_model.rowCount() == 1
    w.open_conversation(second, show=True)
    assert w.spec_panel.header.text() == "No reply selected"


def test_an_edit_still_says_so_after_another_message_took_the_banner(qtbot, window):
    """While editing, another message can take the banner (no model loaded, say). Once it was dismissed
    nothing said that Enter would replace the last message, nor offered to cancel the edit."""
    w = window
    cid = stored_exchange(w, "Cats", "Tell me about cats.", "Cats purr.")
    w.open_conversation(cid, show=True)
    w.edit_last()
    w.submit("Tell me about lions.")                   # no model is loaded: the banner says so instead
    assert w.banner.kind != "edit" and "No model is loaded" in w.banner.label.text() and w.editing
    qtbot.mouseClick(w.banner.close_button, Qt.LeftButton)
    assert w.banner.isVisible() and w.banner.kind == "edit" and w.banner.buttons[0].text() == "Cancel edit"
    qtbot.mouseClick(w.banner.buttons[0], Qt.LeftButton)
    assert not w.editing and w.banner.isHidden() and w.composer.toPlainText() == ""


def test_conversations_by_keyboard(qtbot, window):
    """No key went to the next or previous conversation, Down in the search box did nothing, Esc left the
    focus in the search (the next words typed became a search), and after Return in the list typing
    went nowhere (a new user's tries)."""
    w = window
    w.activateWindow()
    cats = stored_exchange(w, "Cats", "Tell me about cats.", "Cats purr.")
    dogs = stored_exchange(w, "Dogs", "Tell me about dogs.", "Dogs bark.")     # (the newest: first in the list)
    actions = {a.text(): a for a in w.actions()}
    assert actions["Next conversation"].shortcut().toString() == "Ctrl+PgDown"
    actions["Next conversation"].trigger()                 # (none chosen yet: the first)
    assert w.current_id == dogs
    actions["Next conversation"].trigger()
    actions["Next conversation"].trigger()                 # (none past the end)
    assert w.current_id == cats
    actions["Previous conversation"].trigger()
    assert w.current_id == dogs
    w.sidebar.search.setFocus()
    qtbot.keyClicks(w.sidebar.search, "purr")
    qtbot.keyClick(w.sidebar.search, Qt.Key_Down)
    assert w.focusWidget() is w.sidebar.list and w.current_id == cats
    qtbot.keyClick(w.sidebar.list, Qt.Key_Return)
    assert w.focusWidget() is w.composer
    w.sidebar.search.setFocus()
    w._escape()
    assert w.sidebar.search.text() == "" and w.focusWidget() is w.composer


def test_new_conversation_opens_the_empty_one_in_the_list_rather_than_make_another(qtbot, window):
    """Each New conversation from a conversation with messages left another empty one in the list (a new
    user's try). An empty one is reused, at the top of the list, unless it has text typed for it or a
    system prompt of its own."""
    w = window
    cats = stored_exchange(w, "Cats", "Tell me about cats.", "Cats purr.")
    w.open_conversation(cats, show=True)
    w.new_conversation()
    empty = w.current_id
    w.store.add_message(stored_exchange(w, "Dogs", "Tell me about dogs.", "Dogs bark."), "user", "And wolves?")
    w.open_conversation(cats, show=True)
    w.new_conversation()
    assert w.current_id == empty and w.sidebar.current_id() == empty
    assert [c.id for c in w.store.list_conversations()][0] == empty and w.sidebar.list.count() == 3
    w.composer.setPlainText("half typed")                # (text typed for it: it is not an empty one)
    w.open_conversation(cats, show=True)
    w.new_conversation()
    assert w.current_id not in (empty, cats) and w.composer.toPlainText() == ""
    w.store.set_system_prompt(w.current_id, "Answer like a pirate.")
    w.open_conversation(cats, show=True)
    w.new_conversation()
    assert w.sidebar.list.count() == 5 and w.store.conversation(w.current_id).system_prompt == ""


def test_the_chat_menu_offers_copy_and_the_versions_only_where_they_apply(qtbot, window):
    """Earlier and Later version and Copy last reply were offered in an empty conversation (a new user's
    try): Copy where there is a reply, Earlier and Later where there is a version before or after."""
    w = window
    copy, (earlier, later) = w.copy_reply_action, w.version_actions
    w.new_conversation()
    assert not copy.isEnabled() and not earlier.isEnabled() and not later.isEnabled()
    cats = stored_exchange(w, "Cats", "Tell me about cats.", "Cats purr.")
    w.open_conversation(cats, show=True)
    assert copy.isEnabled() and not earlier.isEnabled() and not later.isEnabled()
    w.store.set_aside_reply(cats, 1)                       # (as Regenerate does, then its new reply)
    w.store.add_message(cats, "assistant", "Cats meow.")
    w.open_conversation(cats, show=True)
    assert earlier.isEnabled() and not later.isEnabled()
    earlier.trigger()
    assert w.chat.messages[-1].text == "Cats purr." and not earlier.isEnabled() and later.isEnabled()


@pytest.mark.network
def test_switch_conversations(qtbot, loaded):
    w = loaded
    type_and_send(qtbot, w, "Tell me about cats.")
    wait_idle(qtbot, w)
    first = w.current_id
    w.new_conversation()
    assert w.chat.messages == []
    type_and_send(qtbot, w, "Tell me about dogs.")
    wait_idle(qtbot, w)
    second = w.current_id
    assert first != second and w.sidebar.list.count() == 2
    for i in range(w.sidebar.list.count()):                    # click the first conversation in the sidebar
        if w.sidebar.list.item(i).data(Qt.UserRole) == first:
            w.sidebar.list.setCurrentRow(i)
    assert w.current_id == first
    assert w.chat.messages[0].text == "Tell me about cats."
    w.sidebar.search.setText("dogs")
    assert w.sidebar.list.count() == 1 and not w.sidebar.no_match.isVisible()
    w.sidebar.search.setText("giraffes")
    assert w.sidebar.list.count() == 0 and w.sidebar.no_match.isVisible()
    w._escape()                                                  # Esc ends the search (no reply runs)
    assert w.sidebar.search.text() == "" and w.sidebar.list.count() == 2 and not w.sidebar.no_match.isVisible()
    # New twice makes one empty conversation, not two; an empty one offers neither Regenerate nor Edit last
    w.new_conversation()
    third = w.current_id
    w.new_conversation()
    assert w.current_id == third and w.sidebar.list.count() == 3
    assert not w.regenerate_button.isEnabled() and not w.edit_button.isEnabled()


@pytest.mark.network
def test_a_system_prompt_typed_before_the_first_message_is_the_new_conversations(qtbot, loaded):
    w = loaded
    assert w.current_id is None
    w.settings_panel.system_prompt.setPlainText("Answer like a pirate.")
    type_and_send(qtbot, w, "Say hello.")
    wait_idle(qtbot, w)
    assert w.store.conversation(w.current_id).system_prompt == "Answer like a pirate."
    w.new_conversation()                      # a new one from an open conversation: the default (none)
    assert w.store.conversation(w.current_id).system_prompt == "" == w.settings_panel.system_prompt.toPlainText()


@pytest.mark.network
def test_deleting_the_conversation_writing_a_reply_is_refused_before_asking(qtbot, loaded, monkeypatch):
    from PySide6.QtWidgets import QMessageBox
    asked = []
    monkeypatch.setattr(QMessageBox, "question", lambda *a: asked.append(a) or QMessageBox.Yes)
    w = loaded
    w.settings_panel.max_tokens.setValue(400)
    type_and_send(qtbot, w, LONG_PROMPT)
    qtbot.waitUntil(lambda: w.generating_id is not None, timeout=TIMEOUT_MS)
    w.sidebar.delete_current()
    assert not asked and "Stop the reply" in w.banner.label.text()
    w.stop()
    wait_idle(qtbot, w)
    assert not w.banner.isVisible()                      # (once the reply ended it said what was past)
    w.sidebar.delete_current()
    assert len(asked) == 1 and w.current_id is None and w.sidebar.list.count() == 0


@pytest.mark.network
def test_a_note_that_no_model_is_loaded_goes_once_models_load(qtbot, window, test_model_path, q2k_draft_path,
                                                               gemma_path):
    """"Not sent" stayed on through the next load, the reply and a reload (a user's try)."""
    window.load_pair(test_model_path, gemma_path)                       # a load that fails: the engine refuses
    type_and_send(qtbot, window, "Hello there")                         # the pair; the message waits for it
    assert window.loading and window.banner.label.text() == QUEUED_NOTE
    assert window.first_run.offered == (test_model_path, gemma_path)   # (the page names the pair loading ...
    qtbot.waitUntil(lambda: not window.loading and not window.busy, timeout=TIMEOUT_MS)
    assert window.first_run.offered == (test_model_path, None)         # ... and then what of it can load)
    assert "alone (the draft gemma-3-270m.Q4_K_M.gguf cannot pair with it" in window.first_run.text.text()
    assert "the draft's tokenizer is llama-spm" in window.model_bar.verdict.text()    # (why, once: the bar's line)
    assert window.model_bar.status.text() == "Could not load this pair: the red line above says why."
    assert window.banner.isVisible() and window.banner.label.text().startswith("The models did not load, so your "
                                                                                "message was not sent")
    assert window.composer.toPlainText() == "Hello there"
    load(qtbot, window, test_model_path, q2k_draft_path)
    assert window.composer.toPlainText() == "Hello there"
    # (hidden, or the repacking notice of a session's first load on a CPU where repacking crashes)
    assert window.banner.isHidden() or window.banner.label.text().startswith("Weight repacking is off")


@pytest.mark.network
def test_a_target_chosen_gets_the_draft_a_pair_would_be_suggested_with(qtbot, test_model_path, q2k_draft_path,
                                                                      shallow_draft_path, gemma_path, qwen_draft_path):
    """A target chosen in the bar that the draft chosen cannot pair with: the bar chooses the draft it pairs
    with, else none (a new user's try: the Qwen draft stayed beside SmolLM2, under a red "These two cannot
    pair", and Load refused). A draft that pairs, or a choice made by the program, is left alone."""
    from desktop_app.models.pairing import draft_for
    from desktop_app.ui.model_bar import ModelBar
    files = [q2k_draft_path, gemma_path, shallow_draft_path, test_model_path, qwen_draft_path]
    assert draft_for(test_model_path, files) == shallow_draft_path          # (as suggest_pair's)
    assert draft_for(gemma_path, files) is None and draft_for(qwen_draft_path, files) is None
    bar = ModelBar()
    qtbot.addWidget(bar)
    bar.set_choices(files, [], False)

    def choose_target(path):                        # as a click in the list does
        bar.target.setCurrentIndex(bar.target.findData(path))
        bar.target.activated.emit(bar.target.currentIndex())

    bar.select(test_model_path, gemma_path)         # (the program's choice stays as it is)
    assert bar.draft_path() == gemma_path and bar.pair_verdict.ok is False
    choose_target(test_model_path)
    assert bar.draft_path() == shallow_draft_path and bar.pair_verdict.ok
    choose_target(qwen_draft_path)
    assert bar.draft_path() is None and bar.pair_verdict is None
    bar.select(gemma_path, q2k_draft_path)
    choose_target(test_model_path)                  # (a draft that pairs is the user's choice: kept)
    assert bar.draft_path() == q2k_draft_path
    choose_target(gemma_path)                       # (passed over with the wheel or the arrow keys: it comes
    assert bar.draft_path() is None                 # back with a target it pairs with, a review's find)
    choose_target(test_model_path)
    assert bar.draft_path() == q2k_draft_path


@pytest.mark.network
def test_incompatible_pair_is_explained_and_the_old_pair_keeps_working(qtbot, loaded, test_model_path, gemma_path):
    w = loaded
    bar = w.model_bar
    assert bar.info.isHidden()                                      # the pair loaded: its details fold away,
    assert not bar.verdict.isHidden() and bar.pair_verdict.warning   # not a warning (a Q2_K draft of the target's
    assert "has as many parameters as the target" in bar.verdict.text()   # own model, which will not pay)
    assert "135M parameters" in bar.target.toolTip()                 # (and stay in the boxes' tooltips)
    assert bar.load_button.text() == "Reload"                       # (it is the pair in use)
    bar.select(test_model_path, gemma_path)                         # another pair chosen: they show
    assert not bar.info.isHidden() and "270M parameters" in bar.info.text()
    assert bar.load_button.text() == "Load"
    assert not bar.verdict.isHidden() and "cannot" in bar.verdict.text()
    load_fails(qtbot, w, test_model_path, gemma_path)
    assert "cannot draft for" in bar.status.text() and "the draft's tokenizer is llama-spm" in bar.status.text()
    assert "Still using SmolLM2-135M-Instruct.Q4_1.gguf + SmolLM2-135M-Instruct.Q2_K.gguf" in bar.status.text()
    assert bar.draft_path().endswith("Q2_K.gguf")                   # the bar shows the pair in use again
    assert bar.info.isHidden() and "has as many parameters as the target" in bar.verdict.text()   # (its warning)
    bar.select(test_model_path, None)                               # another choice: the error gives way
    assert bar.status.text().startswith("Loaded SmolLM2") and not bar.status.styleSheet()   # (it stayed,
    load_fails(qtbot, w, test_model_path, gemma_path)                                      # a user's try)
    assert bar.status.styleSheet()
    type_and_send(qtbot, w, "Say hello.")                            # a reply with the old pair: so it does
    wait_idle(qtbot, w)                                              # (it stayed through later replies)
    assert stored(w)[-1].role == "assistant" and stored(w)[-1].complete
    assert bar.status.text().startswith("Loaded SmolLM2") and not bar.status.styleSheet()


def test_a_loading_setting_changed_but_not_applied_says_so_until_applied(qtbot, loaded):
    w = loaded
    panel = w.settings_panel
    assert panel.unapplied.isHidden()
    panel.n_ctx.setValue(panel.n_ctx.value() + 512)
    panel.repack.setCurrentIndex(panel.repack.findData("off") if panel.repack.currentData() != "off" else 0)
    assert not panel.unapplied.isHidden()
    assert panel.unapplied.text().startswith("Not applied yet: Context size, Weight repacking.")
    panel.n_ctx.setValue(panel.n_ctx.value() - 512)
    assert panel.unapplied.text().startswith("Not applied yet: Weight repacking.")
    threads = panel.n_threads.value()
    panel.n_threads.setValue(os.cpu_count() if threads == 0 else 0)   # (automatic follows the load: not the same)
    assert panel.unapplied.text().startswith("Not applied yet: Threads, Weight repacking.")
    panel.n_threads.setValue(threads)
    assert panel.unapplied.text().startswith("Not applied yet: Weight repacking.")
    loaded_text = w.model_bar.status.text()
    assert loaded_text.startswith("Loaded SmolLM2")
    panel.reloadRequested.emit(panel.loading())              # Apply and reload
    assert panel.unapplied.text().startswith("Applying: Weight repacking.")   # (not "Not applied yet", meanwhile)
    assert w.model_bar.status.text() == loaded_text.replace("Loaded ", "In use until this load ends: ")   # (not
    qtbot.waitUntil(lambda: w.loaded is not None and not w.loading and not w.busy, timeout=TIMEOUT_MS)  # "Loaded X"
    assert panel.unapplied.isHidden() and w.model_bar.status.text().startswith("Loaded SmolLM2")  # under "Loading")


def test_apply_and_reload_with_nothing_loaded_saves_and_loads_nothing(qtbot, window, test_model_path):
    """(A review: with a file chosen in the bar and nothing loaded, Apply and reload would load it, unasked.)"""
    w = window
    w.model_bar.select(test_model_path, None)
    panel = w.settings_panel
    panel.n_ctx.setValue(panel.n_ctx.value() + 256)
    panel.reloadRequested.emit(panel.loading())
    assert not w.loading and w.loaded is None
    assert w.settings["loading"]["n_ctx"] == panel.n_ctx.value()


def test_apply_and_reload_loads_the_pair_the_bar_shows_and_a_new_folder_keeps_it(qtbot, loaded, tmp_path,
                                                                                    test_model_path, gemma_path):
    """A new user's try: with the demo pair loaded, they chose their own model and no draft in the bar, set
    a context size, and pressed Apply and reload: the demo pair was loaded again, put back in the boxes
    unsaid. And adding a models folder put the last loaded pair back in the boxes, dropping a draft chosen
    there."""
    w, bar = loaded, loaded.model_bar
    assert w.loaded.draft is not None
    bar.select(test_model_path, None)                         # the target alone, chosen, not loaded
    folder = tmp_path / "more models"
    folder.mkdir()
    w.add_model_folder(str(folder))                           # (rescans the folders: the choice stays)
    assert str(folder) in w.settings["model_folders"]
    assert (bar.target_path(), bar.draft_path()) == (test_model_path, None)
    panel = w.settings_panel
    panel.n_ctx.setValue(panel.n_ctx.value() + 256)
    panel.reloadRequested.emit(panel.loading())               # Apply and reload
    qtbot.waitUntil(lambda: w.loaded is not None and not w.loading and not w.busy, timeout=TIMEOUT_MS)
    assert (w.loaded.target, w.loaded.draft) == (test_model_path, None)
    assert (bar.target_path(), bar.draft_path()) == (test_model_path, None) and panel.unapplied.isHidden()
    # a choice that cannot load is not swapped for the pair in use unsaid: the bar says why, nothing reloads
    bar.select(test_model_path, gemma_path)
    panel.n_ctx.setValue(panel.n_ctx.value() + 256)
    panel.reloadRequested.emit(panel.loading())
    assert not w.loading and (w.loaded.target, w.loaded.draft) == (test_model_path, None)
    assert bar.status.text().startswith("Not reloaded: the draft gemma") and "cannot pair with it" in bar.status.text()
    assert (bar.target_path(), bar.draft_path()) == (test_model_path, gemma_path)
    assert panel.unapplied.text().startswith("Not applied yet: Context size.")


def test_a_context_size_typed_below_the_smallest_becomes_the_smallest(qtbot, loaded):
    """(A plain spin box put the old value back on leaving it, and nothing said why.)"""
    panel = loaded.settings_panel
    box = panel.n_ctx
    before = box.value()
    assert before != box.minimum() == 256
    box.setFocus()
    box.lineEdit().selectAll()
    qtbot.keyClicks(box.lineEdit(), "128")
    qtbot.keyClick(box.lineEdit(), Qt.Key_Return)
    assert box.value() == 256 and box.text() == "256"
    assert panel.unapplied.text().startswith("Not applied yet: Context size.")
    assert box.fixup("1.5") == "1.5"                        # not a whole number: left to the box's own checks
    box.setValue(before)
    assert panel.unapplied.isHidden()


@pytest.mark.network
def test_broken_file_is_explained(qtbot, loaded, tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\x00" * 64)
    load_fails(qtbot, loaded, str(bad), None)
    assert "broken.gguf" in loaded.model_bar.status.text()
    assert loaded.loaded is not None


@pytest.mark.network
def test_ui_stays_responsive_while_generating(qtbot, loaded):
    """While a reply streams, a 10 ms timer on the UI thread stays on time."""
    w = loaded
    w.settings_panel.max_tokens.setValue(200)
    lateness = []
    clock = QElapsedTimer()
    clock.start()
    last = [clock.elapsed()]

    def tick():
        now = clock.elapsed()
        lateness.append(now - last[0] - 10)
        last[0] = now

    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(tick)
    # The heap the earlier tests of the suite left is collected first, and set aside (gc.freeze), so that a
    # full collection of it, which holds the whole process and not just the UI, does not land in the
    # measurement. (One run of the whole suite saw a 317 ms stall; this test alone, profiled, 52-84 ms.)
    gc.collect()
    gc.freeze()
    try:
        type_and_send(qtbot, w, LONG_PROMPT)
        qtbot.waitUntil(lambda: w.generating_id is not None and len(w.live_text) > 0, timeout=TIMEOUT_MS)
        last[0] = clock.elapsed()
        timer.start()
        wait_idle(qtbot, w)
        timer.stop()
    finally:
        gc.unfreeze()
    assert len(lateness) > 50
    # A shared CI machine may deschedule the whole process now and then, so judge the typical tick
    # strictly and the worst one loosely; a UI thread that ran the model would fail both.
    p95 = sorted(lateness)[int(0.95 * len(lateness))]
    assert p95 < 25, f"one tick in twenty was late by {p95} ms or more"
    assert max(lateness) < 150, f"the UI thread stalled for {max(lateness)} ms"


@pytest.mark.network
def test_close_during_generation_saves_the_partial_reply(qtbot, loaded):
    w = loaded
    w.settings_panel.max_tokens.setValue(2000)
    type_and_send(qtbot, w, LONG_PROMPT)
    qtbot.waitUntil(lambda: len(w.live_text) > 20, timeout=TIMEOUT_MS)
    cid = w.current_id
    started = time.monotonic()
    w.close()
    assert time.monotonic() - started < 10
    assert not w.thread.isRunning()
    db = stored(w, cid)
    assert db[-1].role == "assistant" and db[-1].status == "cancelled" and len(db[-1].content) > 20


def test_damaged_history_and_settings_still_start_with_a_notice(qtbot, tmp_path):
    (tmp_path / "history.db").write_bytes(b"garbage" * 500)
    (tmp_path / "settings.json").write_text("{not json")
    w = MainWindow(str(tmp_path / "history.db"), str(tmp_path / "settings.json"))
    qtbot.addWidget(w)
    w.show()
    assert w.banner.isVisible()
    assert "settings file was damaged" in w.banner.label.text()
    assert "history was damaged" in w.banner.label.text()
    w.new_conversation()
    assert w.sidebar.list.count() == 1
    w.close()


@pytest.mark.network
def test_a_long_prompt_s_progress_reaches_the_reply_s_note_through_the_engine_process(qtbot, loaded, monkeypatch):
    """(The note said "reading the prompt…" for 13 s on a busy machine: a new user's try.) Pieces of a
    second's reading at this fast model's rate: an 800-token message is read in two or three."""
    w = loaded
    seen = []
    w.worker.prompt.connect(lambda e: QTimer.singleShot(0, w, lambda: seen.append((e, w.chat._streaming.status.text()))))
    w.settings_panel.max_tokens.setValue(2)
    type_and_send(qtbot, w, "Repeat this list: " + ", ".join(f"item {i}" for i in range(150)))
    wait_idle(qtbot, w)
    reads = [(e, note) for e, note in seen if e.model == "target"]
    assert reads and all(0 < e.done < e.total for e, _ in reads)
    assert all(note == f"reading the prompt… {e.done:,} of {e.total:,} tokens" for e, note in reads), seen
    qtbot.waitUntil(lambda: w.chat.messages[-1].status.text() != "reading the prompt…")   # (and then the reply)
    assert stored(w)[-1].role == "assistant" and stored(w)[-1].complete


def test_scrolled_up_view_keeps_its_place_while_streaming(qtbot, loaded):
    w = loaded
    cid = w.store.create_conversation("Long")
    for i in range(6):                          # enough earlier text to scroll
        w.store.add_message(cid, "user", f"Question {i}")
        w.store.add_message(cid, "assistant", "\n\n".join(f"Paragraph {j} of answer {i}." for j in range(8)))
    w.refresh_conversations()
    w.open_conversation(cid)
    bar = w.chat.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 200, timeout=10_000)
    w.settings_panel.max_tokens.setValue(400)
    type_and_send(qtbot, w, LONG_PROMPT)
    qtbot.waitUntil(lambda: len(w.live_text) > 10, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: bar.value() == bar.maximum(), timeout=10_000)   # following the reply
    bar.setValue(50)                            # the user scrolls up to read
    assert not w.chat.following
    qtbot.waitUntil(lambda: len(w.live_text) > 300 or w.generating_id is None, timeout=TIMEOUT_MS)
    qtbot.wait(100)
    assert bar.value() == 50
    w.stop()
    wait_idle(qtbot, w)
    bar.setValue(bar.maximum())                 # back at the bottom: following again
    assert w.chat.following


@pytest.mark.network
def test_the_last_pair_is_loaded_again(qtbot, tmp_path, test_model_path, q2k_draft_path):
    from desktop_app.ui.app import start

    first = MainWindow(str(tmp_path / "h.db"), str(tmp_path / "s.json"))
    qtbot.addWidget(first)
    load(qtbot, first, test_model_path, q2k_draft_path)
    first.close()
    again = MainWindow(str(tmp_path / "h.db"), str(tmp_path / "s.json"))
    qtbot.addWidget(again)
    start(again, n_ctx=512)                     # (`tandem -c 512`: Settings' Context size, as if typed there)
    qtbot.waitUntil(lambda: again.loaded is not None and not again.busy, timeout=TIMEOUT_MS)
    assert (again.loaded.target, again.loaded.draft) == (test_model_path, q2k_draft_path)
    assert "(context 512 tokens" in again.model_bar.status.text() and again.settings_panel.n_ctx.value() == 512
    assert again.settings["recent_pairs"][0] == {"target": test_model_path, "draft": q2k_draft_path}
    again.close()


@pytest.mark.network
def test_an_edit_the_context_cannot_hold_leaves_the_conversation_as_it_was(qtbot, loaded):
    """Edited into a message too long for the context, the last exchange was deleted for good and the
    new message sat unanswered, with no way on (a new user's try): the edit is checked first, the
    history and the view keep the exchange, and the edited text stays in the box, still an edit."""
    w = loaded
    type_and_send(qtbot, w, "Say hi.")
    wait_idle(qtbot, w)
    before = [(m.role, m.content) for m in stored(w)]
    assert [r for r, _ in before] == ["user", "assistant"]
    w.edit_last()
    huge = ("word " * 5000).strip()
    w.composer.setPlainText(huge)
    qtbot.keyClick(w.composer, Qt.Key_Return)
    qtbot.waitUntil(lambda: w.banner.isVisible() and "context holds" in w.banner.label.text() and not w.busy,
                    timeout=TIMEOUT_MS)
    assert w.banner.label.text().endswith("Your edited message was not sent: it is still in the box, and the "
                                          "conversation is as it was.")
    assert [(m.role, m.content) for m in stored(w)] == before
    assert [(m.role, m.text) for m in w.chat.messages] == before
    assert w.composer.toPlainText() == huge and w.editing
    assert w.banner.buttons[0].text() == "Edit the message"
    said = w.banner.label.text()
    qtbot.mouseClick(w.banner.buttons[0], Qt.LeftButton)
    assert w.composer.hasFocus() and w.composer.toPlainText() == huge
    assert w.banner.isVisible() and w.banner.label.text() == said    # how long it may be, still in view
    w.composer.setPlainText("Say hello.")                  # shortened, it goes through as the edit
    qtbot.keyClick(w.composer, Qt.Key_Return)
    assert w.banner.isHidden()                              # (what it said is past)
    wait_idle(qtbot, w)
    after = stored(w)
    assert [(m.role, m.content) for m in after][:1] == [("user", "Say hello.")] and len(after) == 2


def test_a_larger_context_loaded_after_a_message_did_not_fit_says_so(qtbot, loaded):
    """A new user's try: a message too long for a 256-token context, "Raise the context size…", 1024,
    Apply and reload; the banner still said "the context holds 256"."""
    w = loaded
    huge = ("word " * (w.loaded.n_ctx + 50)).strip()          # (a token a word, at least)
    w.composer.setPlainText(huge)
    qtbot.keyClick(w.composer, Qt.Key_Return)
    qtbot.waitUntil(lambda: w.banner.isVisible() and "context holds" in w.banner.label.text() and not w.busy,
                    timeout=TIMEOUT_MS)
    n_ctx = w.loaded.n_ctx
    assert f"the context holds {n_ctx}:" in w.banner.label.text() and w.composer.toPlainText() == huge
    raise_it = next(b for b in w.banner.buttons if b.isVisible() and b.text() == "Raise the context size…")
    qtbot.mouseClick(raise_it, Qt.LeftButton)
    panel = w.settings_panel
    assert panel.n_ctx.hasFocus()
    panel.n_ctx.setValue(n_ctx + 1024)
    panel.reloadRequested.emit(panel.loading())                # Apply and reload
    qtbot.waitUntil(lambda: w.loaded is not None and w.loaded.n_ctx == n_ctx + 1024 and not w.busy,
                    timeout=TIMEOUT_MS)
    said = w.banner.label.text()
    n_prompt = int(said.split("enough for the prompt's ")[1].split()[0])
    assert said == (f"The context now holds {n_ctx + 1024} tokens (it held {n_ctx}), enough for the prompt's {n_prompt} "
                    f"tokens plus {reply_room(n_ctx + 1024, w._options().max_tokens)} to begin a reply: press Send to "
                    "send the message in the box.")
    assert n_prompt > len(huge.split()) and w.composer.toPlainText() == huge and w.banner.kind == "overflow"
    assert not [b.text() for b in w.banner.buttons if b.isVisible()]      # (its choices are past: a new user's try)
    said = w.banner.label.text()                              # a reload that does not raise it changes nothing
    panel.reloadRequested.emit(panel.loading())
    qtbot.waitUntil(lambda: w.loaded is not None and not w.loading and not w.busy, timeout=TIMEOUT_MS)
    assert w.banner.isVisible() and w.banner.label.text() == said
    w.settings_panel.max_tokens.setValue(8)
    qtbot.keyClick(w.composer, Qt.Key_Return)                # and Send does send it, as it says
    wait_idle(qtbot, w)
    assert [m.role for m in stored(w)] == ["user", "assistant"] and stored(w)[0].content == huge


def test_regenerating_a_message_too_long_offers_to_edit_it_with_the_size_in_view(qtbot, loaded):
    """Regenerate where the last message alone no longer fits (a smaller context since): "Edit the
    message" puts it in the box as an edit, and the banner still says how much the context holds."""
    w = loaded
    cid = w.store.create_conversation("Long", "SYSTEM")
    huge = ("word " * 5000).strip()
    w.store.add_message(cid, "user", huge)
    w.store.add_message(cid, "assistant", "An answer from a larger context.")
    w.refresh_conversations()
    w.open_conversation(cid)
    w.regenerate()
    qtbot.waitUntil(lambda: w.banner.isVisible() and "context holds" in w.banner.label.text() and not w.busy,
                    timeout=TIMEOUT_MS)
    assert w.banner.buttons[0].text() == "Edit the message"
    assert [m.text for m in w.chat.messages] == [huge, "An answer from a larger context."]    # (it was lost)
    assert stored(w, cid)[-1].content == "An answer from a larger context."
    said = w.banner.label.text()
    qtbot.mouseClick(w.banner.buttons[0], Qt.LeftButton)
    assert w.editing and w.composer.toPlainText() == huge and w.banner.kind == "edit"
    assert w.banner.isVisible() and w.banner.label.text().endswith(said)


def long_conversation(w) -> int:
    """60 long turns, open, with Max tokens at 40: more than the test pair's context holds."""
    w.settings_panel.max_tokens.setValue(40)
    cid = w.store.create_conversation("Long", "SYSTEM")
    for i in range(60):
        w.store.add_message(cid, "user", f"Question {i}: " + "tell me more " * 20)
        w.store.add_message(cid, "assistant", f"Answer {i}: " + "here is more " * 20)
    w.refresh_conversations()
    w.open_conversation(cid)
    return cid


def test_a_regenerate_that_needs_turns_left_out_regenerates_after_them(qtbot, loaded):
    """A regenerate the context cannot hold keeps its reply; "Leave out oldest turns" then answered
    "the last message", the reply itself, writing a second reply after it."""
    w = loaded
    cid = long_conversation(w)
    w.regenerate()
    qtbot.waitUntil(lambda: w.banner.isVisible() and "context holds" in w.banner.label.text() and not w.busy,
                    timeout=TIMEOUT_MS)
    assert w.banner.buttons[0].text() == "Leave out oldest turns"
    assert stored(w, cid)[-1].content.startswith("Answer 59: ")        # kept while it did not fit
    qtbot.mouseClick(w.banner.buttons[0], Qt.LeftButton)
    wait_idle(qtbot, w)
    db = stored(w, cid)
    assert len(db) == 120 and [m.role for m in db[-2:]] == ["user", "assistant"] and db[-1].complete
    assert [e.content[:10] for e in w.store.earlier_replies(cid, 119)] == ["Answer 59:"]
    assert w.chat.messages[-1].versions.label.text() == "2/2"


def test_full_context_offers_choices_in_the_window(qtbot, loaded):
    w = loaded
    cid = long_conversation(w)
    type_and_send(qtbot, w, "And finally?")
    qtbot.waitUntil(lambda: w.banner.isVisible() and "context holds" in w.banner.label.text(), timeout=TIMEOUT_MS)
    # the message is not kept unanswered in the history (a user's try: it sat there, and the next one after
    # it): it is back in the box, and the banner's choices send it on
    assert w.banner.buttons[0].text() == "Leave out oldest turns and send"
    assert w.banner.label.text().endswith("Your message was not sent: it is still in the box.")
    qtbot.waitUntil(lambda: not w.busy, timeout=TIMEOUT_MS)
    assert len(stored(w, cid)) == 120 and w.composer.toPlainText() == "And finally?"
    assert w.chat.messages[-1].role == "assistant"
    qtbot.mouseClick(w.banner.buttons[0], Qt.LeftButton)
    wait_idle(qtbot, w)
    db = stored(w, cid)
    assert db[-1].role == "assistant" and db[-1].complete and len(db) == 122 and db[-2].content == "And finally?"
    assert w.composer.toPlainText() == "" and [m.role for m in w.chat.messages[-2:]] == ["user", "assistant"]
    # a line says where what the model reads begins (the turns left out looked like the rest)
    first = w.store.conversation(cid).first_turn
    note, layout = w.chat.left_out_note, w.chat._layout
    assert 0 < first and note is not None and note.text() == LEFT_OUT_NOTE
    assert layout.indexOf(note) == layout.indexOf(w.chat.messages[first]) - 1
    # a message that does not fit even alone: no turn to leave out helps, so the banner offers to shorten it
    huge = ("word " * 5000).strip()
    type_and_send(qtbot, w, huge)
    qtbot.waitUntil(lambda: w.banner.isVisible() and "context holds" in w.banner.label.text(), timeout=TIMEOUT_MS)
    assert w.banner.buttons[0].text() == "Edit the message"
    qtbot.waitUntil(lambda: not w.busy, timeout=TIMEOUT_MS)
    assert len(stored(w, cid)) == 122 and w.composer.toPlainText() == huge
    qtbot.mouseClick(w.banner.buttons[0], Qt.LeftButton)
    assert not w.editing and w.composer.toPlainText() == huge and w.composer.hasFocus()
    assert w.banner.isVisible() and "context holds" in w.banner.label.text()
    # too long even alone, a new conversation could not hold it either: the banner offers a larger context
    w.composer.clear()
    type_and_send(qtbot, w, huge)
    qtbot.waitUntil(lambda: w.banner.isVisible() and "context holds" in w.banner.label.text()
                    and not w.busy, timeout=TIMEOUT_MS)
    assert "use a larger context size" in w.banner.label.text() and "new conversation" not in w.banner.label.text()
    assert w.banner.buttons[1].text() == "Raise the context size…"
    assert w.composer.toPlainText() == huge and len(stored(w, cid)) == 122
    qtbot.mouseClick(w.banner.buttons[1], Qt.LeftButton)
    assert w.tabs.currentIndex() == 1 and w.settings_panel.n_ctx.hasFocus()
    # where leaving out turns would do, "New conversation" takes the message along, in the box
    w.composer.clear()
    w.store.set_first_turn(cid, 0)                 # (every turn in the prompt again)
    left_out_on_reopen = w.chat.left_out_note is not None
    type_and_send(qtbot, w, "And one more?")
    qtbot.waitUntil(lambda: w.banner.isVisible() and "context holds" in w.banner.label.text()
                    and not w.busy, timeout=TIMEOUT_MS)
    assert w.banner.buttons[1].text() == "New conversation"
    qtbot.mouseClick(w.banner.buttons[1], Qt.LeftButton)
    assert w.current_id != cid and w.composer.toPlainText() == "And one more?" and len(stored(w, cid)) == 122
    # the box is not written over: typed on after the message, it is left; other text, kept after it
    w.open_conversation(cid)                       # (what the new one's box holds stays with it)
    w.composer.setPlainText("And one more? Also this.")
    w._on_overflow(cid, "It does not fit.", True, "And one more?")
    assert w.composer.toPlainText() == "And one more? Also this."
    w.composer.setPlainText("Something else")
    w._on_overflow(cid, "It does not fit.", True, "And one more?")
    assert w.composer.toPlainText() == "And one more?\n\nSomething else"
    # the line came back when the conversation was shown again, and goes once every turn is read
    assert left_out_on_reopen
    w.open_conversation(cid)
    assert w.chat.left_out_note is None


@pytest.mark.network
def test_a_reply_that_fills_the_context_says_it_was_cut_off_and_how_to_go_on(qtbot, window, test_model_path):
    window.settings_panel.n_ctx.setValue(256)
    load(qtbot, window, test_model_path, None)
    window.settings_panel.temperature.setValue(0.0)
    window.settings_panel.max_tokens.setValue(1024)
    type_and_send(qtbot, window, "Count from 1 to 300, separated by commas.")
    wait_idle(qtbot, window)
    db = stored(window)
    assert db[-1].role == "assistant" and db[-1].stats["stop_reason"] == "context_full" and db[-1].content
    assert window.chat.messages[-1].status.text() == "cut off: the conversation filled the context"
    assert window.banner.isVisible()
    assert window.banner.label.text().startswith("The reply was cut off: the conversation filled the context "
                                                 "(256 tokens). To go on,")
    assert window.banner.buttons[0].text() == "New conversation" and window.banner.buttons[0].isVisible()
    full = window.current_id
    window.new_conversation()                                  # it is about that conversation: gone with it
    assert not window.banner.isVisible() and window.current_id != full
    window.banner.show_message("A message about the app")     # (one about none stays when another opens)
    window.open_conversation(full)
    assert window.banner.isVisible()


@pytest.mark.network
def test_the_engine_process_dying_mid_reply_keeps_the_window_and_the_reply(qtbot, loaded):
    """A native fault or the OOM killer ends the engine process, never the window: the partial reply is
    saved and marked, the window says what happened, and one click brings the models back."""
    w = loaded
    w.settings_panel.max_tokens.setValue(2000)
    type_and_send(qtbot, w, LONG_PROMPT)
    qtbot.waitUntil(lambda: len(w.live_text) > 40, timeout=TIMEOUT_MS)
    cid, pid = w.current_id, w.worker.engine.pid
    w.worker.engine.kill()                                  # SIGKILL, as the OOM killer sends it
    qtbot.waitUntil(lambda: w.banner.isVisible() and "model engine" in w.banner.label.text(), timeout=TIMEOUT_MS)
    wait_idle(qtbot, w)
    message = w.banner.label.text()
    assert "was killed [SIGKILL] while generating a reply" in message and "Your conversation is saved" in message
    assert w.isVisible() and w.loaded is None
    assert w.spec_bar.mode_text().startswith("Speculation: ")        # the bar does not say it speculates
    db = stored(w, cid)
    assert db[-1].role == "assistant" and db[-1].status == "interrupted" and len(db[-1].content) > 40
    assert w.chat.messages[-1].text == db[-1].content
    assert "interrupted" in w.chat.messages[-1].status.text()
    # The panel names the reply as the history does, and opened again it shows what its rounds say, as it
    # did when the engine died (every number read "–" beside a full strip and charts: a new user's try).
    panel, shown = w.spec_panel, ("speed", "accepted", "alpha", "per_round")
    live = {key: panel.labels[key].text() for key in shown}
    assert panel.header.text().endswith(" (message 2, interrupted)") and live["speed"].endswith(" tok/s")
    w.new_conversation()
    w.open_conversation(cid)
    assert panel.header.text().endswith(" (message 2, interrupted)")
    again = {key: panel.labels[key].text() for key in shown}
    speed = lambda text: float(text.split()[0])                                   # noqa: E731
    assert speed(again.pop("speed")) == pytest.approx(speed(live.pop("speed")), rel=0.01)   # (times stored to 10 µs)
    assert again == live and panel.labels["tokens"].text() != "–"
    assert panel.verdict.text() == ("Interrupted before its statistics were recorded: the figures here are "
                                    "counted from its rounds.")
    # A message already on its way when the engine died is refused by the worker: it is not stored,
    # and it comes back to the box.
    w._start(GenerateRequest("send", cid, "Lost in the race?", w._options()))
    qtbot.waitUntil(lambda: w.composer.toPlainText() == "Lost in the race?" and not w.busy, timeout=TIMEOUT_MS)
    assert "not running" in w.banner.label.text() and len(stored(w, cid)) == 2
    # Sending now keeps the text and says how to go on.
    type_and_send(qtbot, w, "Are you there?")
    assert w.composer.toPlainText() == "Are you there?" and "no longer loaded; reload them" in w.banner.label.text()
    assert w.banner.buttons[0].text() == "Reload the models"
    target, draft = w.lost_pair                             # another pair chosen in the bar: the banner speaks
    w.model_bar.select(target, None)                        # of that one (it went on offering the lost pair)
    assert "is chosen in the bar above" in w.banner.label.text() and w.banner.buttons[0].text() == "Load and send"
    w.model_bar.select(target, draft)
    assert "no longer loaded; reload them" in w.banner.label.text()
    qtbot.mouseClick(w.banner.buttons[0], Qt.LeftButton)
    qtbot.waitUntil(lambda: w.loaded is not None and not w.busy, timeout=TIMEOUT_MS)
    assert w.worker.engine.pid != pid and w.spec_bar.mode_text().startswith("Speculating: ")
    w.settings_panel.max_tokens.setValue(24)
    qtbot.keyClick(w.composer, Qt.Key_Return)
    wait_idle(qtbot, w)
    db = stored(w, cid)
    assert [m.role for m in db] == ["user", "assistant", "user", "assistant"]
    assert db[-1].complete and db[-1].content and w.chat.messages[-1].text == db[-1].content


def test_a_load_stage_that_cannot_say_how_far_it_is_shows_busy(window):
    """Reading the files is measured; timing the passes is not: the bar sat at 100 % for most of a
    minute on a slow machine (a user's try). It shows busy instead."""
    bar = window.model_bar
    window._on_load_progress("target", 0.4)
    assert bar.progress.maximum() == 1000 and bar.progress.value() == 400
    assert bar.progress.format() == "Loading the target model %p%"
    window._on_load_progress("measuring", 1.0)
    assert bar.progress.maximum() == 0 and bar.progress.text() == ""     # (a busy bar draws no text:)
    assert bar.status.text() == "Measuring the models' speed…"           # the stage is the line under it
    window._on_load_progress("target", 0.5)
    assert bar.progress.maximum() == 1000 and bar.status.text() != "Measuring the models' speed…"


def test_the_load_line_says_a_thread_count_set_in_settings(qtbot, window, test_model_path):
    """Threads set to 1 halved every reply's speed, and nothing where a user looks said so (a new user's try)."""
    window.settings_panel.n_threads.setValue(1)
    load(qtbot, window, test_model_path, None)
    n_ctx = window.loaded.n_ctx
    assert window.model_bar.status.text() == (f"Loaded SmolLM2-135M-Instruct.Q4_1.gguf (context {n_ctx} tokens, "
                                              "1 thread as set in Settings).")
    window.settings_panel.n_ctx.setValue(300)      # a size llama.cpp rounds up: said, beside Settings' 300
    window.load_pair(test_model_path, None)
    qtbot.waitUntil(lambda: window.loaded.n_ctx == 512 and not window.busy, timeout=TIMEOUT_MS)
    assert window.model_bar.status.text() == ("Loaded SmolLM2-135M-Instruct.Q4_1.gguf (context 512 tokens: 300 set, "
                                              "rounded up by llama.cpp, 1 thread as set in Settings).")
    window.settings_panel.n_ctx.setValue(n_ctx)
    window.settings_panel.n_threads.setValue(0)                    # automatic: no count to name
    window.load_pair(test_model_path, None)
    qtbot.waitUntil(lambda: window.model_bar.status.text() == f"Loaded SmolLM2-135M-Instruct.Q4_1.gguf (context "
                                                               f"{n_ctx} tokens).", timeout=TIMEOUT_MS)


def test_a_message_refused_leaves_its_conversation_untitled_in_the_list(qtbot, loaded):
    """The history took the message and its title back, but the list still named the empty conversation
    after the message not sent (a new user's try)."""
    w = loaded
    w.new_conversation()
    type_and_send(qtbot, w, ("word " * 5000).strip())
    qtbot.waitUntil(lambda: w.banner.isVisible() and "context holds" in w.banner.label.text() and not w.busy,
                    timeout=TIMEOUT_MS)
    titles = [w.sidebar.list.item(i).text() for i in range(w.sidebar.list.count())]
    assert w.store.conversation(w.current_id).title == DEFAULT_TITLE
    assert not any(t.startswith("word") for t in titles), titles
