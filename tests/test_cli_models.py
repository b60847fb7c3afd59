"""`tandem models …`: exit codes and JSON."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from desktop_app import models
from desktop_app.models import store

SMOL = models.MODELS["smollm2-135m"]


def tandem(*args: str, folder: Path, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, store.MODELS_DIR_ENV: str(folder), **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", "desktop_app", *args], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.network
def test_fetch_json_prints_the_path_of_a_verified_file(tmp_path, test_model_path):
    shutil.copy(test_model_path, tmp_path / SMOL.filename)     # no record yet: it must hash it
    out = tandem("models", "fetch", "test", "--json", folder=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["ok"] is True
    [entry] = doc["models"]
    assert entry["key"] == SMOL.key and entry["verified"] is True
    assert Path(entry["path"]) == tmp_path / SMOL.filename and Path(entry["path"]).is_file()


@pytest.mark.network
def test_list_json_reports_cached_and_missing(tmp_path, test_model_path, q2k_draft_path):
    shutil.copy(test_model_path, tmp_path / SMOL.filename)
    shutil.copy(q2k_draft_path, tmp_path / "mine.gguf")          # a file of the user's own, not the catalogue's
    (tmp_path / "notes.gguf").write_text("not a model")           # ... and two it could not load (offered as
    (tmp_path / "cut.gguf").write_bytes(Path(test_model_path).read_bytes()[:20_000_000])   # models: a user's try)
    (tmp_path / ".requant-x.gguf").write_bytes(b"GGUF")          # an unfinished requantisation: not listed
    out = tandem("models", "list", "--json", folder=tmp_path)
    assert out.returncode == 0
    doc = json.loads(out.stdout)
    assert [(Path(f["path"]).name, f["size"], f["problem"]) for f in doc["other_files"]] == [
        ("cut.gguf", 20_000_000, "the file is cut short: its weights end at byte 98,362,432, and it has 20,000,000 "
                                 "(20 %; a download or copy that did not finish?)"),
        ("mine.gguf", Path(q2k_draft_path).stat().st_size, None),
        ("notes.gguf", 11, "notes.gguf is not a GGUF file")]
    text = tandem("models", "list", folder=tmp_path).stdout
    assert "notes.gguf  (cannot be used: notes.gguf is not a GGUF file)" in text
    assert [line for line in text.splitlines() if line.endswith("mine.gguf")]     # (nothing after a usable one)
    rows = {r["key"]: r for r in doc["models"]}
    assert set(rows) == set(models.MODELS)
    assert rows[SMOL.key]["present"] and rows[SMOL.key]["size"] == SMOL.size
    assert rows[SMOL.key]["verified"] is False          # copied, never hashed here
    assert not rows["qwen2.5-coder-1.5b"]["present"]
    deep = json.loads(tandem("models", "list", "--json", "--verify", folder=tmp_path).stdout)
    assert {r["key"]: r for r in deep["models"]}[SMOL.key]["verified"] is True


@pytest.mark.network
def test_list_names_the_files_the_window_finds_elsewhere(tmp_path, test_model_path, shallow_draft_path):
    """`tandem models` listed Tandem's models folder only, not the folders added in the window, whose
    files the window lists (a new user's try); a file in both is listed once, under the models folder."""
    cache, added, config, home = (tmp_path / name for name in ("cache", "added", "config", "home"))
    for folder in (cache, added, config, home):
        folder.mkdir()
    shutil.copy(test_model_path, cache / SMOL.filename)
    shutil.copy(shallow_draft_path, added / "mine.gguf")
    (added / "same.gguf").symlink_to(cache / SMOL.filename)       # (the models folder's file, by another name)
    shutil.copy(shallow_draft_path, added / "linked.gguf")        # ... and a file the models folder links to
    (cache / "alias.gguf").symlink_to(added / "linked.gguf")      # (listed there, not again here)
    (added / "notes.gguf").write_text("not a model")
    (config / "settings.json").write_text(json.dumps({"model_folders": [str(added), str(tmp_path / "gone")]}))
    env = {"TANDEM_CONFIG_DIR": str(config), "HOME": str(home), "HF_HUB_CACHE": str(home / "hf"),
           "LLAMA_CACHE": str(home / "llama")}                   # (no other caches: this machine's own)
    doc = json.loads(tandem("models", "list", "--json", folder=cache, extra_env=env).stdout)
    assert sorted((Path(f["path"]).name, f["problem"]) for f in doc["elsewhere"]) == [
        ("mine.gguf", None), ("notes.gguf", "notes.gguf is not a GGUF file")]
    assert [Path(f["path"]).name for f in doc["other_files"]] == ["alias.gguf"]
    text = tandem("models", "list", folder=cache, extra_env=env).stdout
    assert "GGUF files elsewhere, as the window lists them" in text and f"  {added / 'mine.gguf'}" in text
    assert "same.gguf" not in text and "linked.gguf" not in text
    (config / "settings.json").write_text("{ damaged")             # a damaged settings file: nothing more,
    doc = json.loads(tandem("models", "list", "--json", folder=cache, extra_env=env).stdout)   # and it stays
    assert doc["elsewhere"] == [] and (config / "settings.json").read_text() == "{ damaged"   # as it was


def test_a_reader_that_goes_away_ends_the_output_quietly(tmp_path):
    """`tandem models list --json | head`: the reader closes its end before the command writes."""
    env = {**os.environ, store.MODELS_DIR_ENV: str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "desktop_app", "models", "list", "--json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()                           # (before the command has imported what it needs)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1 and b"Traceback" not in err and b"BrokenPipe" not in err, err


def test_unknown_name_is_a_usage_error(tmp_path):
    out = tandem("models", "fetch", "no-such-model", "--json", folder=tmp_path)
    assert out.returncode == 2
    assert json.loads(out.stdout) == {"ok": False, "error": json.loads(out.stdout)["error"]}
    assert "unknown model or set 'no-such-model'" in out.stderr and "of your own" not in out.stderr
    # a file's path: a file of one's own needs no fetch (it said only which names it knows: a new user's try)
    path = tandem("models", "fetch", str(tmp_path / "mine.gguf"), folder=tmp_path)
    assert path.returncode == 2 and path.stderr.rstrip().endswith(
        "a GGUF file of your own needs no fetch: give its path to -m (or -md)"), path.stderr


def test_failed_fetch_exits_one_with_a_one_line_error(tmp_path, offline_pip_env):
    out = tandem("models", "fetch", "test", "--json", folder=tmp_path / "m", extra_env=offline_pip_env)
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    assert doc["ok"] is False and "could not download" in doc["error"]
    assert out.stderr.strip().count("\n") == 0
    assert not (tmp_path / "m" / SMOL.filename).exists()
