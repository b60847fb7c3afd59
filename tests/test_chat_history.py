"""The SQLite history and the settings file: durable, searchable, exportable, and never fatal."""
from __future__ import annotations

import json
import sqlite3
import time

import pytest

from desktop_app.chat.conversation_file import checked
from desktop_app.chat.history import MIGRATIONS, SCHEMA_VERSION, HistoryStore
from desktop_app.chat.rules import LEFT_OUT_NOTE
from desktop_app.chat.settings_file import DEFAULTS, SettingsFile


@pytest.fixture
def store(tmp_path):
    s = HistoryStore(tmp_path / "history.db")
    yield s
    s.close()


def _fill(store) -> int:
    cid = store.create_conversation("Primes", "Be brief.")
    store.add_message(cid, "user", "Is 7 prime?")
    reply = store.add_message(cid, "assistant", "", status="streaming", token_ids=[], settings={"spec": {"draft_max": 4}})
    store.update_message(reply.id, content="Yes, **7** is prime.", status="done", token_ids=[10, 20, 30],
                         stats={"n_tokens": 3, "tokens_per_s": 12.5, "acceptance_rate": 0.5},
                         rounds=[{"d": [10, 21], "a": 1, "e": [10, 20], "k": "ac"}])
    return cid


def test_schema_pragmas_and_version(store):
    db = sqlite3.connect(store.path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert store._db.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_messages_round_trip_with_tokens_stats_and_rounds(store):
    cid = _fill(store)
    [user, reply] = store.messages(cid)
    assert (user.role, user.content, user.position) == ("user", "Is 7 prime?", 0)
    assert reply.token_ids == [10, 20, 30] and reply.stats["tokens_per_s"] == 12.5
    assert reply.rounds == [{"d": [10, 21], "a": 1, "e": [10, 20], "k": "ac"}]
    assert reply.settings == {"spec": {"draft_max": 4}} and reply.complete


def test_rename_delete_search(store, monkeypatch):
    cid = _fill(store)
    other = store.create_conversation("Weather")
    store.add_message(other, "user", "Will it rain_today? 100%")
    assert [c.id for c in store.list_conversations()] == [other, cid]
    later = time.time() + 60
    monkeypatch.setattr(time, "time", lambda: later)     # a rename well after the last message
    store.rename(cid, "Prime numbers")
    assert store.conversation(cid).title == "Prime numbers"
    assert [c.id for c in store.list_conversations()] == [other, cid]       # (a rename is not a new message)
    assert [c.id for c in store.search("PRIME")] == [cid]
    assert [c.id for c in store.search("rain_t")] == [other]
    assert [c.id for c in store.search("100%")] == [other]
    assert [c.id for c in store.search("_")] == [other]            # "_" is a character, not a wildcard
    store.delete_conversation(cid)
    assert [c.id for c in store.list_conversations()] == [other]
    assert store._db.execute("SELECT count(*) FROM messages WHERE conversation_id=?", (cid,)).fetchone()[0] == 0


def test_export_json_round_trips_and_markdown(store, tmp_path):
    cid = _fill(store)
    doc = store.export_json(cid)
    text = json.dumps(doc)
    other = HistoryStore(tmp_path / "other.db")
    new_id = other.import_json(json.loads(text))
    again = other.export_json(new_id)
    assert again == doc
    md = store.export_markdown(cid)
    assert md.startswith("# Primes\n") and "**System**\n\nBe brief." in md
    assert "**You**\n\nIs 7 prime?" in md and "**Assistant**\n\nYes, **7** is prime." in md
    assert "3 tokens, 12.5 tok/s, 50 % of drafted tokens kept" in md
    with pytest.raises(ValueError):
        other.import_json({"format": "something else"})
    other.close()


def test_an_export_keeps_where_the_model_s_reading_starts_and_how_replies_ended(store, tmp_path):
    """A conversation whose oldest turns were left out to fit the context: its export and import lost
    that (the window's "The turns above are left out…" was in neither file, and an imported copy read
    it all), and the Markdown named no cut-off reply and left a code block cut off open (a new user's
    try)."""
    cid = _fill(store)
    store.add_message(cid, "user", "Write it in Python.")
    reply = store.add_message(cid, "assistant", "```python\ndef is_prime(n):\n    for")
    store.update_message(reply.id, stats={"n_tokens": 9, "tokens_per_s": 10.0, "stop_reason": "max_tokens"})
    store.set_first_turn(cid, 2)
    doc = store.export_json(cid)
    other = HistoryStore(tmp_path / "other.db")
    copy = other.import_json(json.loads(json.dumps(doc)))
    assert doc["first_turn"] == 2 and other.conversation(copy).first_turn == 2 and other.export_json(copy) == doc
    other.close()
    md = store.export_markdown(cid)
    assert md.index("Is 7 prime?") < md.index(f"_{LEFT_OUT_NOTE}_") < md.index("Write it in Python.")
    assert "**Assistant** _(cut off: the reply reached Max tokens (Settings))_" in md and "    for\n```\n" in md
    # a file of an older Tandem, or one whose first turn is out of range, is read whole
    for first in (None, 99, -1, True):
        old = {k: v for k, v in doc.items() if k != "first_turn"} | ({} if first is None else {"first_turn": first})
        assert checked(old)["first_turn"] == 0


def _regenerated(store, cid: int, text: str) -> None:
    """What ChatSession.regenerate stores: the last reply set aside, a new one in its place."""
    store.set_aside_reply(cid, store.messages(cid)[-1].position)
    reply = store.add_message(cid, "assistant", text, settings={"spec": {"draft_max": 2}})
    store.update_message(reply.id, stats={"n_tokens": 1, "tokens_per_s": 9.0})


def test_regenerated_replies_stay_within_reach_until_the_conversation_goes_on(store, tmp_path):
    cid = _fill(store)
    first = store.messages(cid)[-1]
    _regenerated(store, cid, "7 is prime.")
    [user, second] = store.messages(cid)
    [kept] = store.earlier_replies(cid, second.position)
    assert (kept.content, kept.token_ids, kept.stats, kept.rounds, kept.settings, kept.created_at) == \
        (first.content, first.token_ids, first.stats, first.rounds, first.settings, first.created_at)
    assert store.last_reply_versions(cid) == [kept.id, None]
    store.swap_reply(cid, kept.id)                           # back to the first
    [_, now] = store.messages(cid)
    assert (now.content, now.rounds, now.position) == (first.content, first.rounds, first.position)
    [other] = store.earlier_replies(cid, now.position)
    assert other.content == "7 is prime." and store.last_reply_versions(cid) == [None, other.id]
    with pytest.raises(KeyError):
        store.swap_reply(cid, kept.id)                       # (that one is the reply now)
    doc = store.export_json(cid)                             # an export keeps them, an import brings them back
    other_store = HistoryStore(tmp_path / "other.db")
    assert other_store.export_json(other_store.import_json(json.loads(json.dumps(doc)))) == doc
    other_store.close()
    # a message sent and taken back (the context could not hold it) leaves them; a regenerate's empty
    # reply deleted (Regenerate again after a Stop before any text) leaves them
    store.add_message(cid, "user", "And 9?")
    assert store.last_reply_versions(cid) == []              # (the conversation ends with a message)
    store.delete_messages_from(cid, 2)
    assert store.last_reply_versions(cid) == [None, other.id]
    store.set_aside_reply(cid, 1)
    empty = store.add_message(cid, "assistant", "", status="cancelled")
    store.delete_messages_from(cid, empty.position)
    assert len(store.earlier_replies(cid, 1)) == 2
    store.swap_reply(cid, store.earlier_replies(cid, 1)[0].id)
    # the conversation goes on from the reply shown: once the next message has a reply, the others go
    store.add_message(cid, "user", "And 9?")
    store.add_message(cid, "assistant", "No.")
    assert store.earlier_replies(cid, 1) == [] and store.messages(cid)[1].content == first.content
    with pytest.raises(KeyError):
        store.set_aside_reply(cid, 2)                        # (a message of the user's is not a reply)
    _regenerated(store, cid, "No: 3 × 3.")
    assert [e.content for e in store.earlier_replies(cid, 3)] == ["No."]
    store.delete_messages_from(cid, 2)                       # an edit of the message: its replies go, all versions
    assert store.earlier_replies(cid, 3) == [] and len(store.messages(cid)) == 2


def test_versions_written_at_one_time_keep_their_order_through_a_swap(store):
    """Equal times (an import can bring them): the reply in place sorted first, so each of two read
    "1/2" and ‹ led nowhere."""
    cid = _fill(store)
    _regenerated(store, cid, "7 is prime.")
    store._db.execute("UPDATE messages SET created_at=5 WHERE role='assistant'")
    store._db.execute("UPDATE earlier_replies SET created_at=5")
    before = store.last_reply_versions(cid)
    store.swap_reply(cid, next(v for v in before if v is not None))
    after = store.last_reply_versions(cid)
    assert after.index(None) != before.index(None)


def test_a_regenerate_cut_short_before_its_reply_gets_the_old_reply_back(tmp_path):
    """The process died between setting the reply aside and writing the new one's first row: the
    conversation ended with the user's message, the old reply out of sight until the next deleted it."""
    store = HistoryStore(tmp_path / "h.db")
    cid = _fill(store)
    reply = store.messages(cid)[-1]
    store.set_aside_reply(cid, reply.position)
    store._db.close()                                    # as if the process died there
    again = HistoryStore(tmp_path / "h.db")
    assert [(m.position, m.content, m.rounds) for m in again.messages(cid)][-1] == \
        (reply.position, reply.content, reply.rounds)
    assert again.last_reply_versions(cid) == [None]
    again.set_aside_reply(cid, reply.position)           # died again, its new reply's row written, no text yet
    again.add_message(cid, "assistant", "", status="streaming")
    again._db.close()
    third = HistoryStore(tmp_path / "h.db")               # (its row could be another window's, still written:
    assert third.messages(cid)[-1].status == "interrupted"   # marked, as before, not taken away at open)
    assert third.drop_empty_reply(cid)                    # the window, opening the conversation
    assert third.messages(cid)[-1].content == reply.content and third.last_reply_versions(cid) == [None]
    assert not third.drop_empty_reply(cid)                # (a reply with text stays)
    third.close()


def test_an_empty_reply_gives_way_only_to_a_kept_one_and_is_not_kept_itself(store, tmp_path):
    cid = _fill(store)
    first = store.messages(cid)[-1]
    store.set_aside_reply(cid, first.position)
    empty = store.add_message(cid, "assistant", " ", status="cancelled")
    assert not store.bring_back_reply(cid, first.position)     # (its place is taken)
    [kept] = store.earlier_replies(cid, first.position)
    store.swap_reply(cid, kept.id)                              # away from a blank reply: it is not kept
    assert store.last_reply_versions(cid) == [None] and store.messages(cid)[-1].content == first.content
    other = store.create_conversation()
    store.add_message(other, "user", "hi")
    store.add_message(other, "assistant", "", status="error")
    assert not store.drop_empty_reply(other) and store.messages(other)[-1].status == "error"   # nothing kept
    assert empty.position == first.position


def test_an_import_is_whole_or_not_at_all(store, monkeypatch):
    from desktop_app.chat.history import HistoryError

    doc = store.export_json(_fill(store))
    before = [c.id for c in store.list_conversations()]
    broken = json.loads(json.dumps(doc))
    broken["messages"][-1]["earlier_versions"] = [{"content": "no role, no anything"}]
    with pytest.raises(ValueError, match="message 2 has the role None"):     # (checked before anything is written)
        store.import_json(broken)
    real, calls = HistoryStore.update_message, []

    def fails_second(self, message_id, **fields):     # the disk fails midway: nothing of it stays
        calls.append(message_id)
        if len(calls) == 2:
            raise sqlite3.OperationalError("disk I/O error")
        return real(self, message_id, **fields)

    monkeypatch.setattr(HistoryStore, "update_message", fails_second)
    with pytest.raises(HistoryError, match="Importing the conversation failed"):
        store.import_json(doc)
    assert [c.id for c in store.list_conversations()] == before and len(calls) == 2


def test_an_imported_file_is_taken_as_the_history_stores_it_or_refused_with_why(store):
    """A round that was not a stored round's shape imported, and every opening of the conversation
    then failed; a role of "system" read as a damaged database (a review's find)."""
    doc = store.export_json(_fill(store))
    for change, why in ((lambda d: d["messages"][0].update(role="system"), "message 1 has the role 'system'"),
                        (lambda d: d["messages"][1].update(content={"a": 1}), "message 2 has no text"),
                        (lambda d: d.update(messages="none"), "no list of messages"),
                        (lambda d: d.update(title=3), "its title is not text"),
                        (lambda d: d["messages"].append("hello"), "message 3 is not an object")):
        bad = json.loads(json.dumps(doc))
        change(bad)
        with pytest.raises(ValueError, match=why):
            store.import_json(bad)
    odd = json.loads(json.dumps(doc))
    odd["messages"][1].update(status="streaming", rounds=["zzz"], token_ids=[1, "2"], created_at="soon",
                              stats={"n_tokens": "many", "tokens_per_s": 12.0})   # (read "nothing was written")
    cid = store.import_json(odd)
    reply = store.messages(cid)[1]
    assert (reply.status, reply.rounds, reply.token_ids, reply.stats) == ("interrupted", None, None, None)
    assert reply.content == doc["messages"][1]["content"] and abs(reply.created_at - time.time()) < 60


def test_an_exported_reply_s_statistics_come_back_whole(store):
    """A new user's try: an imported reply had no footer and every number of the panel read "–". Its
    statistics were in the file, but the import's check compared verify_s_by_batch's batch sizes, strings
    in JSON, with numbers, and dropped them for every reply checked at more than one size."""
    from desktop_app.engine.events import GenerationStats
    cid = _fill(store)
    reply = store.messages(cid)[-1]
    stats = GenerationStats(n_tokens=3, n_rounds=2, tokens_per_s=12.5, n_drafted=4, n_accepted=2,
                            acceptance_rate=0.5, verify_s_by_batch={1: 0.03, 5: 0.08, 17: 0.2}).to_json()
    store.update_message(reply.id, stats=stats)
    doc = json.loads(json.dumps(store.export_json(cid)))                 # as the file holds it
    assert doc["messages"][-1]["stats"]["verify_s_by_batch"] == {"1": 0.03, "5": 0.08, "17": 0.2}
    imported = store.messages(store.import_json(doc))[-1]
    assert GenerationStats.from_json(imported.stats) == GenerationStats.from_json(stats)


def test_a_version_1_history_gains_the_versions_table(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(MIGRATIONS[0] + "PRAGMA user_version=1;")
    db.execute("INSERT INTO conversations (id, title, created_at, updated_at) VALUES (1, 'Old', 0, 0)")
    for position, role in enumerate(("user", "assistant")):
        db.execute("INSERT INTO messages (conversation_id, position, role, content, created_at) VALUES (1, ?, ?, ?, 0)",
                   (position, role, f"{role} text"))
    db.commit()
    db.close()
    store = HistoryStore(path)
    assert store.last_reply_versions(1) == [None]
    store.set_aside_reply(1, 1)
    assert [e.content for e in store.earlier_replies(1, 1)] == ["assistant text"]
    store.keep_unsent({1: ("and the unsent text", None)})
    assert store.unsent() == {1: ("and the unsent text", None)}
    store.close()


def test_unsent_text_is_kept_whole_and_goes_with_its_conversation(tmp_path):
    store = HistoryStore(tmp_path / "h.db")
    cats, dogs = store.create_conversation("Cats"), store.create_conversation("Dogs")
    store.keep_unsent({cats: ("line one\n\nline two ", "Tell me about cats."), dogs: ("wolves?", None)})
    assert store.unsent() == {cats: ("line one\n\nline two ", "Tell me about cats."), dogs: ("wolves?", None)}
    store.delete_conversation(cats)
    assert store.unsent() == {dogs: ("wolves?", None)}
    store.keep_unsent({cats: ("for a conversation gone", None)})     # (deleted by another window: left out)
    assert store.unsent() == {dogs: ("wolves?", None)}               # (and another window's text stays)
    store.keep_unsent({None: ("typed with none open", None)})
    store.keep_unsent({None: ("typed again", None)})                 # (one such text, the last)
    assert store.unsent() == {dogs: ("wolves?", None), None: ("typed again", None)}
    store.keep_unsent({}, [dogs, None])                              # (a window's own, replaced by none)
    assert store.unsent() == {}


def test_streaming_rows_left_by_a_dead_process_become_interrupted(tmp_path):
    store = HistoryStore(tmp_path / "h.db")
    cid = store.create_conversation()
    msg = store.add_message(cid, "assistant", "partial text", status="streaming")
    store._db.close()                                  # as if the process died: no final write
    reopened = HistoryStore(tmp_path / "h.db")
    [m] = reopened.messages(cid)
    assert m.id == msg.id and m.content == "partial text" and m.status == "interrupted" and not m.complete
    assert "interrupted" in reopened.export_markdown(cid)


def test_corrupt_database_is_set_aside_with_a_notice(tmp_path):
    path = tmp_path / "history.db"
    path.write_bytes(b"this is not sqlite" * 100)
    store = HistoryStore(path)
    assert "was damaged (the history file is not a database)" in store.notice
    assert "kept as history.db.damaged-" in store.notice
    assert store.list_conversations() == []
    store.create_conversation("works")
    kept = [p for p in tmp_path.glob("history.db.damaged-*") if not p.name.endswith(("-wal", "-shm"))]
    assert len(kept) == 1 and kept[0].read_bytes().startswith(b"this is not sqlite")


def test_migration_from_an_empty_older_file(tmp_path):
    path = tmp_path / "old.db"
    sqlite3.connect(path).execute("PRAGMA user_version=0").connection.close()
    store = HistoryStore(path)
    assert store.notice == ""
    assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_settings_defaults_save_and_reload(tmp_path):
    path = tmp_path / "cfg" / "settings.json"
    s = SettingsFile(path)
    assert s.data == DEFAULTS and s.notice == ""
    s.remember_pair("/m/target.gguf", "/m/draft.gguf")
    s.remember_pair("/m/other.gguf", None)
    s.remember_pair("/m/target.gguf", "/m/draft.gguf")
    s["generation"]["draft_max"] = 6
    s.save()
    again = SettingsFile(path)
    assert again["last_target"] == "/m/target.gguf"
    assert again["recent_pairs"] == [{"target": "/m/target.gguf", "draft": "/m/draft.gguf"},
                                     {"target": "/m/other.gguf", "draft": None}]
    assert again["generation"]["draft_max"] == 6
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]     # no temporary files left


def test_corrupt_settings_are_backed_up_and_defaults_used(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text('{"generation": {"draft_max": 7}, "last_target": ')    # cut off mid-write
    s = SettingsFile(path)
    assert s.data == DEFAULTS
    assert "damaged" in s.notice and "settings.json.corrupt-" in s.notice
    assert len(list(tmp_path.glob("settings.json.corrupt-*"))) == 1
    path.write_text('{"generation": {"draft_max": "many", "top_k": 5}, "unknown": 1}')
    s = SettingsFile(path)                                # wrong types are ignored, known values kept
    assert s["generation"]["draft_max"] == DEFAULTS["generation"]["draft_max"]
    assert s["generation"]["top_k"] == 5 and "unknown" not in s.data
