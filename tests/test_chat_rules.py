"""The chat's rules (chat/rules.py) on real stored conversations: what can be regenerated or edited,
and what a finished reply is called."""
from __future__ import annotations

from desktop_app.chat.history import HistoryStore
from desktop_app.chat.rules import (can_continue, can_regenerate, continuable, last_user_message, reply_status,
                                    user_positions)
from desktop_app.engine.events import GenerationStats, StopReason


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


def test_which_replies_can_be_continued(tmp_path):
    store = HistoryStore(str(tmp_path / "history.db"))
    cid = store.create_conversation("continue")
    store.add_message(cid, "user", "Write a poem.")
    assert not can_continue(store.messages(cid))                   # no reply
    reply = store.add_message(cid, "assistant", "The sea")
    store.update_message(reply.id, stats={"stop_reason": "eos"})
    assert not can_continue(store.messages(cid))                   # it ended by itself
    for stop in ("max_tokens", "context_full"):                    # cut off
        store.update_message(reply.id, stats={"stop_reason": stop})
        assert can_continue(store.messages(cid)), stop
    store.update_message(reply.id, stats={"stop_reason": "stop_string"})
    assert not can_continue(store.messages(cid))
    for status in ("cancelled", "interrupted", "error"):           # stopped before its end, with or without stats
        store.update_message(reply.id, status=status, stats=None)
        assert can_continue(store.messages(cid)), status
    store.update_message(reply.id, content="  \n")                 # nothing written: nothing to go on from
    assert not can_continue(store.messages(cid))
    store.close()
    # the window asks of what it shows: a reply's GenerationStats, or none
    assert continuable("assistant", "The sea", "done", GenerationStats(stop_reason="max_tokens"))
    assert not continuable("assistant", "The sea", "done", None)
    assert not continuable("user", "Write a poem.", "cancelled", None)
    assert not continuable("assistant", "The sea", "streaming", None)
    # a llama-server's reply: its statistics are the server's, which a run here would not add up with
    assert not continuable("assistant", "The sea", "cancelled", None, {"server": "http://127.0.0.1:8080"})
    assert continuable("assistant", "The sea", "cancelled", None, {"target": "a.gguf"})
