"""Build llama.cpp's own `llama-server` and `ggml-rpc-server`, and an RPC-enabled libllama, from the
sources in the pinned llama-cpp-python sdist, into a cache folder that outlives test runs.

    python scripts/build_llama_tools.py            # prints the folder holding the binaries
    python scripts/build_llama_tools.py --print    # the folder if already built, else nothing (exit 1)

The tests of the remote backends (tests/test_remote_server.py, tests/test_rpc.py) call ensure();
the first call builds (about 7 minutes on 2 cores), later ones find the build. The sdist comes
from pip (`pip download --no-binary :all:`); the web UI is left out (LLAMA_USE_PREBUILT_UI=OFF), so
the build needs no network beyond that. The folder: $TANDEM_LLAMA_TOOLS, else
<user cache>/tandem/llama-tools/<version>. Never committed.
"""
from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

LLAMA_CPP_PYTHON = "0.3.36"
TARGETS = ("llama-server", "ggml-rpc-server", "llama")
CMAKE_OPTIONS = ("-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=ON", "-DGGML_RPC=ON",
                 "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_OPENSSL=OFF",
                 "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF")


def cache_dir() -> Path:
    if os.environ.get("TANDEM_LLAMA_TOOLS"):
        return Path(os.environ["TANDEM_LLAMA_TOOLS"])
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("tandem", appauthor=False)) / "llama-tools" / LLAMA_CPP_PYTHON


def bin_dir() -> Path:
    return cache_dir() / "build" / "bin"


def built() -> bool:
    b = bin_dir()
    return all((b / name).exists() for name in ("llama-server", "ggml-rpc-server", "libllama.so", "libggml-rpc.so"))


def _source(root: Path) -> Path:
    src = root / f"llama_cpp_python-{LLAMA_CPP_PYTHON}" / "vendor" / "llama.cpp"
    if src.exists():
        return src
    sdist = root / "sdist"
    sdist.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q",
                    f"llama-cpp-python=={LLAMA_CPP_PYTHON}", "-d", str(sdist)], check=True)
    [archive] = sdist.glob("llama_cpp_python-*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    return src


def ensure(log=sys.stderr) -> Path:
    """The folder with llama-server, ggml-rpc-server and the RPC-enabled libraries; built if missing."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)                # one build at a time, however many test runs
        if built():
            return bin_dir()
        if shutil.which("cmake") is None:
            raise RuntimeError("building llama.cpp's tools needs cmake and a C++ compiler (as pip install does)")
        src = _source(root)
        build = root / "build"
        print(f"build_llama_tools: building llama.cpp's server and RPC tools in {build} (about 7 minutes "
              "on 2 cores, once)", file=log, flush=True)
        subprocess.run(["cmake", "-S", str(src), "-B", str(build), *CMAKE_OPTIONS], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", str(build), "--parallel", str(os.cpu_count() or 2),
                        "--target", *TARGETS], check=True, stdout=subprocess.DEVNULL)
        if not built():
            raise RuntimeError(f"llama.cpp's tools did not build in {build}")
        return bin_dir()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--print", action="store_true", help="print the folder only if already built")
    args = ap.parse_args()
    if args.print:
        if not built():
            return 1
        print(bin_dir())
        return 0
    print(ensure())
    return 0


if __name__ == "__main__":
    sys.exit(main())
