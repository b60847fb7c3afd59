"""The main window's conversation files: File ▸ Export conversation… (Markdown to read or share, or
Tandem's JSON, which keeps every reply's tokens, rounds and settings) and File ▸ Import conversation…
(a Tandem JSON export, as a new conversation). The history could do both, and nothing in the window
offered them (a new user's try). A mixin of MainWindow (main_window.py)."""
from __future__ import annotations

import json
import re
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QMessageBox

from desktop_app.chat.conversation_file import NOT_AN_EXPORT, NewerExport
from desktop_app.chat.history import HistoryError
from desktop_app.json_file import write_atomic, write_text_atomic

MARKDOWN = "Markdown (*.md)"
TANDEM_JSON = "Tandem conversation, every reply's rounds and settings (*.json)"


def file_name(title: str) -> str:
    """A file name from a conversation's title: no path separators or characters a desktop refuses, nor
    the "…" that ends a title made from a long first message ("about a li….md": a new user's try)."""
    name = re.sub(r'[\\/:*?"<>|\x00-\x1f]+', " ", title).strip(" .…")
    return re.sub(r"\s+", " ", name)[:80] or "conversation"


def _target(path: Path, chosen: str, offered: str) -> Path:
    """The file to write for the dialog's `path`, its filter's suffix `chosen` and the name `offered`: a
    name the user typed with .md or .json is theirs, and says the format (keep.json typed under the
    Markdown filter wrote Markdown over keep.md: a new user's try); the name offered, or one without
    a suffix, takes the filter's (a JSON export kept the offered .md: a review's find)."""
    if path.suffix.lower() in (".md", ".json") and path.name != offered:
        return path
    return path.with_suffix(chosen) if path.suffix.lower() in (".md", ".json", "") else path


def _why_not(exc: BaseException) -> str:
    """Why a file could not be imported, from what reading, parsing or checking it raised."""
    not_one = "it is not a conversation exported by Tandem as JSON"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    if isinstance(exc, json.JSONDecodeError):      # ("not an export" of a damaged one misled: a new user's try)
        return f"it is not valid JSON (line {exc.lineno}: {exc.msg}); an export cut short or changed, or {not_one}"
    if isinstance(exc, NewerExport):
        return str(exc)
    if isinstance(exc, (UnicodeDecodeError, RecursionError)) or str(exc) == NOT_AN_EXPORT:   # (not text; nested
        return not_one                                                                     # past Python's depth)
    return f"{not_one} ({exc})"                    # (conversation_file.checked's why)


class FilesMixin:
    def export_conversation(self) -> None:
        """The conversation open, into a file the user names (Markdown, or Tandem's JSON)."""
        if self.current_id is None:
            self.banner.show_message("Open a conversation to export it.")
            return
        offered = f"{file_name(self._title(self.current_id))}.md"
        path, chosen = QFileDialog.getSaveFileName(self, "Export conversation", str(Path.home() / offered),
                                                   f"{MARKDOWN};;{TANDEM_JSON}")
        if not path:
            return
        target = _target(Path(path), ".json" if chosen == TANDEM_JSON else ".md", offered)
        if target != Path(path) and target.exists() and QMessageBox.question(   # (the dialog asked of another name)
                self, "Export conversation", f"{target.name} already exists. Replace it?") != QMessageBox.Yes:
            return
        as_json = target.suffix.lower() == ".json"
        try:
            if as_json:
                write_atomic(target, self.store.export_json(self.current_id))
            else:
                write_text_atomic(target, self.store.export_markdown(self.current_id))
        except (HistoryError, OSError) as exc:
            self.banner.show_message(f"{exc}." if isinstance(exc, HistoryError) else
                                     f"The conversation could not be written to {target}: {exc.strerror or exc}.")
            return
        self.banner.show_message(f"Exported to {target}.", about=self.current_id)   # (not over the next one opened)

    def import_conversation(self) -> None:
        """A Tandem JSON export, as a new conversation, opened; a file that is not one says why."""
        path, _ = QFileDialog.getOpenFileName(self, "Import conversation", str(Path.home()), TANDEM_JSON)
        if not path:
            return
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8-sig"))     # (-sig: as Notepad saves it)
            cid = self.store.import_json(doc)
        except (HistoryError, OSError, ValueError, RecursionError) as exc:
            self.banner.show_message(f"{exc}." if isinstance(exc, HistoryError) else
                                     f"{Path(path).name} could not be imported: {_why_not(exc)}.")
            return
        title = self._title(cid)                    # (a second copy read as the first: a new user's try)
        if sum(c.title == title for c in self._history(self.store.list_conversations, default=[])) > 1:
            self._history(self.store.rename, cid, f"Imported: {title}")   # (first: a long title's end is cut
                                                                           # off in the list, a user's try)
        self.banner.hide()                          # (one that could not be imported said so)
        self.sidebar.search.clear()
        self.open_conversation(cid, show=True)
        self.refresh_conversations()
