"""Continue in the window (pytest-qt, offscreen, the real test pair): a reply cut off at Max tokens is
written on in its own place, and every view then tells the whole reply."""
from __future__ import annotations

import dataclasses
import time

import pytest
from PySide6.QtCore import Qt

from desktop_app.chat.history import HistoryStore
from desktop_app.engine.events import GenerationStats, RoundEvent
from desktop_app.chat.reply_footer import footer_forms

pytestmark = pytest.mark.network

TIMEOUT_MS = 120_000


def wait_idle(qtbot, window):
    qtbot.waitUntil(lambda: window.generating_id is None and not window.busy, timeout=TIMEOUT_MS)


def stored(window):
    store = HistoryStore(window.store.path)
    try:
        return store.messages(window.current_id)
    finally:
        store.close()


@pytest.fixture
def loaded(qtbot, window, test_model_path, q2k_draft_path):
    window.load_pair(test_model_path, q2k_draft_path)
    qtbot.waitUntil(lambda: window.loaded is not None and not window.busy, timeout=TIMEOUT_MS)
    window.settings_panel.temperature.setValue(0.0)
    window.settings_panel.max_tokens.setValue(12)
    return window


def test_continue_writes_on_in_the_same_reply(qtbot, loaded):
    w = loaded
    w.composer.setPlainText("Write a short poem about the sea.")
    qtbot.keyClick(w.composer, Qt.Key_Return)
    wait_idle(qtbot, w)
    [_, cut] = stored(w)
    assert cut.stats["stop_reason"] == "max_tokens"
    reply = w.chat.messages[-1]
    assert reply.continue_button.isVisible() and w.continue_action.isEnabled()
    assert not w.chat.messages[0].continue_button.isVisible()

    qtbot.mouseClick(reply.continue_button, Qt.LeftButton)
    assert not reply.continue_button.isVisible()                 # (nothing to click twice while it writes)
    assert reply.footer_text == ""                                # (it told the reply as it was)
    wait_idle(qtbot, w)
    [_, whole] = stored(w)
    assert whole.id == cut.id and whole.content.startswith(cut.content) and len(whole.token_ids) == 24
    assert len(w.chat.messages) == 2 and w.chat.messages[-1] is reply
    assert reply.text == whole.content
    # the footer, the panel and the history tell the same whole reply
    s = GenerationStats.from_json(whole.stats)
    assert s.n_tokens == 24 and s.n_rounds == len(whole.rounds)
    assert reply.footer_text in footer_forms(whole.stats, whole.settings, whole.status)
    assert len(w.spec_panel.rounds_shown) == len(whole.rounds)
    assert w.spec_panel.labels["tokens"].text().startswith("24")
    assert "(message 2" in w.spec_panel.header.text()
    assert "Written in 2 runs (Continue)" in reply.footer.toolTip()
    # cut off again: offered again, here from the keyboard
    assert reply.continue_button.isVisible()
    w.composer.setFocus()
    qtbot.keyClick(w.composer, Qt.Key_Return, Qt.ControlModifier | Qt.ShiftModifier)
    qtbot.waitUntil(lambda: len(stored(w)[-1].token_ids) == 36 and not w.busy, timeout=TIMEOUT_MS)
    assert w.composer.toPlainText() == ""                        # (the keys went to the action, not the box)
    assert stored(w)[-1].settings["parts"] == 3 and len(w.chat.messages) == 2
    # not while the last message is edited (Continue writes on the conversation as stored)
    w.edit_last()
    assert w.editing and not reply.continue_button.isVisible() and not w.continue_action.isEnabled()
    w._cancel_edit()
    assert reply.continue_button.isVisible()


def test_continue_is_not_offered_for_a_reply_that_ended_by_itself(qtbot, loaded):
    w = loaded
    w.settings_panel.max_tokens.setValue(200)
    w.composer.setPlainText("Say hello.")
    qtbot.keyClick(w.composer, Qt.Key_Return)
    wait_idle(qtbot, w)
    assert stored(w)[-1].stats["stop_reason"] == "eos"
    assert not w.chat.messages[-1].continue_button.isVisible() and not w.continue_action.isEnabled()


def test_the_live_panel_tells_the_whole_reply_while_it_is_continued(qtbot, loaded):
    """A Continue's rounds follow the reply's earlier ones in the panel as they come: its numbers, tokens
    and time from the reply's start (it showed the new run alone, "24 in 24 rounds" from #1, and
    "120 in 120 rounds" once it ended: a new user's try)."""
    w = loaded
    w.composer.setPlainText("Write a short poem about the sea.")
    qtbot.keyClick(w.composer, Qt.Key_Return)
    wait_idle(qtbot, w)
    [_, cut] = stored(w)
    earlier = [RoundEvent.from_record(i, r) for i, r in enumerate(cut.rounds)]
    panel = w.spec_panel
    panel.begin("A poem", w.current_id, earlier, cut.created_at)
    panel._flush()
    assert panel.header.text().startswith("Live: continuing the reply in 'A poem'")
    assert len(panel.rounds_shown) == len(earlier)
    assert panel.labels["tokens"].text().startswith(f"12 in {len(earlier)} round")
    panel.add_round(dataclasses.replace(earlier[-1], index=0, end=""))
    panel.add_token()
    panel._flush()
    assert len(panel.rounds_shown) == len(earlier) + 1 and panel.rounds_shown[-1].index == len(earlier)   # (#13)
    assert panel.labels["tokens"].text().startswith(f"13 in {len(earlier) + 1} round")
    panel.finish(GenerationStats.from_json(cut.stats), number=2)
    assert time.strftime("%H:%M", time.localtime(cut.created_at)) in panel.header.text()


def test_the_reading_note_goes_with_the_first_text(qtbot):
    """A reply's note said "reading the prompt… N of M tokens" over its first text until the next repaint;
    a continued one, whose text is there from the start, says it while its prompt is read."""
    from desktop_app.engine.events import PromptEvent
    from desktop_app.ui.chat_view import ChatView

    view = ChatView()
    qtbot.addWidget(view)
    new = view.begin_reply()
    new.set_reading(PromptEvent(512, 2048))
    assert new.status.toolTip().startswith("reading the prompt… 512 of 2,048")
    new.stream("Hello", [])
    assert new.status.toolTip() == "writing…"
    view.end_reply("Hello", "cancelled", 7, False)
    old = view.begin_reply(resume=True)
    assert old is new and new.status.toolTip() == "writing…"
    new.set_reading(PromptEvent(512, 2048))
    assert new.status.toolTip().startswith("reading the prompt… 512 of 2,048")
    new.stream("Hello there", [])
    assert new.status.toolTip() == "writing…"
