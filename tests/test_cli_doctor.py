"""`tandem doctor`: one JSON document (or compact text) with every fact a bug report needs.

Runs the real command in a subprocess, with every folder in a temporary place; no model needed."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

import desktop_app
from desktop_app.diagnostics import REPACK_STATES, format_text
from desktop_app.machine import RELEVANT_FLAGS


@pytest.fixture
def env(tmp_path):
    (tmp_path / "data").mkdir()
    return {**{k: v for k, v in os.environ.items() if k != "TANDEM_NO_REPACK"}, "TANDEM_CACHE_DIR": str(tmp_path / "cache"), "TANDEM_DATA_DIR": str(tmp_path / "data"),
            "TANDEM_CONFIG_DIR": str(tmp_path / "config"), "TANDEM_MODELS_DIR": str(tmp_path / "no-models")}


def doctor(env, *args, expect_rc=0):
    done = subprocess.run([sys.executable, "-m", "desktop_app", "doctor", *args], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == expect_rc, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout) if "--json" in args else done.stdout


def test_doctor_json_reports_every_section(env, tmp_path):
    import llama_cpp

    doc = doctor(env, "--json")
    assert doc["ok"] is True
    assert doc["tandem"]["version"] == desktop_app.__version__
    assert doc["python"]["version"] == platform.python_version()
    assert doc["platform"]["machine"] == platform.machine()
    assert doc["packages"]["llama-cpp-python"] == llama_cpp.__version__

    cpu = doc["cpu"]
    assert isinstance(cpu["model"], str) and cpu["model"]
    assert cpu["logical_cores"] == os.cpu_count() and 1 <= cpu["physical_cores"] <= cpu["logical_cores"]
    assert set(cpu["flags"]) <= set(RELEVANT_FLAGS)

    llama = doc["llama_cpp"]
    assert llama["version"] == llama_cpp.__version__
    assert "CPU" in llama["backends"] and "CPU :" in llama["system_info"]
    assert all(isinstance(v, dict) for v in llama["backends"].values())
    assert isinstance(llama["gpu_offload"], bool) and isinstance(llama["rpc"], bool)

    # Nothing was remembered in the fresh cache: doctor probed, said so, and remembered the verdict.
    rp = doc["repack"]
    assert rp["state"] in REPACK_STATES and rp["state"] != "not probed"
    assert rp["source"] == "probe" and rp["probed_now"] is True
    assert rp["remembered"]["enabled"] is (rp["state"] == "on")
    assert rp["verdicts_file"] == str(tmp_path / "cache" / "repack.json")
    assert os.path.isfile(rp["verdicts_file"])
    assert rp["overrides"] == {"no_repack_flag": False, "env": None, "window_setting": None}

    folders = doc["folders"]
    assert folders["models"] == {"path": str(tmp_path / "no-models"), "exists": False,
                                 "free_bytes": folders["models"]["free_bytes"]}
    assert folders["data"]["path"] == str(tmp_path / "data") and folders["data"]["exists"] is True
    assert folders["config"]["path"] == str(tmp_path / "config") and folders["config"]["exists"] is False
    assert folders["cache"]["path"] == str(tmp_path / "cache") and folders["cache"]["exists"] is True
    for f in folders.values():
        assert isinstance(f["free_bytes"], int) and f["free_bytes"] > 0
    assert doc["speed_timings"] == {"file": str(tmp_path / "cache" / "calibrations.json"), "state": "missing",
                                    "targets": []}

    # A second run finds the verdict; --no-repack and the window setting are reported as overrides.
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "settings.json").write_text(json.dumps({"loading": {"repack": "off"}}))
    again = doctor(env, "--json")["repack"]
    assert again["source"] == "remembered" and again["probed_now"] is False and again["state"] == rp["state"]
    assert again["overrides"]["window_setting"] == "off"
    off = doctor(env, "--json", "--no-repack")["repack"]
    assert off["state"] == "off" and off["source"] == "override" and off["overrides"]["no_repack_flag"] is True


def test_doctor_no_probe_says_not_probed(env, tmp_path):
    rp = doctor(env, "--json", "--no-probe")["repack"]
    assert rp["state"] == "not probed" and rp["source"] is None and rp["remembered"] is None
    assert not (tmp_path / "cache" / "repack.json").exists()
    text = doctor(env, "--no-probe")
    assert "Weight repacking: not probed" in text
    assert "Speed timings: none remembered yet" in text


def test_doctor_names_the_remembered_speed_timings(env, tmp_path, monkeypatch):
    from desktop_app.engine import calibration_store

    monkeypatch.setenv("TANDEM_CACHE_DIR", env["TANDEM_CACHE_DIR"])
    assert calibration_store.remember("k", {2: 1.5}, "target.gguf")
    assert calibration_store.remember("k", {2: 1.6}, "target.gguf")
    path = tmp_path / "cache" / "calibrations.json"

    def line():
        text = doctor(env, "--no-probe")
        return next(line for line in text.splitlines() if line.startswith("Speed timings: "))

    assert line().startswith("Speed timings: remembered for target.gguf (2 loads, last ")
    assert str(path) in line()
    assert calibration_store.remember("k1", {2: 1.5}, "target.gguf", "1 thread, batch 512")
    assert line().startswith("Speed timings: remembered for target.gguf (1 thread, batch 512; 1 load, last ")
    path.write_text("{ damaged")
    assert line() == f"Speed timings: {path} is damaged; the next load replaces it"
    path.write_text(json.dumps({"version": 99, "targets": {}}))
    assert line() == f"Speed timings: {path} was written by a newer Tandem; not used (delete it to measure here)"


def test_doctor_text_is_compact_and_complete(env):
    text = doctor(env)
    lines = text.splitlines()
    assert lines[0].startswith(f"Tandem {desktop_app.__version__} · Python {platform.python_version()}")
    for head in ("CPU: ", "llama.cpp: llama-cpp-python ", "Weight repacking: ", "Packages: ", "Folders:"):
        assert any(line.startswith(head) for line in lines), head
    assert "(probed now)" in text
    assert len(lines) <= 16
    # every dependency, as pyproject.toml lists them (pyqtgraph, Pygments and psutil were left out: a new
    # user's try), each with its version
    import re
    from pathlib import Path

    from desktop_app.diagnostics import PACKAGES
    pyproject = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^dependencies = \[(.*?)^\]", pyproject, re.S | re.M).group(1)   # (tomllib: Python 3.11+)
    listed = [re.split(r"[<>=!~ ;\[]", d, maxsplit=1)[0] for d in re.findall(r'^\s*"([^"]+)"', block, re.M)]
    assert list(PACKAGES) == listed
    packages = next(line for line in lines if line.startswith("Packages: "))
    assert all(f"{name} " in packages for name in listed) and "missing" not in packages


def test_doctor_reports_a_broken_llama_cpp_instead_of_failing(env, tmp_path):
    fake = tmp_path / "fake" / "llama_cpp"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise OSError('libllama.so: cannot open shared object file')\n")
    env = {**env, "PYTHONPATH": str(tmp_path / "fake")}
    doc = doctor(env, "--json")
    assert doc["ok"] is True and doc["tandem"]["version"] == desktop_app.__version__
    assert "libllama.so" in doc["llama_cpp"]["error"]
    assert doc["repack"]["state"] == "not probed" and "libllama.so" in doc["repack"]["reason"]
    assert doc["folders"]["models"]["path"] == str(tmp_path / "no-models")
    assert doc["cpu"]["logical_cores"] == os.cpu_count()             # what does not need llama.cpp is there
    text = format_text(doc)
    assert "llama.cpp: not loaded: OSError: libllama.so" in text


def test_doctor_contradictory_options_are_a_usage_error(env):
    done = subprocess.run([sys.executable, "-m", "desktop_app", "doctor", "--json", "--reprobe", "--no-probe"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2
    assert json.loads(done.stdout) == {"ok": False, "error": "--reprobe and --no-probe contradict each other"}


def test_llama_cpp_build_features_are_parsed_per_backend():
    from desktop_app.machine import parse_system_info

    text = ("CUDA : ARCHS = 890 | USE_GRAPHS = 1 | PEER_MAX_BATCH_SIZE = 128 | "
            "CPU : SSE3 = 1 | AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 | ")
    backends = parse_system_info(text)
    assert backends == {"CUDA": {"ARCHS": "890", "USE_GRAPHS": "1", "PEER_MAX_BATCH_SIZE": "128"},
                        "CPU": {"SSE3": "1", "AVX512": "1", "AMX_INT8": "1", "REPACK": "1"}}
    line = next(x for x in format_text({"llama_cpp": {"version": "9", "backends": backends, "gpu_offload": True,
                                                      "rpc": False}}).splitlines() if x.startswith("llama.cpp"))
    assert line == ("llama.cpp: llama-cpp-python 9 · CUDA: ARCHS=890 USE_GRAPHS PEER_MAX_BATCH_SIZE=128 · "
                    "CPU: SSE3 AVX512 AMX_INT8 REPACK · GPU offload: yes · RPC: no")
