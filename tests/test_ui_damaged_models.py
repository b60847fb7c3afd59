"""The window with a damaged model file in a scanned folder and remembered as the last target
(issue #12: the header reader's uncaught ValueError aborted the window on every start)."""
from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from desktop_app.ui.main_window import MainWindow

pytestmark = pytest.mark.network      # the damaged file is a copy of the real test model


def test_a_model_claiming_2_to_the_62_tensors_is_explained_and_the_window_stays(qtbot, tmp_path, test_model_path):
    from desktop_app.ui.app import start

    folder = tmp_path / "my-models"
    folder.mkdir()
    bad = Path(shutil.copyfile(test_model_path, folder / "damaged.gguf"))
    with open(bad, "r+b") as fh:
        fh.seek(8)
        fh.write(struct.pack("<Q", 2**62))
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"model_folders": [str(folder)], "last_target": str(bad)}))
    window = MainWindow(str(tmp_path / "history.db"), str(settings))
    qtbot.addWidget(window)
    window.show()
    assert window.model_bar.target_path() == str(bad)
    assert "cannot read: the header claims 4,611,686,018,427,387,904 tensors" in window.model_bar.info.text()
    start(window)
    qtbot.waitUntil(lambda: "Could not load" in window.model_bar.status.text() and not window.busy, timeout=120_000)
    assert "damaged.gguf" in window.model_bar.status.text()
    assert window.isVisible() and window.loaded is None
    window.close()
