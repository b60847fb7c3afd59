"""Shared fixtures: the real test model, fetched once into the user cache (a second run downloads nothing)."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# The CPU probe's remembered verdict (engine/repack.py) goes to a folder of this test session, never the
# user's: the suite probes once, as a fresh install does.
_CACHE = None
if "TANDEM_CACHE_DIR" not in os.environ:
    _CACHE = os.environ["TANDEM_CACHE_DIR"] = tempfile.mkdtemp(prefix="tandem-test-cache-")


def pytest_unconfigure(config):
    if _CACHE:
        shutil.rmtree(_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def test_model_path():
    from desktop_app import models

    return str(models.fetch(models.MODELS["smollm2-135m"]))


@pytest.fixture
def offline_pip_env(tmp_path):
    """Environment for a pip that can reach nothing (a closed local port): a machine without network."""
    empty = tmp_path / "no-wheels"
    empty.mkdir(exist_ok=True)
    return {"PIP_INDEX_URL": "http://127.0.0.1:9/simple/", "PIP_EXTRA_INDEX_URL": "http://127.0.0.1:9/simple/",
            "PIP_FIND_LINKS": str(empty), "PIP_RETRIES": "0", "PIP_DEFAULT_TIMEOUT": "2",
            "PIP_NO_CACHE_DIR": "1"}


@pytest.fixture(scope="session")
def q2k_draft_path(test_model_path):
    """A different draft for the test target: the same model requantised to Q2_K (acceptance about 0.5)."""
    from pathlib import Path

    from desktop_app.models.requantize import requantize

    src = Path(test_model_path)
    return str(requantize(src, src.with_name("SmolLM2-135M-Instruct.Q2_K.gguf")))


@pytest.fixture(scope="session")
def shallow_draft_path(test_model_path, tmp_path_factory):
    """A draft much smaller than the test target, with its vocabulary: its first 6 of 30 blocks (about
    0.4 of its parameters), in a folder of its own (not the models folder the window lists)."""
    from gguf_shallow import shallow_copy

    return str(shallow_copy(test_model_path, tmp_path_factory.mktemp("shallow") / "SmolLM2-shallow.gguf", 6))


@pytest.fixture(scope="session")
def gemma_path():
    """A model whose vocabulary no other here shares (fetched once, 253 MB)."""
    from desktop_app import models

    return str(models.fetch(models.MODELS["gemma3-270m"]))


@pytest.fixture(scope="session")
def qwen_draft_path():
    """The demo pair's small Qwen model (491 MB, fetched once): a second real chat template."""
    from desktop_app import models

    return str(models.fetch(models.MODELS["qwen2.5-coder-0.5b"]))


@pytest.fixture
def window(qtbot, tmp_path):
    """The main window on a fresh history and settings file in tmp_path, shown (offscreen), closed after."""
    from desktop_app.ui.main_window import MainWindow

    w = MainWindow(str(tmp_path / "history.db"), str(tmp_path / "settings.json"))
    qtbot.addWidget(w)
    w.show()
    yield w
    if not w._closing:
        w.close()


@pytest.fixture
def xserver():
    """A private X server (Xvfb) for tests that open a real window; its DISPLAY."""
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed (apt-get install xvfb and Qt's libxcb libraries; .ci/run does)")
    for display in range(90, 110):
        if not Path(f"/tmp/.X11-unix/X{display}").exists() and not Path(f"/tmp/.X{display}-lock").exists():
            break
    proc = subprocess.Popen(["Xvfb", f":{display}", "-screen", "0", "1600x900x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not Path(f"/tmp/.X11-unix/X{display}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f":{display}"
    proc.terminate()
    proc.wait()


@pytest.fixture(scope="session")
def llama_tools():
    """llama.cpp's llama-server, ggml-rpc-server and RPC-enabled libraries (built once, cached)."""
    from llama_tools import tools_dir

    return tools_dir()


@pytest.fixture(scope="session")
def spec_server(llama_tools, test_model_path, q2k_draft_path, tmp_path_factory):
    """A llama-server speculating with the SmolLM2 pair (draft-simple, up to N_MAX), --metrics, an API key."""
    from llama_tools import KEY, N_MAX, Server

    server = Server(llama_tools, "-m", test_model_path, "-md", q2k_draft_path, "--spec-type", "draft-simple",
                    "--spec-draft-n-max", str(N_MAX), "--metrics", "--api-key", KEY,
                    log=tmp_path_factory.mktemp("server") / "llama-server.log")
    yield server
    server.stop()
