"""Errors the engine reports to a user, importable without llama.cpp (the window process never loads it)."""
from __future__ import annotations

import os


class ModelLoadError(RuntimeError):
    """A model could not be loaded. `str()` names the file and the reason."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{os.path.basename(path)}: {reason}")
        self.path = path
        self.reason = reason


class LoadCancelled(ModelLoadError):
    def __init__(self, path: str):
        super().__init__(path, "loading cancelled")


class IncompatiblePair(ValueError):
    """The draft cannot speculate for the target; the message names the first difference."""
