"""The history when its file is not as it should be (issue #12): nothing lost, never a traceback,
never a healthy file moved aside. Each damaged or busy file is made here, for real."""
from __future__ import annotations

import sqlite3
import subprocess
import sys
import time

import pytest

from desktop_app.chat import history_file
from desktop_app.chat.history import MIGRATIONS, SCHEMA_VERSION, HistoryError, HistoryStore
from desktop_app.chat.settings_file import SettingsFile

from permissions import permissions_apply, read_only, writable


def filled(path, conversations=12, messages=10) -> HistoryStore:
    store = HistoryStore(path)
    for c in range(conversations):
        cid = store.create_conversation(f"conversation {c}")
        for i in range(messages):
            store.add_message(cid, "user" if i % 2 == 0 else "assistant", f"message {i} of {c} " * 30)
    return store


def contents(path) -> list[tuple]:
    store = HistoryStore(path)
    try:
        return [(c.title, [(m.position, m.role, m.content) for m in store.messages(c.id)])
                for c in sorted(store.list_conversations(), key=lambda c: c.id)]
    finally:
        store.close()


def checkpoint(path) -> None:
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def test_a_history_locked_by_another_program_is_waited_for_then_read_only_never_moved(tmp_path, monkeypatch):
    path = tmp_path / "history.db"
    filled(path, 3, 4).close()
    before = contents(path)
    holder = subprocess.Popen([sys.executable, "-c", "import sqlite3, sys, time; db = sqlite3.connect(sys.argv[1], "
                               "isolation_level=None); db.execute('BEGIN IMMEDIATE'); print('locked', flush=True); "
                               "time.sleep(30)", str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        monkeypatch.setattr(history_file, "BUSY_TIMEOUT_S", 1.0)
        started = time.monotonic()
        store = HistoryStore(path)
        assert time.monotonic() - started >= 1.0                      # it waited for the lock first
        assert not store.writable and "another program is holding the history locked" in store.notice
        assert [c.title for c in store.list_conversations()]          # everything can be read
        with pytest.raises(HistoryError, match="Creating the conversation failed"):
            store.create_conversation("not now")
        store.close()
    finally:
        holder.kill()
        holder.wait()
    assert not list(tmp_path.glob("history.db.*-2*"))                 # nothing was set aside
    assert contents(path) == before
    again = HistoryStore(path)                                          # the lock is gone: read-write
    assert again.writable and again.notice == ""
    again.close()


def test_a_read_only_data_folder_opens_the_history_read_only(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    path = folder / "history.db"
    filled(path, 2, 2).close()
    checkpoint(path)
    before = contents(path)
    read_only(folder)
    try:
        with permissions_apply():
            store = HistoryStore(path)
            assert not store.writable and "read-only" in store.notice
            assert [c.title for c in store.list_conversations()] == ["conversation 1", "conversation 0"]
            with pytest.raises(HistoryError, match="Saving the message failed"):
                store.add_message(store.list_conversations()[0].id, "user", "hello")
            store.close()
            empty = HistoryStore(tmp_path / "data" / "other" / "history.db")   # cannot even be created
            assert "will not be kept" in empty.notice and empty.writable
            cid = empty.create_conversation("kept in memory")
            assert empty.conversation(cid).title == "kept in memory"
            empty.close()
    finally:
        writable(folder)
    assert contents(path) == before and not list(folder.glob("history.db.*"))


def test_an_older_history_read_only_has_no_versions_and_says_no_more(tmp_path):
    """A schema-1 file that cannot be written is not migrated: it has no table of Regenerate's
    earlier replies, and reading the window's "‹ n/m ›" raised a history error at every button update."""
    folder = tmp_path / "data"
    folder.mkdir()
    path = folder / "history.db"
    db = sqlite3.connect(path)
    db.executescript(MIGRATIONS[0] + "PRAGMA user_version=1;")
    db.execute("INSERT INTO conversations (id, title, created_at, updated_at) VALUES (1, 'Old', 0, 0)")
    db.execute("INSERT INTO messages (conversation_id, position, role, content, created_at) VALUES (1, 0, 'user', 'q', 0)")
    db.execute("INSERT INTO messages (conversation_id, position, role, content, created_at) VALUES (1, 1, 'assistant', "
               "'a', 0)")
    db.commit()
    db.close()
    read_only(folder)
    try:
        with permissions_apply():
            store = HistoryStore(path)
            assert not store.writable
            assert store.last_reply_versions(1) == [] and store.earlier_replies(1, 1) == []
            assert store.unsent() == {}                # (no table of unsent text either)
            assert [m["content"] for m in store.export_json(1)["messages"]] == ["q", "a"]
            store.close()
    finally:
        writable(folder)


def test_damage_the_open_does_not_read_is_found_and_everything_readable_recovered(tmp_path):
    """One index page overwritten: listing works, but reading any conversation fails. The integrity
    check at open finds it, and the rows are copied into a fresh history."""
    path = tmp_path / "history.db"
    store = filled(path)
    store.set_aside_reply(1, 9)                            # a reply Regenerate replaced, kept too
    store.add_message(1, "assistant", "a regenerated reply")
    store.close()
    before = contents(path)
    checkpoint(path)
    db = sqlite3.connect(path)
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    root = db.execute("SELECT rootpage FROM sqlite_master WHERE name='messages_by_conversation'").fetchone()[0]
    db.close()
    with open(path, "r+b") as fh:
        fh.seek((root - 1) * page_size)
        fh.write(b"\xab" * page_size)
    damaged = sqlite3.connect(path)
    assert damaged.execute("SELECT count(*) FROM conversations").fetchone()[0] == 12      # the list still reads
    with pytest.raises(sqlite3.DatabaseError):
        damaged.execute("SELECT count(*) FROM messages WHERE conversation_id=3").fetchone()
    damaged.close()

    store = HistoryStore(path)
    assert store.writable
    assert "was damaged" in store.notice and "12 conversations and 120 messages were recovered" in store.notice
    aside = [p for p in tmp_path.glob("history.db.damaged-*") if not p.name.endswith(("-wal", "-shm"))]
    assert len(aside) == 1 and aside[0].name in store.notice
    assert [e.content for e in store.earlier_replies(1, 9)] == ["message 9 of 0 " * 30]
    store.close()
    assert contents(path) == before


def test_a_history_from_a_newer_tandem_is_read_not_moved(tmp_path):
    path = tmp_path / "history.db"
    filled(path, 1, 2).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    store = HistoryStore(path)
    assert not store.writable and "newer Tandem" in store.notice
    assert [c.title for c in store.list_conversations()] == ["conversation 0"]
    store.close()
    assert not list(tmp_path.glob("history.db.*-2*"))


def test_a_full_disk_is_a_message_not_a_traceback(tmp_path):
    store = filled(tmp_path / "history.db", 1, 1)
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count={pages}")            # SQLite's own "database or disk is full"
    cid = store.list_conversations()[0].id
    with pytest.raises(HistoryError, match="Saving the message failed: the disk is full"):
        for _ in range(50):
            store.add_message(cid, "user", "x" * 4000)
    store.close()


WRITER = """
import sys
from desktop_app.chat.history import HistoryStore
store = HistoryStore(sys.argv[1])
for i in range(400):
    store.add_message(int(sys.argv[2]), "user", f"{sys.argv[3]} {i}")
print("done")
"""


def test_processes_adding_to_one_conversation_at_once_never_collide(tmp_path):
    path = tmp_path / "history.db"
    store = HistoryStore(path)
    cid = store.create_conversation("shared")
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(cid), name], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for name in ("a", "b", "c", "d")]
    outs = [w.communicate(timeout=300) for w in writers]
    for out, err in outs:
        assert out.strip() == "done", err
    positions = [m.position for m in store.messages(cid)]
    assert positions == list(range(1600))
    store.close()


def test_damaged_files_set_aside_in_the_same_second_keep_their_own_names(tmp_path):
    settings = tmp_path / "settings.json"
    history = tmp_path / "history.db"
    for n in range(3):
        settings.write_text("{broken %d" % n)
        history.write_bytes(b"not sqlite %d" % n * 100)
        assert "damaged" in SettingsFile(settings).notice
        HistoryStore(history).close()
    settings_copies = sorted(p.read_text() for p in tmp_path.glob("settings.json.corrupt-*"))
    history_copies = sorted(p.read_bytes()[:12] for p in tmp_path.glob("history.db.damaged-*")
                            if not p.name.endswith(("-wal", "-shm")))
    assert settings_copies == ["{broken 0", "{broken 1", "{broken 2"]
    assert history_copies == [b"not sqlite 0", b"not sqlite 1", b"not sqlite 2"]
