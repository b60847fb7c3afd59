"""File ▸ Export conversation… and Import conversation…: the history could do both, and nothing in the
window offered them (a new user's try)."""
from __future__ import annotations

import json

from PySide6.QtWidgets import QFileDialog, QMessageBox

from desktop_app.ui.window_files import MARKDOWN, TANDEM_JSON, file_name
from tests.test_ui_window import stored_exchange


def answer(monkeypatch, method: str, path, chosen: str = "") -> list:
    """QFileDialog.`method` answers `path` (and the filter `chosen`); the calls' arguments, for the test."""
    asked = []
    monkeypatch.setattr(QFileDialog, method, lambda *a: asked.append(a) or (str(path), chosen))
    return asked


def test_a_conversation_exported_as_markdown_and_as_json_comes_back_whole(qtbot, window, tmp_path, monkeypatch):
    w = window
    assert not w.export_action.isEnabled()                 # (none open)
    cats = stored_exchange(w, "Cats: a study / part 1", "Tell me about cats.", "Cats purr.")
    w.open_conversation(cats, show=True)
    assert w.export_action.isEnabled()
    asked = answer(monkeypatch, "getSaveFileName", tmp_path / "cats", MARKDOWN)
    w.export_action.trigger()
    assert asked[0][2].endswith("Cats a study part 1.md")   # (a title's "/" and ":" are no file name's)
    text = (tmp_path / "cats.md").read_text(encoding="utf-8")
    assert text.startswith("# Cats: a study / part 1\n") and "Tell me about cats." in text and "Cats purr." in text
    assert w.banner.label.text() == f"Exported to {tmp_path / 'cats.md'}."
    dogs = stored_exchange(w, "Dogs", "Tell me about dogs.", "Dogs bark.")
    w.open_conversation(dogs, show=True)
    assert w.banner.isHidden()                  # (it stayed over the next conversation opened: a new user's try)
    w.open_conversation(cats, show=True)
    offered = tmp_path / "Cats a study part 1.md"
    answer(monkeypatch, "getSaveFileName", offered, TANDEM_JSON)   # (the name offered, the JSON filter: it was
    w.export_conversation()                                        # written as .md, a review's find)
    doc = json.loads(offered.with_suffix(".json").read_text(encoding="utf-8"))
    assert doc == w.store.export_json(cats) and w.banner.label.text() == f"Exported to {offered.with_suffix('.json')}."
    (tmp_path / "keep.md").write_text("IMPORTANT NOTES", encoding="utf-8")
    answer(monkeypatch, "getSaveFileName", tmp_path / "keep.json", MARKDOWN)   # (a name typed: it says the format;
    w.export_conversation()                                                   # it wrote over keep.md, a user's try)
    assert json.loads((tmp_path / "keep.json").read_text(encoding="utf-8")) == doc
    assert (tmp_path / "keep.md").read_text(encoding="utf-8") == "IMPORTANT NOTES"
    asked = []
    monkeypatch.setattr(QMessageBox, "question", lambda *a: asked.append(a) or QMessageBox.No)
    offered.with_suffix(".json").write_text("OLD", encoding="utf-8")
    answer(monkeypatch, "getSaveFileName", offered, TANDEM_JSON)   # (its .json exists: asked, as the dialog
    w.export_conversation()                                        # asked of the .md)
    assert asked and offered.with_suffix(".json").read_text(encoding="utf-8") == "OLD"
    answer(monkeypatch, "getSaveFileName", tmp_path / "cats.txt", MARKDOWN)     # (a suffix of one's own stays)
    w.export_conversation()
    assert (tmp_path / "cats.txt").read_text(encoding="utf-8") == text

    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + (tmp_path / "keep.json").read_bytes())   # (Notepad's)
    answer(monkeypatch, "getOpenFileName", tmp_path / "bom.json")
    w.banner.show_message("notes.json could not be imported: …")
    w.import_conversation()
    assert w.banner.isHidden()                             # (what an earlier try said is past)
    assert w.current_id not in (None, cats) and w.sidebar.current_id() == w.current_id
    assert w.store.conversation(w.current_id).title == "Imported: Cats: a study / part 1"   # (not the same twice;
    # first: "(imported)" at the end was cut off in the list, a new user's try)
    assert [m.text for m in w.chat.messages] == ["Tell me about cats.", "Cats purr."]
    assert w.store.export_json(w.current_id)["messages"] == doc["messages"]


def test_a_file_that_is_not_an_export_is_not_imported_and_says_why(qtbot, window, tmp_path, monkeypatch):
    w = window
    cats = stored_exchange(w, "Cats", "Tell me about cats.", "Cats purr.")
    w.open_conversation(cats, show=True)
    not_one = "it is not a conversation exported by Tandem as JSON"
    export = json.dumps(w.store.export_json(cats), indent=2)
    for name, content, why in (
            ("notes.json", "not JSON at all", f"it is not valid JSON (line 1: Expecting value); an export cut short "
                                              f"or changed, or {not_one}"),
            ("cut.json", export[:len(export) // 2], "it is not valid JSON (line "),    # (it read as not an export)
            ("deep.json", "[" * 100_000, not_one), ("other.json", json.dumps({"format": "other"}), not_one),
            ("list.json", "[1, 2]", not_one),
            ("newer.json", json.dumps({"format": "tandem-conversation", "version": 99, "messages": []}),
             "it was written by a newer Tandem (format version 99; this one reads 1): a newer Tandem can import it."),
            ("odd.json", json.dumps({"format": "tandem-conversation", "version": "2", "messages": []}),
             f"{not_one} (its format version is '2', not a number)"),
            ("half.json", json.dumps({"format": "tandem-conversation", "title": "Half", "messages":
                                      [{"role": "user", "content": "Hi"}, {"role": "system"}]}),
             f"{not_one} (message 2 has the role 'system')")):
        (tmp_path / name).write_text(content, encoding="utf-8")
        answer(monkeypatch, "getOpenFileName", tmp_path / name)
        w.import_conversation()
        assert w.banner.label.text().startswith(f"{name} could not be imported: {why}"), name
        assert [c.id for c in w.store.list_conversations()] == [cats] and w.current_id == cats   # (nothing half)
    answer(monkeypatch, "getOpenFileName", tmp_path / "missing.json")
    w.import_conversation()
    assert w.banner.label.text() == "missing.json could not be imported: No such file or directory."


def test_a_file_name_from_a_title():
    assert file_name('a/b\\c: "d"?') == "a b c d"
    assert file_name(" . ") == "conversation" and len(file_name("x" * 200)) == 80
    assert file_name("Write a long story (about 500 words) about a li…") == \
        "Write a long story (about 500 words) about a li"          # (not "li….md")
