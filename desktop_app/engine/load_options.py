"""How a model is loaded and run: one small dataclass, importable without llama.cpp."""
from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class LoadOptions:
    """How one model is loaded and run."""

    n_gpu_layers: int = 0
    n_threads: int = max(1, os.cpu_count() or 1)
    n_ctx: int = 4096
    n_batch: int = 512
    use_mmap: bool = False     # see backend.load_model_ptr: mmap doubles memory where weights are repacked
    repack: bool | None = None  # repacked weights (llama.cpp's extra buffer types); None: decided by repack.decide
    rpc_servers: tuple[str, ...] = ()  # llama.cpp RPC servers (host:port) the offloaded layers go to (rpc.py)
