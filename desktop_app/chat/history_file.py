"""Opening the history database whatever state its file is in, and saying so in words.

- A healthy file opens read-write, after `PRAGMA quick_check`.
- Only damage (SQLITE_CORRUPT, SQLITE_NOTADB, a failed integrity check) sets a file aside. Then what
  can still be read (conversations, messages) is copied into a fresh file, so an overwritten index
  page loses nothing.
- A file another program holds locked past BUSY_TIMEOUT_S, one written by a newer Tandem, or one in
  a folder this user cannot write opens read-only: everything can be read, nothing is written.
- A folder that cannot be created at all gives a history in memory, with a notice that nothing is
  kept.

Every failure after opening becomes a `HistoryError`, whose message says what failed and why.
"""
from __future__ import annotations

import functools
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from desktop_app.chat.aside import set_aside

BUSY_TIMEOUT_S = 10.0          # how long a write waits for another program's lock before giving up
SALVAGE_CHUNK = 200
SQLITE_FILES = ("-wal", "-shm")

# SQLite's primary result codes (sqlite3.SQLITE_* from Python 3.11 on)
SQLITE_PERM, SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY, SQLITE_IOERR = 3, 5, 6, 8, 10
SQLITE_CORRUPT, SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_NOTADB = 11, 13, 14, 26
REASONS = {SQLITE_FULL: "the disk is full", SQLITE_BUSY: "another program is holding the history locked",
           SQLITE_LOCKED: "another program is holding the history locked",
           SQLITE_READONLY: "the history cannot be written (read-only)", SQLITE_PERM: "permission denied",
           SQLITE_CANTOPEN: "the history file cannot be opened", SQLITE_IOERR: "the disk reported an error",
           SQLITE_CORRUPT: "the history file is damaged", SQLITE_NOTADB: "the history file is not a database"}
# Message fragments for Pythons whose sqlite3 errors carry no code (3.10).
FRAGMENTS = {"database or disk is full": SQLITE_FULL, "database is locked": SQLITE_BUSY,
             "readonly database": SQLITE_READONLY, "unable to open database": SQLITE_CANTOPEN,
             "disk i/o error": SQLITE_IOERR, "malformed": SQLITE_CORRUPT, "file is not a database": SQLITE_NOTADB}


class HistoryError(RuntimeError):
    """A history operation failed. `str()` says what and why, for the window; `code` is SQLite's."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


class NewerSchema(sqlite3.DatabaseError):
    """The file was written by a newer Tandem: read it, never write it."""


def error_code(exc: BaseException) -> int | None:
    """SQLite's primary result code of an error, or None for what SQLite did not raise."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF
    text = str(exc).lower()
    return next((c for fragment, c in FRAGMENTS.items() if fragment in text), None)


def reason(exc: BaseException) -> str:
    """Why an operation failed, in words a user can act on."""
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return REASONS.get(error_code(exc), str(exc))


def failure(what: str, exc: BaseException) -> HistoryError:
    return HistoryError(f"{what} failed: {reason(exc)}", error_code(exc))


def is_damage(exc: BaseException) -> bool:
    return error_code(exc) in (SQLITE_CORRUPT, SQLITE_NOTADB)


@dataclass
class Opened:
    db: sqlite3.Connection
    writable: bool
    notice: str = ""


def connect(target: str | Path, uri: bool = False) -> sqlite3.Connection:
    return sqlite3.connect(target, check_same_thread=False, isolation_level=None, uri=uri,
                           timeout=BUSY_TIMEOUT_S)


def open_history(path: Path, prepare: Callable[[sqlite3.Connection], None]) -> Opened:
    """Open the history at `path`. `prepare(db)` brings a writable connection up to date: the schema's
    migrations (an empty file gets them all) and the replies a dead process left streaming."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _in_memory(prepare, f"Conversations will not be kept: the data folder {path.parent} cannot be "
                                   f"created ({reason(exc)}). Set TANDEM_DATA_DIR to a folder you can write.")
    db = None
    try:
        db = connect(path)
        prepare(db)
        check(db)
        return Opened(db, True)
    except sqlite3.Error as exc:
        if db is not None:
            db.close()
        if is_damage(exc):
            return _salvage(path, prepare, reason(exc))
        if isinstance(exc, NewerSchema):
            why = f"it was written by a newer Tandem ({exc})"
        else:
            why = reason(exc)
        return _read_only(path, prepare, why)


def check(db: sqlite3.Connection) -> None:
    """Raise SQLITE_CORRUPT if SQLite's quick integrity check finds damage the open did not read."""
    result = [row[0] for row in db.execute("PRAGMA quick_check").fetchall()]
    if result != ["ok"]:
        error = sqlite3.DatabaseError(f"database disk image is malformed ({'; '.join(result)[:200]})")
        error.sqlite_errorcode = SQLITE_CORRUPT
        raise error


def _in_memory(prepare, notice: str) -> Opened:
    db = connect(":memory:")
    prepare(db)
    return Opened(db, True, notice)


def _read_only(path: Path, prepare, why: str) -> Opened:
    """The file as it is, for reading only; where even that fails, an empty history in memory."""
    if path.exists():
        for options in ("mode=ro", "immutable=1"):      # (immutable: a read-only folder without -shm)
            db = None
            try:
                db = connect(f"{path.resolve().as_uri()}?{options}", uri=True)
                db.execute("SELECT count(*) FROM conversations").fetchone()
                return Opened(db, False, f"The conversation history opened read-only: {why}. Your conversations "
                                         f"can be read, but nothing new is saved until Tandem is restarted.")
            except sqlite3.Error:
                if db is not None:
                    db.close()
    return _in_memory(prepare, f"Conversations will not be kept: the history at {path} cannot be used ({why}). "
                               f"Set TANDEM_DATA_DIR to a folder you can write.")


def _salvage(path: Path, prepare, why: str) -> Opened:
    """Set the damaged file aside and copy what can still be read into a fresh one."""
    aside = set_aside(path, "damaged", SQLITE_FILES)
    db = connect(path)
    prepare(db)
    counts = {"conversations": 0, "messages": 0, "earlier_replies": 0}
    try:
        source = connect(f"{aside.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        source = None
    if source is not None:
        try:
            for table in counts:
                counts[table] = _copy_table(source, db, table)
        finally:
            source.close()
    if counts["conversations"] or counts["messages"]:
        kept = (f"{counts['conversations']} conversations and {counts['messages']} messages were recovered into a "
                f"new history")
    else:
        kept = "nothing could be recovered; a new history was started"
    return Opened(db, True, f"The conversation history was damaged ({why}): {kept}. The damaged file was kept as "
                            f"{aside.name}.")


def _copy_table(source: sqlite3.Connection, target: sqlite3.Connection, table: str) -> int:
    """Copy every row of `table` that can be read, in rowid order and without indexes (the damage is
    often an index); rows that cannot be read, or no longer fit (a message whose conversation was
    lost), are left out. Returns how many were copied."""
    try:
        columns = [row[1] for row in source.execute(f"PRAGMA table_info({table})").fetchall()]
        last = source.execute(f"SELECT max(rowid) FROM {table} NOT INDEXED").fetchone()[0]
    except sqlite3.Error:
        return 0
    if not columns or last is None:
        return 0
    names = ", ".join(columns)
    insert = f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(columns))})"
    copied, after = 0, -1
    while after < last:
        try:
            rows = source.execute(f"SELECT rowid, {names} FROM {table} NOT INDEXED WHERE rowid > ? ORDER BY rowid "
                                  f"LIMIT {SALVAGE_CHUNK}", (after,)).fetchall()
        except sqlite3.Error:                   # a damaged stretch: step over it row by row
            rows = []
            for rowid in range(after + 1, min(after + SALVAGE_CHUNK, last) + 1):
                try:
                    rows += source.execute(f"SELECT rowid, {names} FROM {table} NOT INDEXED WHERE rowid = ?",
                                           (rowid,)).fetchall()
                except sqlite3.Error:
                    pass
            after = min(after + SALVAGE_CHUNK, last)
        else:
            if not rows:
                break
            after = rows[-1][0]
        for row in rows:
            try:
                target.execute(insert, row[1:])
                copied += 1
            except sqlite3.Error:
                pass
    return copied


def reports(what: str):
    """A store method whose database or disk failure becomes a HistoryError saying `what` failed, and why."""
    def wrap(method):
        @functools.wraps(method)
        def run(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except HistoryError:
                raise
            except (sqlite3.Error, OSError) as exc:
                raise failure(what, exc) from exc
        return run
    return wrap
