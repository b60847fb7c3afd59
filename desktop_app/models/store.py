"""Where fetched model files live and how we know one is intact.

A verified file has a small sidecar `<file>.verified` recording its SHA-256 together with the size
and modification time it had when hashed. While those match, the file is trusted without hashing
1 GB again; any change to the file (a truncation, an edit) changes them and forces a re-hash. The
sidecar is only a shortcut: in a folder that cannot be written, files are hashed and used without one.
"""
from __future__ import annotations

import hashlib
import json
import os
from contextlib import suppress
from dataclasses import asdict, dataclass
from pathlib import Path

from platformdirs import user_cache_dir

from desktop_app import APP_NAME
from desktop_app.models.catalogue import ModelFile

MODELS_DIR_ENV = "TANDEM_MODELS_DIR"
HASH_CHUNK = 4 << 20


def models_dir() -> Path:
    """The folder fetched models go to: $TANDEM_MODELS_DIR, else the user cache dir."""
    override = os.environ.get(MODELS_DIR_ENV)
    return Path(override) if override else Path(user_cache_dir(APP_NAME, appauthor=False)) / "models"


def model_path(model: ModelFile, folder: Path | None = None) -> Path:
    return (folder or models_dir()) / model.filename


def _marker_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def write_marker(path: Path, sha256: str) -> bool:
    """Record that `path` hashed to `sha256`; False when the folder cannot take the record."""
    tmp = _marker_path(path).with_suffix(".tmp")
    try:
        st = path.stat()
        tmp.write_text(json.dumps({"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))
        os.replace(tmp, _marker_path(path))
        return True
    except OSError:
        with suppress(OSError):
            tmp.unlink(missing_ok=True)
        return False


def marker_matches(model: ModelFile, path: Path) -> bool:
    """True when the sidecar says this exact file (same size and mtime) hashed to the model's SHA-256."""
    try:
        record = json.loads(_marker_path(path).read_text())
        st = path.stat()
    except (OSError, ValueError):
        return False
    return (record.get("sha256") == model.sha256 and record.get("size") == st.st_size
            and record.get("mtime_ns") == st.st_mtime_ns)


def verify(model: ModelFile, path: Path) -> bool:
    """Hash the file; record the result when it is right, drop a stale record when it is not (both
    as far as the folder allows). A file that cannot be read is not verified."""
    try:
        good = path.is_file() and path.stat().st_size == model.size and sha256_of(path) == model.sha256
    except OSError:
        good = False
    if good:
        write_marker(path, model.sha256)
        return True
    with suppress(OSError):
        _marker_path(path).unlink(missing_ok=True)
    return False


@dataclass
class CachedModel:
    key: str
    filename: str
    description: str
    path: str
    present: bool
    size: int
    expected_size: int
    verified: bool

    def to_json(self) -> dict:
        return asdict(self)


def inspect(model: ModelFile, folder: Path | None = None, deep: bool = False) -> CachedModel:
    """What the cache holds for this model. `deep` re-hashes instead of trusting the sidecar."""
    path = model_path(model, folder)
    present = path.is_file()
    if not present:
        verified = False
    elif deep:
        verified = verify(model, path)
    else:
        verified = marker_matches(model, path)
    return CachedModel(model.key, model.filename, model.description, str(path), present,
                       path.stat().st_size if present else 0, model.size, verified)
