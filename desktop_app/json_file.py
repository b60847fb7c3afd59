"""Writing a file (JSON, or any text) so that a reader never sees half of it."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data, indent: int = 2) -> None:
    """Write `data` as JSON to `path`, as write_text_atomic writes text."""
    write_text_atomic(path, json.dumps(data, indent=indent))


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same folder, then replace: a crash or a
    full disk leaves the old file whole. Creates the folder; raises OSError where the folder or the
    disk refuses."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=path.suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
