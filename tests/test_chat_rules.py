"""The chat's rules (chat/rules.py) on real stored conversations: what can be regenerated or edited,
and what a finished reply is called."""
from __future__ import annotations

from desktop_app.chat.history import HistoryStore
from desktop_app.chat.rules import can_regenerate, last_user_message, reply_status, user_positions
from desktop_app.engine.events import StopReason


def test_rules_on_a_stored_conversation(tmp_path):
    store = HistoryStore(str(tmp_path / "history.db"))
    cid = store.create_conversation("rules")
    assert not can_regenerate(store.messages(cid)) and last_user_message(store.messages(cid)) is None
    store.add_message(cid, "user", "first")
    assert not can_regenerate(store.messages(cid))             # no reply yet
    store.add_message(cid, "assistant", "a reply")
    store.add_message(cid, "user", "second")
    store.add_message(cid, "assistant", "another")
    messages = store.messages(cid)
    assert can_regenerate(messages)
    assert last_user_message(messages).content == "second" and user_positions(messages) == [0, 2]
    store.close()


def test_reply_status():
    assert reply_status(StopReason.CANCELLED) == "cancelled"
    assert {reply_status(r) for r in StopReason if r != StopReason.CANCELLED} == {"done"}
    assert reply_status(StopReason.CANCELLED, broke_off=True) == "interrupted"     # (a llama-server's reply that
                                                                                    # broke off: not "stopped")
