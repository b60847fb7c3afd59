"""The window with damaged, read-only or full storage (issue #12): it stays up, says what happened in
the window, and loses nothing that was typed."""
from __future__ import annotations

import json
import sqlite3

import pytest
from PySide6.QtCore import Qt

from desktop_app.chat.history import SCHEMA_VERSION, HistoryStore
from desktop_app.ui.main_window import MainWindow

from permissions import permissions_apply, read_only, writable

TIMEOUT_MS = 120_000


def open_window(qtbot, folder, settings=None) -> MainWindow:
    if settings is not None:
        (folder / "settings.json").write_text(json.dumps(settings))
    window = MainWindow(str(folder / "history.db"), str(folder / "settings.json"))
    qtbot.addWidget(window)
    window.show()
    return window


@pytest.mark.parametrize("settings, dropped", [({"recent_pairs": [1]}, "recent_pairs (1 of 1 entries)"),
                                               ({"model_folders": [5]}, "model_folders (1 of 1 entries)"),
                                               ({"generation": {"temperature": "hot", "top_k": 7}},
                                                "generation.temperature"),
                                               ({"window": [], "last_target": 3}, "last_target, window")])
def test_settings_of_the_wrong_type_are_dropped_with_a_notice(qtbot, tmp_path, settings, dropped):
    window = open_window(qtbot, tmp_path, settings)
    assert window.banner.isVisible() and dropped in window.banner.label.text()
    window.refresh_models()                                   # the model bar lists what is left
    if "generation" in settings:
        assert window.settings_panel.top_k.value() == 7       # the valid neighbour is kept
    window.close()


def test_a_damaged_history_is_recovered_and_its_conversations_open(qtbot, tmp_path):
    store = HistoryStore(tmp_path / "history.db")
    cid = store.create_conversation("Kept")
    store.add_message(cid, "user", "Hello there")
    store.add_message(cid, "assistant", "Hello back")
    store.close()
    db = sqlite3.connect(tmp_path / "history.db")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = db.execute("PRAGMA page_size").fetchone()[0]
    root = db.execute("SELECT rootpage FROM sqlite_master WHERE name='messages_by_conversation'").fetchone()[0]
    db.close()
    with open(tmp_path / "history.db", "r+b") as fh:
        fh.seek((root - 1) * size)
        fh.write(b"\xab" * size)
    window = open_window(qtbot, tmp_path)
    assert "history was damaged" in window.banner.label.text() and "1 conversations and 2 messages" in \
        window.banner.label.text()
    window.open_conversation(cid)
    assert [m.text for m in window.chat.messages] == ["Hello there", "Hello back"]
    window.close()


def test_every_history_failure_in_the_window_is_a_message(qtbot, tmp_path):
    """A history the window can only read (here: written by a newer Tandem): creating, renaming and
    deleting fail with a message in the window, nothing else."""
    store = HistoryStore(tmp_path / "history.db")
    cid = store.create_conversation("Old")
    store.close()
    db = sqlite3.connect(tmp_path / "history.db")
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    window = open_window(qtbot, tmp_path)
    assert "read-only" in window.banner.label.text() and window.sidebar.list.count() == 1
    window.new_conversation()
    assert "Creating the conversation failed" in window.banner.label.text() and window.current_id is None
    window._rename(cid, "New name")
    assert "Renaming the conversation failed" in window.banner.label.text()
    window._delete(cid)
    assert "Deleting the conversation failed" in window.banner.label.text() and window.sidebar.list.count() == 1
    window.close()


@pytest.mark.network
def test_a_full_disk_keeps_what_was_typed_and_says_so(qtbot, tmp_path, test_model_path):
    window = open_window(qtbot, tmp_path)
    window.load_pair(test_model_path, None)
    qtbot.waitUntil(lambda: window.loaded is not None and not window.busy, timeout=TIMEOUT_MS)
    window.new_conversation()
    worker_store = window.worker._store
    pages = worker_store._db.execute("PRAGMA page_count").fetchone()[0]
    worker_store._db.execute(f"PRAGMA max_page_count={pages}")      # SQLite's own "database or disk is full"
    text = "Please remember this long message. " * 400
    window.composer.setPlainText(text)
    window.composer.setFocus()
    qtbot.keyClick(window.composer, Qt.Key_Return)
    qtbot.waitUntil(lambda: not window.busy and "was not saved" in window.banner.label.text(), timeout=TIMEOUT_MS)
    message = window.banner.label.text()
    assert "Saving the message failed: the disk is full" in message and "still in the box" in message
    assert window.composer.toPlainText().strip() == text.strip()
    assert HistoryStore(tmp_path / "history.db").messages(window.current_id) == []
    assert [m.role for m in window.chat.messages] == []              # the view shows what is stored
    window.close()


@pytest.mark.network
def test_a_read_only_config_folder_still_loads_and_says_settings_are_not_saved(qtbot, tmp_path, test_model_path):
    config = tmp_path / "config"
    config.mkdir()
    (config / "settings.json").write_text(json.dumps({"loading": {"n_ctx": 512}}))
    read_only(config)
    try:
        with permissions_apply():
            window = MainWindow(str(tmp_path / "history.db"), str(config / "settings.json"))
            qtbot.addWidget(window)
            window.load_pair(test_model_path, None)
            qtbot.waitUntil(lambda: window.loaded is not None and not window.busy, timeout=TIMEOUT_MS)
            assert "Loaded SmolLM2" in window.model_bar.status.text()
            assert "Settings could not be saved" in window.banner.label.text()
            window.close()
    finally:
        writable(config)


def test_sigterm_closes_the_window_as_quit_does_and_keeps_the_settings(qtbot, tmp_path):
    """A logout or `kill` (SIGTERM): the settings changed were lost, since they are written when the
    window closes (a user's try). The app closes its window on SIGTERM, as Quit does."""
    import os
    import signal

    from desktop_app.ui.app import close_on_terminate

    window = open_window(qtbot, tmp_path)
    before = {name: signal.getsignal(getattr(signal, name)) for name in ("SIGTERM", "SIGINT")}
    restore = close_on_terminate(window)
    try:
        window.settings_panel.temperature.setValue(0.3)
        os.kill(os.getpid(), signal.SIGTERM)
        qtbot.waitUntil(lambda: window._closing, timeout=10_000)
    finally:
        restore()
    assert {name: signal.getsignal(getattr(signal, name)) for name in ("SIGTERM", "SIGINT")} == before
    saved = json.loads((tmp_path / "settings.json").read_text())
    assert saved["generation"]["temperature"] == pytest.approx(0.3)
