"""Conversation history in SQLite under the user data dir.

WAL mode and foreign keys on; the schema version lives in `PRAGMA user_version` and `MIGRATIONS`
brings any older file up to date. A reply is written while it streams (status "streaming"); a
process that dies mid-reply leaves that row behind, and the next open marks it "interrupted", so
the partial text is kept and shown as incomplete. A file that is not a readable database is moved
aside (never deleted) and a fresh one started, with a notice for the user.
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

from platformdirs import user_data_dir

from desktop_app import APP_NAME
from desktop_app.chat.conversation_file import FORMAT, VERSION, checked
from desktop_app.chat.earlier_replies import EarlierReplies, bring_back
from desktop_app.chat.reply_footer import reply_note
from desktop_app.chat.rules import LEFT_OUT_NOTE
from desktop_app.engine.number_text import share_text
from desktop_app.chat.history_file import HistoryError, NewerSchema, open_history, reports  # noqa: F401 (HistoryError: re-exported)
from desktop_app.chat.history_rows import (BODY, ConversationInfo, StoredMessage, pack_rounds, pack_tokens,
                                           stored)
from desktop_app.chat.unsent import Unsent

HISTORY_DIR_ENV = "TANDEM_DATA_DIR"

MIGRATIONS: list[str] = [
    # 1: conversations and messages
    """
    CREATE TABLE conversations (
        id INTEGER PRIMARY KEY,
        title TEXT NOT NULL,
        system_prompt TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        first_turn INTEGER NOT NULL DEFAULT 0   -- messages before this index are left out of the prompt
    );
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
        content TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'done',    -- done, streaming, interrupted, cancelled, error
        token_ids BLOB,                          -- an assistant reply's exact tokens (int32), for KV reuse
        settings TEXT,                           -- JSON: models, sampling, speculation settings
        stats TEXT,                              -- JSON: GenerationStats
        rounds BLOB,                             -- zlib-compressed JSON round log
        created_at REAL NOT NULL,
        UNIQUE (conversation_id, position)
    );
    CREATE INDEX messages_by_conversation ON messages(conversation_id, position);
    """,
    # 2: the versions of the last reply that Regenerate replaced (kept until the conversation goes on)
    """
    CREATE TABLE earlier_replies (
        id INTEGER PRIMARY KEY,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,               -- the position of the reply it was
        content TEXT NOT NULL,
        status TEXT NOT NULL,
        token_ids BLOB,
        settings TEXT,
        stats TEXT,
        rounds BLOB,
        created_at REAL NOT NULL
    );
    CREATE INDEX earlier_replies_by_conversation ON earlier_replies(conversation_id, position);
    """,
    # 3: what was typed in a conversation's box and not sent, kept across a restart (unsent.py)
    """
    CREATE TABLE unsent (
        conversation_id INTEGER UNIQUE REFERENCES conversations(id) ON DELETE CASCADE,   -- NULL: none open
        text TEXT NOT NULL,
        edit_of TEXT                             -- the last message it edits, as it was (NULL: a new message)
    );
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


def default_path() -> Path:
    override = os.environ.get(HISTORY_DIR_ENV)
    folder = Path(override) if override else Path(user_data_dir(APP_NAME, appauthor=False))
    return folder / "history.db"


class HistoryStore(EarlierReplies, Unsent):
    """The conversations and their messages. `notice` is a sentence for the user when the file could
    not be used as it was (see history_file); `writable` is False when it opened read-only. Every
    method raises HistoryError, with a message for the window, when the database fails."""

    def __init__(self, path: Path | str | None = None):
        self.path = Path(path) if path else default_path()
        opened = open_history(self.path, _prepare)
        self._db, self.writable, self.notice = opened.db, opened.writable, opened.notice
        tables = {name for name, in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        self._versions = "earlier_replies" in tables    # (an older file opened read-only has no such table:
        self._unsent = "unsent" in tables               # none to show)

    def close(self) -> None:
        self._db.close()

    # -- conversations
    @reports('Creating the conversation')
    def create_conversation(self, title: str = "New conversation", system_prompt: str = "") -> int:
        now = time.time()
        cur = self._db.execute("INSERT INTO conversations (title, system_prompt, created_at, updated_at) "
                               "VALUES (?, ?, ?, ?)", (title, system_prompt, now, now))
        return int(cur.lastrowid)

    @reports('Creating the conversation')
    def reuse_empty_conversation(self, title: str, system_prompt: str, skip=(), ours=(),
                                 before: float = 0.0) -> int | None:
        """The newest conversation with no message yet, titled `title`, with `system_prompt`, not in
        `skip`, and in `ours` or made before `before` (another window's new one is that window's), moved
        to the top of the list as if created now; None where there is none. A new conversation asked for
        is that one: each New conversation left another empty one in the list (a new user's try)."""
        rows = self._db.execute("SELECT id, created_at FROM conversations c WHERE title=? AND system_prompt=? AND NOT "
                                "EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id=c.id) ORDER BY updated_at "
                                "DESC, id DESC", (title, system_prompt)).fetchall()
        cid = next((cid for cid, made in rows if cid not in skip and (cid in ours or made < before)), None)
        if cid is not None:
            now = time.time()
            self._db.execute("UPDATE conversations SET created_at=?, updated_at=? WHERE id=?", (now, now, cid))
        return cid

    @reports('Listing the conversations')
    def list_conversations(self) -> list[ConversationInfo]:
        rows = self._db.execute("SELECT id, title, system_prompt, created_at, updated_at, first_turn "
                                "FROM conversations ORDER BY updated_at DESC, id DESC").fetchall()
        return [ConversationInfo(*r) for r in rows]

    @reports('Opening the conversation')
    def conversation(self, conversation_id: int) -> ConversationInfo:
        row = self._db.execute("SELECT id, title, system_prompt, created_at, updated_at, first_turn "
                               "FROM conversations WHERE id=?", (conversation_id,)).fetchone()
        if row is None:
            raise KeyError(f"no conversation {conversation_id}")
        info = ConversationInfo(*row)
        info.messages = self.messages(conversation_id)
        return info

    @reports('Renaming the conversation')
    def rename(self, conversation_id: int, title: str) -> None:
        """A new title only: the list is ordered by the last change to a conversation's content (a
        message, its system prompt), and a rename moved it to the top (a user's try)."""
        self._db.execute("UPDATE conversations SET title=? WHERE id=?", (title, conversation_id))

    @reports('Saving the system prompt')
    def set_system_prompt(self, conversation_id: int, system_prompt: str) -> None:
        self._db.execute("UPDATE conversations SET system_prompt=?, updated_at=? WHERE id=?",
                         (system_prompt, time.time(), conversation_id))

    @reports('Saving the conversation')
    def set_updated_at(self, conversation_id: int, when: float) -> None:
        """When the conversation last changed (the list's order): what it was before, where a change was
        taken back."""
        self._db.execute("UPDATE conversations SET updated_at=? WHERE id=?", (when, conversation_id))

    @reports('Leaving out the oldest turns')
    def set_first_turn(self, conversation_id: int, first_turn: int) -> None:
        self._db.execute("UPDATE conversations SET first_turn=? WHERE id=?", (first_turn, conversation_id))

    @reports('Deleting the conversation')
    def delete_conversation(self, conversation_id: int) -> None:
        self._db.execute("DELETE FROM conversations WHERE id=?", (conversation_id,))

    @reports('Searching the conversations')
    def search(self, text: str) -> list[ConversationInfo]:
        """Conversations whose title or any message contains `text` (case-insensitive)."""
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self._db.execute(
            "SELECT DISTINCT c.id, c.title, c.system_prompt, c.created_at, c.updated_at, c.first_turn "
            "FROM conversations c LEFT JOIN messages m ON m.conversation_id = c.id "
            "WHERE c.title LIKE ? ESCAPE '\\' OR m.content LIKE ? ESCAPE '\\' "
            "ORDER BY c.updated_at DESC", (pattern, pattern)).fetchall()
        return [ConversationInfo(*r) for r in rows]

    # -- messages
    @reports('Reading the conversation')
    def messages(self, conversation_id: int) -> list[StoredMessage]:
        rows = self._db.execute(
            f"SELECT id, conversation_id, position, role, {BODY} FROM messages WHERE conversation_id=? "
            "ORDER BY position", (conversation_id,)).fetchall()
        return [stored(r) for r in rows]

    @reports('Saving the message')
    def add_message(self, conversation_id: int, role: str, content: str, status: str = "done",
                    token_ids: list[int] | None = None, settings: dict | None = None) -> StoredMessage:
        now = time.time()
        # The next position is read and taken in one statement, so two processes adding messages to one
        # conversation never pick the same one.
        row = self._db.execute(
            "INSERT INTO messages (conversation_id, position, role, content, status, token_ids, settings, created_at) "
            "SELECT ?, coalesce(max(position) + 1, 0), ?, ?, ?, ?, ?, ? FROM messages WHERE conversation_id=? "
            "RETURNING id, position",
            (conversation_id, role, content, status, pack_tokens(token_ids),
             json.dumps(settings) if settings is not None else None, now, conversation_id)).fetchone()
        self._db.execute("UPDATE conversations SET updated_at=? WHERE id=?", (now, conversation_id))
        if role == "assistant" and self._versions:      # a reply to a newer message: the conversation went on
            self._db.execute("DELETE FROM earlier_replies WHERE conversation_id=? AND position<?",   # from the
                             (conversation_id, int(row[1]) - 1))          # reply shown, and the others are past
        return StoredMessage(int(row[0]), conversation_id, int(row[1]), role, content, status, token_ids,
                             settings, None, None, now)

    @reports('Saving the reply')
    def update_message(self, message_id: int, **fields) -> None:
        """Set the given fields of a message (content, status, token_ids, stats, rounds, settings); None
        clears one."""
        encode = {"content": lambda v: v, "status": lambda v: v, "token_ids": pack_tokens,
                  "stats": lambda v: None if v is None else json.dumps(v), "rounds": pack_rounds,
                  "settings": lambda v: None if v is None else json.dumps(v)}
        unknown = set(fields) - set(encode)
        if unknown:
            raise TypeError(f"unknown message fields: {', '.join(sorted(unknown))}")
        if fields:
            sets = ", ".join(f"{column}=?" for column in fields)
            values = [encode[column](value) for column, value in fields.items()]
            self._db.execute(f"UPDATE messages SET {sets} WHERE id=?", (*values, message_id))

    @reports('Removing the messages')
    def delete_messages_from(self, conversation_id: int, position: int) -> None:
        """Delete the message at `position` and everything after it, and the earlier versions of the
        replies after it (an edit deletes from the user's message: its reply's versions go; a
        regenerate deleting an empty reply keeps those of its place)."""
        with self._transaction():
            self._db.execute("DELETE FROM messages WHERE conversation_id=? AND position>=?", (conversation_id, position))
            self._db.execute("DELETE FROM earlier_replies WHERE conversation_id=? AND position>?",
                             (conversation_id, position))

    # -- export and import
    @reports('Exporting the conversation')
    def export_json(self, conversation_id: int) -> dict:
        c = self.conversation(conversation_id)
        messages = []
        for m in c.messages:
            messages.append(_exported(m))
            earlier = self.earlier_replies(conversation_id, m.position) if m.role == "assistant" else []
            if earlier:
                messages[-1]["earlier_versions"] = [_exported(e) for e in earlier]
        return {"format": FORMAT, "version": VERSION, "title": c.title, "system_prompt": c.system_prompt,
                "created_at": c.created_at, "updated_at": c.updated_at, "first_turn": c.first_turn,
                "messages": messages}

    @reports('Importing the conversation')
    def import_json(self, doc: dict) -> int:
        """A conversation exported by export_json, as a new one; ValueError (nothing imported) where
        `doc` is not one (conversation_file.checked)."""
        doc = checked(doc)
        with self._transaction():                          # (all of it, or nothing: no half conversation)
            cid = self.create_conversation(doc["title"], doc["system_prompt"])
            for m in doc["messages"]:
                for earlier in m.get("earlier_versions", []):
                    self._import_message(cid, earlier)     # (added and set aside, as Regenerate did)
                    self.set_aside_reply(cid, self.messages(cid)[-1].position)
                self._import_message(cid, m)
            self._db.execute("UPDATE conversations SET created_at=?, updated_at=?, first_turn=? WHERE id=?",
                             (doc["created_at"], doc["updated_at"], doc["first_turn"], cid))
        return cid

    def _import_message(self, conversation_id: int, m: dict) -> None:
        stored = self.add_message(conversation_id, m["role"], m["content"], m["status"], m["token_ids"], m["settings"])
        self.update_message(stored.id, stats=m["stats"], rounds=m["rounds"])
        self._db.execute("UPDATE messages SET created_at=? WHERE id=?", (m["created_at"], stored.id))

    @reports('Exporting the conversation')
    def export_markdown(self, conversation_id: int) -> str:
        c = self.conversation(conversation_id)
        lines = [f"# {c.title}", ""]
        if c.system_prompt:
            lines += ["**System**", "", c.system_prompt, ""]
        for i, m in enumerate(c.messages):
            if i == c.first_turn and i:             # (where the model's reading starts, as the window says)
                lines += [f"_{LEFT_OUT_NOTE}_", ""]
            head = "**You**" if m.role == "user" else "**Assistant**"
            note = reply_note(m.status, m.stats) if m.role == "assistant" else ""
            head += f" _({note})_" if note else ""   # ("cut off: …" too: only statuses other than done were said)
            fences = sum(line.lstrip().startswith("```") for line in m.content.splitlines())
            lines += [head, "", m.content + ("\n```" if fences % 2 else ""), ""]   # (a reply cut off in its code)
            if m.stats and m.stats.get("n_tokens"):
                s = m.stats
                extra = f"{s['n_tokens']} tokens, {s.get('tokens_per_s', 0):.1f} tok/s"
                if s.get("acceptance_rate") is not None:
                    extra += f", {share_text(s['acceptance_rate'])} of drafted tokens kept"   # (as the window says)
                lines += [f"_{extra}_", ""]
        return "\n".join(lines).rstrip() + "\n"


def _exported(m: StoredMessage) -> dict:
    return {"role": m.role, "content": m.content, "status": m.status, "token_ids": m.token_ids,
            "settings": m.settings, "stats": m.stats, "rounds": m.rounds, "created_at": m.created_at}


def _prepare(db: sqlite3.Connection) -> None:
    """Bring a writable connection up to date: WAL, foreign keys, the schema's migrations, the replies
    a dead process left streaming, marked interrupted, and the reply that a regenerate set aside, back
    in its place where its process died before the new one's first write. (One that died later left an
    empty reply, which HistoryStore.drop_empty_reply takes away when the window opens it: here it
    could be another window's, still being written.)"""
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("PRAGMA synchronous=NORMAL")
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise NewerSchema(f"schema {version}; this Tandem knows {SCHEMA_VERSION}")
    for number in range(version, SCHEMA_VERSION):
        db.execute("BEGIN IMMEDIATE")
        for statement in _statements(MIGRATIONS[number]):
            db.execute(statement)
        db.execute(f"PRAGMA user_version={number + 1}")
        db.execute("COMMIT")
    db.execute("UPDATE messages SET status='interrupted' WHERE status='streaming'")
    db.execute("BEGIN IMMEDIATE")
    for eid, in db.execute(
            "SELECT max(e.id) FROM earlier_replies e WHERE e.position = (SELECT coalesce(max(m.position), -1) + 1 "
            "FROM messages m WHERE m.conversation_id = e.conversation_id) GROUP BY e.conversation_id").fetchall():
        bring_back(db, eid)
    db.execute("COMMIT")


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip() and not s.strip().startswith("--")]
