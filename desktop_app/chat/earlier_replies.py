"""The earlier versions of a conversation's last reply: Regenerate sets the reply it replaces aside
(table earlier_replies) and the window's "‹ n/m ›" swaps one back; the reply to a newer message, or
an edit, deletes them (HistoryStore.add_message, delete_messages_from). A mixin of HistoryStore,
with its all-or-nothing _transaction."""
from __future__ import annotations

import contextlib
import sqlite3

from desktop_app.chat.history_file import reports
from desktop_app.chat.history_rows import BODY, StoredMessage, stored


class EarlierReplies:
    """HistoryStore's methods for the earlier versions of a reply (self._db: its connection;
    self._versions: whether the file has the table, which a schema-1 file opened read-only has not)."""

    _db: sqlite3.Connection
    _versions: bool

    @reports('Keeping the earlier reply')
    def set_aside_reply(self, conversation_id: int, position: int) -> int:
        """Move the reply at `position`, the conversation's last message, to its earlier versions: the
        reply Regenerate writes takes its place, and the old one stays within reach (swap_reply).
        Returns its id among them; KeyError (nothing changed) where no reply is there."""
        with self._transaction():
            cur = self._db.execute(
                f"INSERT INTO earlier_replies (conversation_id, position, {BODY}) SELECT conversation_id, "
                f"position, {BODY} FROM messages WHERE conversation_id=? AND position=? AND role='assistant'",
                (conversation_id, position))
            if cur.rowcount != 1:
                raise KeyError(f"no reply at {position} in conversation {conversation_id}")
            self._db.execute("DELETE FROM messages WHERE conversation_id=? AND position>=?", (conversation_id, position))
            return int(cur.lastrowid)

    @reports('Reading the earlier replies')
    def earlier_replies(self, conversation_id: int, position: int) -> list[StoredMessage]:
        """The replies that the reply at `position` replaced, oldest first (their ids are their own, not
        messages' ids)."""
        if not self._versions:
            return []
        rows = self._db.execute(
            f"SELECT id, conversation_id, position, 'assistant', {BODY} FROM earlier_replies "
            "WHERE conversation_id=? AND position=? ORDER BY created_at, content, id", (conversation_id, position)).fetchall()
        return [stored(r) for r in rows]

    @reports('Reading the earlier replies')
    def last_reply_versions(self, conversation_id: int) -> list[int | None]:
        """The versions of the conversation's last reply, oldest first: each an earlier reply's id, and
        None for the one in place ([] when the conversation does not end with a reply)."""
        last = self._last_message(conversation_id)
        if last is None or last[1] != "assistant" or not self._versions:
            return []
        rows = self._db.execute("SELECT created_at, content, id FROM earlier_replies WHERE conversation_id=? "
                                "AND position=?", (conversation_id, last[0])).fetchall()
        # (by time, then text: a key that stays with a reply wherever it is, so that equal times, as an
        # import can bring, do not reorder them at every swap)
        return [v[2] for v in sorted([(last[4], last[3], None), *rows], key=lambda v: v[:2])]

    @reports('Showing the other reply')
    def swap_reply(self, conversation_id: int, earlier_id: int) -> None:
        """Make the earlier reply `earlier_id` the conversation's last reply again; the finished reply
        in its place, if any, becomes an earlier version. KeyError when that reply is gone, or its place
        is no longer the end of the conversation (or holds a reply being written)."""
        with self._transaction():
            row = self._db.execute("SELECT position FROM earlier_replies WHERE id=? AND conversation_id=?",
                                   (earlier_id, conversation_id)).fetchone()
            last = self._last_message(conversation_id)
            if row is None or last is None:
                raise KeyError(f"no earlier reply {earlier_id} in conversation {conversation_id}")
            in_place = last[0] == row[0] and last[1] == "assistant"      # (else its place is empty, or past)
            if not (in_place and last[2] != "streaming" or last[0] == row[0] - 1):
                raise KeyError(f"the earlier reply {earlier_id} no longer ends conversation {conversation_id}")
            if in_place and last[3].strip():
                self.set_aside_reply(conversation_id, row[0])
            elif in_place:                               # (a reply with no text is nothing to keep)
                self._db.execute("DELETE FROM messages WHERE conversation_id=? AND position=?", (conversation_id, row[0]))
            bring_back(self._db, earlier_id)

    @reports('Showing the earlier reply')
    def bring_back_reply(self, conversation_id: int, position: int) -> bool:
        """The newest earlier reply at `position` back in its place, where the conversation now ends
        just before it (a regenerate that could not start); False where nothing was brought back."""
        with self._transaction():
            end = self._db.execute("SELECT max(position) FROM messages WHERE conversation_id=?",
                                   (conversation_id,)).fetchone()[0]
            newest = self._newest_earlier(conversation_id, position)
            if newest is None or end != position - 1:
                return False
            bring_back(self._db, newest)
            return True

    @reports('Showing the earlier reply')
    def drop_empty_reply(self, conversation_id: int) -> bool:
        """The last reply, where it has no text and replaced others (a regenerate stopped, failed or cut
        short by a crash before any): deleted, and the newest of those back in its place (a new user's
        try: an empty reply became the newest version). False where the last message is not such."""
        with self._transaction():
            last = self._last_message(conversation_id)
            if last is None or last[1] != "assistant" or last[3].strip() or last[2] == "streaming" \
                    or not self._versions:
                return False
            newest = self._newest_earlier(conversation_id, last[0])
            if newest is None:                    # (nothing to put in its place: the empty reply stays)
                return False
            self._db.execute("DELETE FROM messages WHERE conversation_id=? AND position=?", (conversation_id, last[0]))
            bring_back(self._db, newest)
            return True

    def _newest_earlier(self, conversation_id: int, position: int) -> int | None:
        """The id of the reply at `position` set aside last, or None (none, or no table for them)."""
        if not self._versions:
            return None
        return self._db.execute("SELECT max(id) FROM earlier_replies WHERE conversation_id=? AND position=?",
                                (conversation_id, position)).fetchone()[0]

    def _last_message(self, conversation_id: int) -> tuple | None:
        """(position, role, status, content, created_at) of the conversation's last message, or None."""
        return self._db.execute("SELECT position, role, status, content, created_at FROM messages "
                                "WHERE conversation_id=? ORDER BY position DESC LIMIT 1", (conversation_id,)).fetchone()

    @contextlib.contextmanager
    def _transaction(self):
        """All or nothing; within a transaction already begun, part of it."""
        if self._db.in_transaction:
            yield
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:     # (a COMMIT that failed too: the connection is not left in it)
                self._db.execute("ROLLBACK")
            raise


def bring_back(db: sqlite3.Connection, earlier_id: int) -> None:
    """The earlier reply `earlier_id` back in the messages, at its place (which must be free)."""
    db.execute(f"INSERT INTO messages (conversation_id, position, role, {BODY}) SELECT conversation_id, position, "
               f"'assistant', {BODY} FROM earlier_replies WHERE id=?", (earlier_id,))
    db.execute("DELETE FROM earlier_replies WHERE id=?", (earlier_id,))
