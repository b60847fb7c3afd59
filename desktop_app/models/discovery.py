"""Finding GGUF files where people keep them: our own cache, LM Studio, the Hugging Face hub cache,
llama.cpp's cache, and folders the user adds."""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterable

from desktop_app.models.store import models_dir

MAX_DEPTH = 6


def usual_folders() -> list[Path]:
    home = Path.home()
    folders = [
        models_dir(),
        home / ".lmstudio" / "models",
        home / ".cache" / "lm-studio" / "models",
        Path(os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME", home / ".cache" / "huggingface")) / "hub"),
        Path(os.environ.get("LLAMA_CACHE", home / ".cache" / "llama.cpp")),
    ]
    return folders


def is_gguf_name(name: str) -> bool:
    """A GGUF file's name, not a hidden one (an unfinished download or requantisation)."""
    return name.lower().endswith(".gguf") and not name.startswith(".")


def find_gguf_files(extra_folders: Iterable[str | Path] = ()) -> list[Path]:
    """GGUF files under the usual folders and the extra ones, newest first, without duplicates
    (hub caches link the same blob from several names: the resolved file is listed once).

    Lists regular files only (not a folder, pipe or device named *.gguf, nor a broken or looping
    link) and never raises: a folder or file it cannot read is left out. Headers are not read here."""
    seen: set[Path] = set()
    found: list[tuple[float, Path]] = []
    extra = [Path(f) for f in extra_folders if isinstance(f, (str, os.PathLike))]
    for folder in [*usual_folders(), *extra]:
        if not folder.is_dir():
            continue
        base_depth = len(folder.parts)
        for root, dirs, files in os.walk(folder, followlinks=False):
            if len(Path(root).parts) - base_depth >= MAX_DEPTH:
                dirs[:] = []
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                if not is_gguf_name(name):
                    continue
                path = Path(root) / name
                try:
                    real = path.resolve()
                    st = real.stat()
                except (OSError, RuntimeError):         # RuntimeError: a symlink loop, before Python 3.13
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue
                mtime = st.st_mtime
                if real not in seen:
                    seen.add(real)
                    found.append((mtime, path))
    return [p for _, p in sorted(found, key=lambda t: -t[0])]
