"""`tandem gui` (the default command): the chat window."""
from __future__ import annotations

import argparse
import os
import sys

from desktop_app.commands.output import EXIT_FAIL, fail


def no_display() -> str:
    """Why no window can open here ("" where one can): on Linux, a session without X11 or Wayland (over
    SSH, say), where Qt aborted with "Reinstalling the application may fix this problem" (a new
    user's try). QT_QPA_PLATFORM names a platform of its own (offscreen, vnc, …) and is left to Qt."""
    if not sys.platform.startswith("linux") or os.environ.get("QT_QPA_PLATFORM"):
        return ""
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return ""
    return ("no display to open the window on (neither DISPLAY nor WAYLAND_DISPLAY is set): run tandem from a "
            "desktop session, or chat on the command line: tandem generate -m MODEL -p TEXT")


def run(args: argparse.Namespace) -> int:
    why = no_display()
    if why:
        return fail(args, why, EXIT_FAIL)
    from desktop_app.ui.app import run as run_window

    return run_window(args)
