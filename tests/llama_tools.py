"""llama.cpp's own servers for the remote-backend tests: llama-server and ggml-rpc-server processes on
127.0.0.1, from the cached build of scripts/build_llama_tools.py (fixtures in conftest.py)."""
from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from desktop_app.engine import repack

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
        self.proc = subprocess.Popen(repack.llama_cpp_tool([str(tools / "llama-server"), "--host", "127.0.0.1", "--port",
                                                            str(self.port), "-c", "2048", "-t", "2", "--no-webui", *args]),
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


def self_signed_cert(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (openssl), for an https front to a local server."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (Debian: openssl); it makes the test's certificate")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


class TlsProxy:
    """https://127.0.0.1:PORT in front of a plain-http local server (llama-server built without OpenSSL):
    TLS ends here, the bytes go on unchanged."""

    def __init__(self, target_port: int, cert: Path, key: Path):
        import asyncio
        import ssl
        import threading

        self.port = free_port()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert), str(key))
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def pipe(reader, writer):
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except Exception:
                pass
            finally:
                writer.close()

        async def handle(reader, writer):
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target_port)
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

        async def start():
            self.server = await asyncio.start_server(handle, "127.0.0.1", self.port, ssl=ctx)
            ready.set()

        def run():
            self.loop.run_until_complete(start())
            self.loop.run_forever()

        threading.Thread(target=run, daemon=True).start()
        ready.wait(10)

    def stop(self) -> None:
        import asyncio

        async def shutdown():
            self.server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
