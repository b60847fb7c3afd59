"""llama.cpp's own servers for the remote-backend tests: llama-server and ggml-rpc-server processes on
127.0.0.1, from the cached build of scripts/build_llama_tools.py (fixtures in conftest.py)."""
from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
N_MAX = 8                         # the spec server's --spec-draft-n-max
KEY = "tandem-test-key"           # the spec server's --api-key


def tools_dir() -> Path:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import build_llama_tools
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return build_llama_tools.ensure()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One llama-server on 127.0.0.1, waited for until /health answers."""

    def __init__(self, tools: Path, *args: str, log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.proc = subprocess.Popen([str(tools / "llama-server"), "--host", "127.0.0.1", "--port", str(self.port),
                                      "-c", "2048", "-t", "2", "--no-webui", *args],
                                     stdout=open(log, "w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"llama-server did not come up: {log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
