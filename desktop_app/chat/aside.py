"""Setting a damaged file aside, never deleting it: under a name no earlier copy has."""
from __future__ import annotations

import os
import time
from itertools import count
from pathlib import Path


def set_aside(path: Path, label: str, companions: tuple[str, ...] = ()) -> Path:
    """Move `path` (and `path` + each companion suffix, such as SQLite's "-wal", where present) to
    `<name>.<label>-<date>-<time>[-N]`, N making the name new; returns the new path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in count(1):
        aside = path.with_name(f"{path.name}.{label}-{stamp}" + (f"-{n}" if n > 1 else ""))
        if any(Path(str(aside) + suffix).exists() for suffix in companions):
            continue
        try:                                  # claim the name, so that two processes never share it
            os.close(os.open(aside, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            break
        except FileExistsError:
            continue
    for suffix in ("", *companions):
        source = Path(str(path) + suffix)
        if source.exists():
            os.replace(source, Path(str(aside) + suffix))
    return aside
