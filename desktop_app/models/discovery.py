"""Finding GGUF files where people keep them: our own cache, LM Studio, the Hugging Face hub cache,
llama.cpp's cache, and folders the user adds."""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterable

from desktop_app.models.store import models_dir

MAX_DEPTH = 6


HUGGING_FACE = "Hugging Face"


def _usual_named() -> list[tuple[Path, str]]:
    """The usual folders, each with the name people know it by."""
    home = Path.home()
    return [
        (models_dir(), "Tandem"),
        (home / ".lmstudio" / "models", "LM Studio"),
        (home / ".cache" / "lm-studio" / "models", "LM Studio"),
        (Path(os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME", home / ".cache" / "huggingface")) / "hub"),
         HUGGING_FACE),
        (Path(os.environ.get("LLAMA_CACHE", home / ".cache" / "llama.cpp")), "llama.cpp"),
    ]


def usual_folders() -> list[Path]:
    return [folder for folder, _ in _usual_named()]


def found_in(path: str | Path) -> str:
    """Where a file was found, in a few words: a usual folder's name ("LM Studio"; for the Hugging Face
    hub cache, with the repository: "Hugging Face Qwen/Qwen2.5-0.5B-Instruct-GGUF"), else the name of
    its own folder."""
    p = Path(path)
    for folder, name in _usual_named():
        if p.is_relative_to(folder):
            repo = next((part for part in p.relative_to(folder).parts if part.startswith("models--")), None)
            return f"{name} {repo.removeprefix('models--').replace('--', '/')}" if name == HUGGING_FACE and repo else name
    return p.parent.name or str(p.parent)


def distinct_names(paths: Iterable[str]) -> dict[str, str]:
    """Each file's name as the lists show it: its file name; where files of one name were found in
    several places, with where each was found ("model.gguf (LM Studio)", "model.gguf (downloads)"); where
    that is alike too, with the nearest of their folders' names that tells them apart ("model.gguf
    (bartowski)", as short as the lists cut long names in the middle), else the whole folder. (Two
    files of one name looked alike: a new user's try.)"""
    by_name: dict[str, list[str]] = {}
    for path in dict.fromkeys(paths):
        by_name.setdefault(os.path.basename(path), []).append(path)
    out = {}
    for name, group in by_name.items():
        where = {p: found_in(p) for p in group}
        if len(set(where.values())) < len(group):
            where = _nearest_apart(group)
        for p in group:
            out[p] = name if len(group) == 1 else f"{name} ({where[p]})"
    return out


def _nearest_apart(group: list[str]) -> dict[str, str]:
    """For files of one name: the name of the nearest folder up from each at which they all differ,
    else each one's whole folder."""
    parents = {p: Path(p).parent.parts for p in group}
    for k in range(1, max(len(parts) for parts in parents.values()) + 1):
        names = {p: parts[-k] if len(parts) >= k else "" for p, parts in parents.items()}
        if len(set(names.values())) == len(group) and all(names.values()):
            return names
    return {p: str(Path(p).parent) for p in group}


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
