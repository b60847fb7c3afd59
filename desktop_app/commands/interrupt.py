"""Ctrl-C while a command loads models and generates.

Python raises KeyboardInterrupt wherever the main thread is when the signal arrives. Inside
llama.cpp's log callback (a ctypes callback, called many times while a model loads) it is printed
as "Exception ignored on calling ctypes callback function" and dropped, and the command went on to
generate its whole reply; between two passes it came out as a traceback from the middle of the
load. So while this is held, a first Ctrl-C is only noted: the load's cancel callback and the
command's own checks between tokens act on it (`check`). A second one raises at once, for a user
who will not wait for a pass to end.
"""
from __future__ import annotations

import signal
import threading


class Interrupt:
    """A context manager that notes Ctrl-C; also a cancel callback (true once pressed)."""

    def __init__(self) -> None:
        self.pressed = 0
        self._old = None

    def __enter__(self) -> "Interrupt":
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
            self._old = None

    def _on_sigint(self, signum, frame) -> None:
        self.pressed += 1
        if self.pressed > 1:
            raise KeyboardInterrupt

    def __call__(self) -> bool:
        return self.pressed > 0

    def check(self) -> None:
        """Raise KeyboardInterrupt if Ctrl-C was pressed."""
        if self.pressed:
            raise KeyboardInterrupt
