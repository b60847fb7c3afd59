"""`tandem gui` (the default command): the chat window."""
from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    from desktop_app.ui.app import run as run_window

    return run_window(args)
