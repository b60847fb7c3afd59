"""llama.cpp RPC: Tandem's loop here, the model's layers on a local ggml-rpc-server (built with the
server tools from the pinned sdist, cached: scripts/build_llama_tools.py), loaded through an
RPC-enabled libllama from that build (LLAMA_CPP_LIB_PATH). Greedy output must equal local decoding's;
a llama.cpp without RPC must say how to rebuild; bad addresses are refused before anything loads."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from desktop_app.engine.rpc import REBUILD, WARNING

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "Write a Python function that reverses a string."
_LOG: dict[str, Path] = {}


def rpc_server_log() -> str:
    return _LOG["rpc-server"].read_text()


@pytest.fixture(scope="module")
def rpc_server(llama_tools, tmp_path_factory):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("rpc") / "rpc-server.log"
    proc = subprocess.Popen([str(llama_tools / "ggml-rpc-server"), "-H", "127.0.0.1", "-p", str(port), "-t", "2"],
                            stdout=open(log, "w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.2)
    _LOG["rpc-server"] = log
    yield f"127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


def _generate(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "desktop_app", "generate", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={**os.environ, **(env or {})})


@pytest.mark.slow
@pytest.mark.network
def test_generating_through_rpc_gives_the_local_greedy_output(llama_tools, rpc_server, test_model_path, q2k_draft_path):
    common = ["-m", test_model_path, "-p", PROMPT, "-n", "40", "--temp", "0", "--json", "-t", "2"]
    rpc_env = {"LLAMA_CPP_LIB_PATH": str(llama_tools)}
    local = _generate(*common, "--drafter", "none")
    assert local.returncode == 0, local.stderr[-2000:]
    remote = _generate(*common, "--drafter", "none", "--rpc", rpc_server, env=rpc_env)
    assert remote.returncode == 0, remote.stderr[-2000:]
    assert WARNING in remote.stderr                              # said every time RPC is used
    # the work went there: llama.cpp's RPC client opened several connections beyond Tandem's probe
    assert rpc_server_log().count("Accepted client connection") >= 3
    [a], [b] = json.loads(local.stdout)["samples"], json.loads(remote.stdout)["samples"]
    assert a["tokens"] == b["tokens"] and a["text"]
    # speculating with both models on the RPC server: the same text again, with rounds kept and rejected
    spec = _generate(*common, "-md", q2k_draft_path, "--draft-max", "4", "--rpc", rpc_server, env=rpc_env)
    assert spec.returncode == 0, spec.stderr[-2000:]
    [c] = json.loads(spec.stdout)["samples"]
    assert c["stats"]["n_drafted"] > 0 and c["stats"]["n_accepted"] > 0
    assert c["tokens"] == a["tokens"]


@pytest.mark.network
def test_a_llama_cpp_without_rpc_says_how_to_rebuild(test_model_path):
    out = _generate("-m", test_model_path, "-p", "Hi", "-n", "4", "--rpc", "127.0.0.1:9")
    from llama_cpp import llama_cpp as L

    if L.llama_supports_rpc():
        pytest.skip("the installed llama-cpp-python has RPC")
    # before any load, in --rpc's name (it named the target's file), and without the warning on a network
    assert out.returncode == 2 and out.stderr == f"tandem: error: --rpc: {REBUILD}\n", out.stderr[-2000:]


def test_rpc_addresses_are_checked_before_anything_loads():
    for bad in ("", "localhost", "host:0", "host:99999", "a b:1"):
        out = _generate("-m", "nothing.gguf", "-p", "Hi", "--rpc", bad)
        assert out.returncode == 2 and "--rpc" in out.stderr, (bad, out.stderr)


@pytest.mark.slow
@pytest.mark.network
def test_an_rpc_server_that_cannot_be_reached_is_named_not_crashed_on(llama_tools, test_model_path):
    """llama.cpp aborts the process when its RPC client cannot connect; Tandem asks first and says so."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]                      # nothing listens there
    out = _generate("-m", test_model_path, "-p", "Hi", "-n", "4", "--rpc", f"127.0.0.1:{port}",
                    env={"LLAMA_CPP_LIB_PATH": str(llama_tools)})
    assert out.returncode == 1, out.stderr[-2000:]
    assert f"cannot reach the RPC server 127.0.0.1:{port}: nothing is listening there" in out.stderr


class _FakeService:
    """A TCP service on 127.0.0.1 that reads what a client sends first, answers `answer`, and closes."""

    def __init__(self, answer: bytes | None, read: int = 64):
        import threading

        self.answer, self.read = answer, read
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    conn.recv(self.read)
                    if self.answer is None:           # says nothing: the client times out
                        time.sleep(3)
                    else:
                        conn.sendall(self.answer)
                except OSError:
                    pass

    def close(self):
        self.sock.close()


@pytest.mark.slow
@pytest.mark.network
def test_a_server_that_fails_the_rpc_handshake_is_named_not_crashed_on(llama_tools, rpc_server, test_model_path):
    """llama.cpp aborts the process when the answer to its RPC HELLO is malformed (another service on
    that port) or of another protocol version; Tandem sends the same HELLO first and says which."""
    import struct

    from desktop_app.engine.rpc import PROTOCOL, RpcError, reachable

    reachable(rpc_server)                              # the ggml-rpc-server built from the pinned sdist answers
    env = {"LLAMA_CPP_LIB_PATH": str(llama_tools)}
    http = _FakeService(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    older = _FakeService(struct.pack("<Q", 28) + bytes([PROTOCOL[0] - 1, 9, 0, 0]) + bytes(24))
    resets = _FakeService(b"", read=9)
    silent = _FakeService(None)
    try:
        out = _generate("-m", test_model_path, "-p", "Hi", "-n", "4", "--rpc", http.address, env=env)
        assert out.returncode == 1, out.stderr[-2000:]
        assert f"{http.address} does not answer as a ggml-rpc-server" in out.stderr
        with pytest.raises(RpcError, match=rf"speaks RPC protocol {PROTOCOL[0] - 1}\.9\.0, and this llama.cpp "
                                           rf"speaks {PROTOCOL[0]}\.{PROTOCOL[1]}"):
            reachable(older.address)
        out = _generate("-m", test_model_path, "-p", "Hi", "-n", "4", "--rpc", older.address, env=env)
        assert out.returncode == 1 and "speaks RPC protocol" in out.stderr, out.stderr[-2000:]
        # a server that reads the command and its size, then hangs up on the rest (an older protocol's
        # empty HELLO): named as not this version's, not as unreachable
        with pytest.raises(RpcError, match="does not answer as a ggml-rpc-server"):
            reachable(resets.address)
        with pytest.raises(RpcError, match="accepted the connection but did not answer the RPC handshake"):
            reachable(silent.address, timeout=1)
    finally:
        for service in (http, older, resets, silent):
            service.close()
