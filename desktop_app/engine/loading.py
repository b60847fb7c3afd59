"""Loading GGUF models with a clear reason when it fails, progress, and cancellation."""
from __future__ import annotations

import os
import struct
from typing import Callable

from desktop_app.engine import backend, repack, rpc
from desktop_app.engine.errors import LoadCancelled, ModelLoadError  # noqa: F401 (re-exported)
from desktop_app.engine.load_options import LoadOptions
from desktop_app.models.gguf_info import EMPTY, GGUFError, check_whole

GGUF_MAGIC = b"GGUF"


def check_gguf_header(path: str) -> None:
    """Refuse, before llama.cpp sees it, anything that is not a readable GGUF file."""
    if not os.path.exists(path):
        raise ModelLoadError(path, "file not found")
    if not os.path.isfile(path):
        raise ModelLoadError(path, "not a file")
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError as exc:
        raise ModelLoadError(path, f"cannot be read ({exc.strerror})") from None
    if not head:
        raise ModelLoadError(path, EMPTY)
    if len(head) < 8 or head[:4] != GGUF_MAGIC:
        raise ModelLoadError(path, "not a GGUF file (it does not start with the GGUF signature)")
    version = struct.unpack("<I", head[4:8])[0]
    if version not in (2, 3):
        raise ModelLoadError(path, f"unsupported GGUF version {version}")
    try:                              # its header whole, and its weights as long as the header says: a file
        check_whole(path)             # cut short was "truncated or damaged" to llama.cpp, where the bar's
    except GGUFError as exc:          # line had said how far it ran (a new user's try)
        raise ModelLoadError(path, str(exc)) from None


def _classify(errors: list[str]) -> str:
    text = " ".join(errors).lower()
    if "unknown model architecture" in text:
        for line in errors:
            if "unknown model architecture" in line.lower():
                return "unsupported architecture (" + line.split("architecture", 1)[1].strip(" :") + ")"
    if "out of memory" in text or "failed to allocate" in text or "unable to allocate" in text:
        return "out of memory while loading"
    if "truncat" in text or "not within the file bounds" in text or "failed to read" in text \
            or "unexpectedly reached end of file" in text or "tensor data" in text:
        return "file is truncated or damaged"
    if errors:
        return errors[-1]
    return "llama.cpp could not load it"


def load_model(path: str, options: LoadOptions = LoadOptions(), vocab_only: bool = False,
               progress: Callable[[float], None] | None = None,
               cancel: Callable[[], bool] | None = None) -> backend.Model:
    """Load a GGUF model. Raises ModelLoadError (naming file and reason) or LoadCancelled."""
    path = os.fspath(path)
    check_gguf_header(path)
    backend.clear_log()

    def on_progress(fraction: float) -> bool:
        if progress is not None:
            progress(fraction)
        return not (cancel and cancel())

    if cancel and cancel():
        raise LoadCancelled(path)
    if options.rpc_servers and not vocab_only:
        try:
            rpc.register(options.rpc_servers)
        except rpc.RpcError as exc:
            raise ModelLoadError(path, str(exc)) from None
    repack_on = options.repack
    if repack_on is None:
        repack_on = vocab_only or repack.decide().enabled
    if not vocab_only:
        repack_on = repack.use_extra_bufts(repack_on)       # (with AMX kept out where it faults)
    try:
        ptr = backend.load_model_ptr(path, options.n_gpu_layers, vocab_only, on_progress, options.use_mmap,
                                     use_extra_bufts=repack_on)
    except MemoryError:
        raise ModelLoadError(path, "out of memory while loading") from None
    if not ptr:
        if cancel and cancel():
            raise LoadCancelled(path)
        raise ModelLoadError(path, _classify(backend.recent_errors()))
    return backend.Model(ptr, path, vocab_only)


def open_context(model: backend.Model, options: LoadOptions) -> backend.Context:
    try:
        return backend.Context(model, options.n_ctx, options.threads, options.n_batch)
    except backend.BackendError as exc:
        said = str(exc)
        if "bad_alloc" in said or ("alloc" in said.lower() and "fail" in said.lower()):
            # (llama.cpp's "llama_init_from_model: failed to initialize the context: std::bad_alloc",
            # after the file's path twice, for -c 999999999: a new user's try)
            size = f"{options.n_ctx:,} tokens" if options.n_ctx else "the model's own length"
            said = (f"not enough memory for a context of {size}: lower the context size "
                    f"(-c, or Settings ▸ Context size; 0 is the model's own length)")
        raise ModelLoadError(model.path, said) from None
