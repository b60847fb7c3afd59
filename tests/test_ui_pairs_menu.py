"""The model bar's Pairs menu (pytest-qt, offscreen): a models folder added can be taken off the lists
again (a folder added by mistake stayed for good: only an edit of the settings file took it off)."""
from __future__ import annotations

import json

from desktop_app.ui.pairs_menu import REMOVE_FOLDERS


def _submenu(menu, title):
    return next((a.menu() for a in menu.actions() if a.menu() is not None and a.text() == title), None)


def test_a_models_folder_added_can_be_removed(window, tmp_path):
    w, bar = window, window.model_bar
    folder = tmp_path / "by mistake"
    folder.mkdir()
    (folder / "stray.gguf").write_bytes(b"")
    listed = lambda: [bar.target.itemData(i) for i in range(bar.target.count())]   # noqa: E731
    assert _submenu(bar.recent_menu, REMOVE_FOLDERS) is None          # (none added: nothing to remove)
    w.add_model_folder(str(folder))
    assert str(folder / "stray.gguf") in listed()
    remove = _submenu(bar.recent_menu, REMOVE_FOLDERS)
    [action] = remove.actions()
    assert action.text() == str(folder) and "nothing is deleted" in action.toolTip()
    action.trigger()
    assert w.settings["model_folders"] == [] and str(folder / "stray.gguf") not in listed()
    assert json.loads((tmp_path / "settings.json").read_text())["model_folders"] == []
    assert (folder / "stray.gguf").exists()                           # (its files stay where they are)
    assert _submenu(bar.recent_menu, REMOVE_FOLDERS) is None
