"""The real app in a real X window (Xvfb): load the test pair, send a message, screenshot the reply.

The screenshot is kept in artifacts/ at the repository root. Needs Debian's xvfb and Qt's xcb
libraries (.ci/run installs them); skipped with a reason where they are missing."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from desktop_app.chat.history import HistoryStore

pytestmark = pytest.mark.network      # every test here needs a fetched model

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"


def test_real_window_replies_and_is_screenshotted(xserver, tmp_path, test_model_path, q2k_draft_path):
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "window-after-reply.png"
    shot.unlink(missing_ok=True)
    env = {**os.environ, "DISPLAY": xserver, "QT_QPA_PLATFORM": "xcb",
           "TANDEM_DATA_DIR": str(tmp_path / "data"), "TANDEM_CONFIG_DIR": str(tmp_path / "config")}
    out = subprocess.run([sys.executable, "-m", "desktop_app", "-m", test_model_path, "-md", q2k_draft_path,
                          "--prompt", "Write a Python function that reverses a string.", "--screenshot", str(shot)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    image = QImage(str(shot))
    assert not image.isNull() and image.width() >= 800 and image.height() >= 500
    colours = {image.pixel(x, y) for x in range(0, image.width(), 37) for y in range(0, image.height(), 23)}
    assert len(colours) > 20, "the screenshot looks blank"
    store = HistoryStore(tmp_path / "data" / "history.db")
    [conversation] = store.list_conversations()
    reply = store.messages(conversation.id)[-1]
    assert reply.role == "assistant" and reply.complete and reply.content
    store.close()
