"""Make a second, different draft for a model by requantising it with llama.cpp's own quantizer.

The SmolLM2 test target requantised to Q2_K shares its vocabulary but agrees with it only part of
the time, which exercises every rejection path of the engine in tests.
"""
from __future__ import annotations

import ctypes
import os
import tempfile
from pathlib import Path

LLAMA_FTYPE_MOSTLY_Q2_K = 10


def requantize(src: Path | str, dst: Path | str, ftype: int = LLAMA_FTYPE_MOSTLY_Q2_K, threads: int = 0) -> Path:
    """Write `src` requantised to `ftype` at `dst` (atomically); returns dst. Reuses an existing dst."""
    import llama_cpp as L

    from desktop_app.engine.backend import init_backend

    dst = Path(dst)
    if dst.is_file():
        return dst
    init_backend()
    params = L.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    params.nthread = threads
    fd, tmp = tempfile.mkstemp(prefix=".requant-", suffix=".gguf", dir=dst.parent)
    os.close(fd)
    try:
        rc = L.llama_model_quantize(os.fspath(src).encode(), tmp.encode(), ctypes.byref(params))
        if rc != 0:
            raise RuntimeError(f"llama.cpp could not requantise {src} (code {rc})")
        os.replace(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dst
