"""Ctrl-C while a command loads models and generates.

Python raises KeyboardInterrupt wherever the main thread is when its handler runs, which is only
between two Python instructions: never inside a llama.cpp call, and, while a model loads, mostly
inside llama.cpp's callbacks (its log and progress callbacks, ctypes callbacks), where it is printed
as "Exception ignored on calling ctypes callback function" and dropped; the command went on to
generate its whole reply. Between two passes it came out as a traceback from the middle of the load.
So while this is held, Ctrl-C is only noted: the load's cancel callback and the command's own checks
between tokens act on it (`check`), as soon as Python runs again. A second Ctrl-C, for a user who
will not wait for that, reports (`on_force`) and ends the process at once. Once the command has
left the block because of a press, it is ending: further presses are ignored, which keeps them out of
its last report and out of Python's exit, where they came out as a KeyboardInterrupt traceback. (A
later block takes Ctrl-C back: a press that came just after a command's last check goes on there.)
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable

from desktop_app.commands.output import EXIT_INTERRUPTED


_ignoring = False       # whether Ctrl-C is ignored because a block here left on a press (not inherited)


class Interrupt:
    """A context manager that notes Ctrl-C; also a cancel callback (true once pressed)."""

    def __init__(self, on_force: Callable[[], object] | None = None) -> None:
        self.pressed = 0
        self.on_force = on_force
        self._installed = False
        self._old = None

    def __enter__(self) -> "Interrupt":
        global _ignoring
        if threading.current_thread() is threading.main_thread():
            old = signal.getsignal(signal.SIGINT)
            if old is not signal.SIG_IGN or _ignoring:    # (a job started with Ctrl-C ignored keeps ignoring
                self._old = signal.default_int_handler if _ignoring else old     # it; an ignore set by an
                _ignoring = False                         # earlier block is this module's, not the job's)
                signal.signal(signal.SIGINT, self._on_sigint)
                self._installed = True
        return self

    def __exit__(self, *exc) -> None:
        global _ignoring
        if self._installed:
            if self.pressed:                          # the command ends because of it (see above)
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                _ignoring = True
            else:   # (None: a handler set outside Python, which Python cannot put back: the default instead)
                signal.signal(signal.SIGINT, self._old if self._old is not None else signal.default_int_handler)
            self._installed = False

    def _on_sigint(self, signum, frame) -> None:
        self.pressed += 1
        if self.pressed > 1:
            if self.on_force is not None:
                self.on_force()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(EXIT_INTERRUPTED)

    def __call__(self) -> bool:
        return self.pressed > 0

    def check(self) -> None:
        """Raise KeyboardInterrupt if Ctrl-C was pressed."""
        if self.pressed:
            raise KeyboardInterrupt
