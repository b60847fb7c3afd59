"""`tandem gui` (the default command): the chat window."""
from __future__ import annotations

import argparse
import os
import sys

from desktop_app.commands.output import EXIT_FAIL, EXIT_USAGE, fail
from desktop_app.engine.load_options import CTX_RANGE, THREADS_RANGE


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
    low, high = CTX_RANGE
    if args.ctx_size is not None and not low <= args.ctx_size <= high:     # (a bare `-c 256` was taken for a
        return fail(args, f"-c must be {low} to {high} tokens in the window (the context Settings holds), "  # command)
                          f"not {args.ctx_size}", EXIT_USAGE)
    if args.threads is not None and not THREADS_RANGE[0] <= args.threads <= THREADS_RANGE[1]:
        return fail(args, f"-t must be 0 (automatic) or a number of threads up to {THREADS_RANGE[1]}, not "
                          f"{args.threads}", EXIT_USAGE)
    if args.server and (args.ctx_size is not None or args.threads is not None):   # (set and saved for nothing)
        return fail(args, "-c and -t set how models load here; a llama-server sets its own when it starts", EXIT_USAGE)
    why = no_display()
    if why:
        return fail(args, why, EXIT_FAIL)
    from desktop_app.ui.app import run as run_window

    return run_window(args)
