"""How a model is loaded and run: one small dataclass, importable without llama.cpp."""
from __future__ import annotations

from dataclasses import dataclass

from desktop_app.engine.threads import physical_cores

MIN_CTX = 256                  # llama.cpp makes contexts of at least 256 tokens, in steps of 256
CTX_RANGE = (MIN_CTX, 131072)  # the window's context sizes (Settings, `tandem -c`): llama.cpp's least, and a
                               # most that no model in the catalogue was trained past
THREADS_RANGE = (0, 256)       # ... and thread counts (0: automatic)


@dataclass(frozen=True)
class LoadOptions:
    """How one model is loaded and run."""

    n_gpu_layers: int = 0
    n_threads: int = 0         # 0: automatic, one per performance core and fewer while other work keeps
                               # the CPUs busy (threads.py); a count: that many, always
    n_ctx: int = 4096
    n_batch: int = 512
    use_mmap: bool = False     # see backend.load_model_ptr: mmap doubles memory where weights are repacked
    repack: bool | None = None  # repacked weights (llama.cpp's extra buffer types); None: decided by repack.decide
    rpc_servers: tuple[str, ...] = ()  # llama.cpp RPC servers (host:port) the offloaded layers go to (rpc.py)

    @property
    def automatic(self) -> bool:
        """Whether the thread count is automatic (0, or below as llama.cpp's -t -1)."""
        return self.n_threads <= 0

    @property
    def threads(self) -> int:
        """The thread count a load starts with (automatic: llama.cpp's default, threads.physical_cores)."""
        return physical_cores() if self.automatic else self.n_threads
