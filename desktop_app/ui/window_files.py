"""The main window's conversation files: File ▸ Export conversation… (Markdown to read or share, or
Tandem's JSON, which keeps every reply's tokens, rounds and settings) and File ▸ Import conversation…
(a Tandem JSON export, as a new conversation). The history could do both, and nothing in the window
offered them (a new user's try). A mixin of MainWindow (main_window.py)."""
from __future__ import annotations

import json
import re
from pathlib import Path

from PySide6.QtWidgets import QFileDialog

from desktop_app.chat.conversation_file import NOT_AN_EXPORT
from desktop_app.chat.history import HistoryError
from desktop_app.json_file import write_atomic, write_text_atomic

MARKDOWN = "Markdown (*.md)"
TANDEM_JSON = "Tandem conversation, every reply's rounds and settings (*.json)"


def file_name(title: str) -> str:
    """A file name from a conversation's title: no path separators or characters a desktop refuses."""
    name = re.sub(r'[\\/:*?"<>|\x00-\x1f]+', " ", title).strip(" .")
    return re.sub(r"\s+", " ", name)[:80] or "conversation"


def _with_suffix(path: Path, chosen: str) -> Path:
    """`path` as the file to write: the chosen filter's suffix where it has none or the other one (the
    name offered ends in .md, and a JSON export kept it where the dialog does not change it: a review's
    find); any other suffix the user typed stays."""
    return path.with_suffix(chosen) if path.suffix.lower() in (".md", ".json", "") else path


class FilesMixin:
    def export_conversation(self) -> None:
        """The conversation open, into a file the user names (Markdown, or Tandem's JSON)."""
        if self.current_id is None:
            self.banner.show_message("Open a conversation to export it.")
            return
        start = str(Path.home() / f"{file_name(self._title(self.current_id))}.md")
        path, chosen = QFileDialog.getSaveFileName(self, "Export conversation", start, f"{MARKDOWN};;{TANDEM_JSON}")
        if not path:
            return
        target = _with_suffix(Path(path), ".json" if chosen == TANDEM_JSON else ".md")
        as_json = target.suffix.lower() == ".json"
        try:
            if as_json:
                write_atomic(target, self.store.export_json(self.current_id))
            else:
                write_text_atomic(target, self.store.export_markdown(self.current_id))
        except HistoryError as exc:
            self.banner.show_message(f"{exc}.")
            return
        except OSError as exc:
            self.banner.show_message(f"The conversation could not be written to {target}: {exc.strerror or exc}.")
            return
        self.banner.show_message(f"Exported to {target}.")

    def import_conversation(self) -> None:
        """A Tandem JSON export, as a new conversation, opened; a file that is not one says why."""
        path, _ = QFileDialog.getOpenFileName(self, "Import conversation", str(Path.home()), TANDEM_JSON)
        if not path:
            return
        name = Path(path).name
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8-sig"))     # (-sig: as Notepad saves it)
        except OSError as exc:
            self.banner.show_message(f"{name} could not be imported: {exc.strerror or exc}.")
            return
        except (ValueError, RecursionError):        # not text, not JSON, or nested past Python's depth
            doc = None
        try:
            cid = self.store.import_json(doc)
        except HistoryError as exc:
            self.banner.show_message(f"{exc}.")
            return
        except ValueError as exc:                   # (conversation_file.checked: what is wrong, where it is JSON)
            detail = "" if doc is None or str(exc) == NOT_AN_EXPORT else f" ({exc})"
            self.banner.show_message(f"{name} could not be imported: it is not a conversation exported by Tandem "
                                     f"as JSON{detail}.")
            return
        self.banner.hide()                          # (one that could not be imported said so)
        self.sidebar.search.clear()
        self.open_conversation(cid, show=True)
        self.refresh_conversations()
