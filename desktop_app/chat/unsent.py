"""What was typed in a conversation's box and not sent, kept across a restart (table unsent): the
window writes every conversation's when it closes and reads them back when it opens. A mixin of
HistoryStore, with its all-or-nothing _transaction."""
from __future__ import annotations

import sqlite3

from desktop_app.chat.history_file import reports


class Unsent:
    """HistoryStore's methods for unsent text (self._db: its connection; self._unsent: whether the file
    has the table, which an older file opened read-only has not)."""

    _db: sqlite3.Connection
    _unsent: bool

    @reports('Reading the unsent messages')
    def unsent(self) -> dict[int | None, tuple[str, str | None]]:
        """{conversation id (None: typed with none open): (text, the last message it edits as it was, or
        None: a message to send)}."""
        if not self._unsent:
            return {}
        return {cid: (text, edit_of) for cid, text, edit_of in
                self._db.execute("SELECT conversation_id, text, edit_of FROM unsent").fetchall()}

    @reports('Keeping the unsent messages')
    def keep_unsent(self, texts: dict[int | None, tuple[str, str | None]], replace=()) -> None:
        """`texts` (as unsent() gives them) in place of those kept for their conversations and for those
        in `replace` (a window's own: another window's stay). A conversation deleted since is left out."""
        with self._transaction():
            self._db.executemany("DELETE FROM unsent WHERE conversation_id IS ?", [(cid,) for cid in {*replace, *texts}])
            for cid, (text, edit_of) in texts.items():
                self._db.execute("INSERT INTO unsent (conversation_id, text, edit_of) SELECT ?, ?, ? WHERE ? IS NULL "
                                 "OR EXISTS (SELECT 1 FROM conversations WHERE id=?)", (cid, text, edit_of, cid, cid))
