"""A thin, fast layer over llama.cpp's C API (through llama-cpp-python's ctypes bindings).

Only what the engine needs: a loaded `Model` (vocabulary, tokenizer, metadata) and a `Context`
(one KV cache, one sequence) that evaluates token batches with logits requested only where asked,
rolls back positions, and hands out logits as zero-copy numpy views. No Qt, no sampling policy.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import threading
from collections import deque
from typing import Callable, Iterable, Iterator, Sequence

import llama_cpp as L
import numpy as np

VOCAB_ID_STRIDE = 97        # Model.vocab_id hashes every this-many-th token's text ...
VOCAB_ID_TAIL = 512         # ... and the last this many

# --- ggml itself, for what llama-cpp-python does not bind -----------------------------------------

_GGML_SIGNATURES = {               # name: (restype, argtypes)
    "ggml_backend_reg_by_name": (ctypes.c_void_p, [ctypes.c_char_p]),
    "ggml_backend_reg_get_proc_address": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]),
    "ggml_backend_register": (None, [ctypes.c_void_p]),
    "ggml_backend_dev_by_type": (ctypes.c_void_p, [ctypes.c_int]),
    "ggml_backend_dev_backend_reg": (ctypes.c_void_p, [ctypes.c_void_p]),
    "ggml_backend_buft_name": (ctypes.c_char_p, [ctypes.c_void_p]),
}


def ggml_library() -> ctypes.CDLL:
    """llama.cpp's ggml library, the very one llama-cpp-python loaded (LLAMA_CPP_LIB_PATH's, where set).
    Raises OSError where it cannot be opened."""
    from llama_cpp import llama_cpp as bindings

    lib = ctypes.CDLL(os.path.join(os.path.dirname(bindings._lib._name), "libggml.so"))
    for name, (restype, argtypes) in _GGML_SIGNATURES.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes
    return lib


# --- logging: llama.cpp prints a lot; keep its recent messages for error reports instead --------

GGML_LOG_WARN, GGML_LOG_ERROR, GGML_LOG_CONT = 3, 4, 5
_log_lock = threading.Lock()
_log_lines: deque[tuple[int, str]] = deque(maxlen=200)
_last_level = 0


@L.llama_log_callback
def _log_callback(level: int, text: bytes, _user_data) -> None:
    global _last_level
    if level == GGML_LOG_CONT:
        level = _last_level
    _last_level = level
    if level >= GGML_LOG_WARN:
        with _log_lock:
            _log_lines.append((level, text.decode("utf-8", errors="replace").strip()))


_initialised = False


def init_backend() -> None:
    """Initialise llama.cpp once per process and route its log into our buffer."""
    global _initialised
    if not _initialised:
        L.llama_log_set(_log_callback, ctypes.c_void_p(0))
        L.llama_backend_init()
        _initialised = True


def clear_log() -> None:
    with _log_lock:
        _log_lines.clear()


def recent_errors() -> list[str]:
    with _log_lock:
        return [text for level, text in _log_lines if level >= GGML_LOG_ERROR and text]


# --- errors ---------------------------------------------------------------------------------------


class BackendError(RuntimeError):
    pass


class ContextFullError(BackendError):
    """The KV cache has no room for the batch."""


class Stopped(BackendError):
    """A pass given a `stop` check stopped when it said so (a cancelled reply). The cache holds what
    it held before that batch (earlier batches of a long pass stay): llama.cpp drops the positions of
    the micro-batch it aborted, and here a batch is one micro-batch (n_ubatch = n_batch)."""


# --- model ----------------------------------------------------------------------------------------


class Model:
    """A loaded GGUF model (weights, or only the vocabulary when loaded with vocab_only)."""

    def __init__(self, ptr, path: str, vocab_only: bool):
        self._ptr = ptr
        self.path = path
        self.vocab_only = vocab_only
        self._vocab = L.llama_model_get_vocab(ptr)
        self.n_vocab: int = L.llama_vocab_n_tokens(self._vocab)
        self._pieces: list[bytes | None] = [None] * self.n_vocab
        self._eog = np.zeros(self.n_vocab, dtype=bool)          # filled lazily by is_eog
        self._eog_known = np.zeros(self.n_vocab, dtype=bool)

    # -- lifetime
    @property
    def ptr(self):
        if self._ptr is None:
            raise BackendError(f"model {self.path} is closed")
        return self._ptr

    def close(self) -> None:
        if self._ptr is not None:
            L.llama_model_free(self._ptr)
            self._ptr = None

    def __del__(self):  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:
            pass

    # -- vocabulary
    @property
    def vocab_type(self) -> int:
        return L.llama_vocab_type(self._vocab)

    @property
    def bos(self) -> int:
        return L.llama_vocab_bos(self._vocab)

    @property
    def eos(self) -> int:
        return L.llama_vocab_eos(self._vocab)

    @property
    def add_bos(self) -> bool:
        return bool(L.llama_vocab_get_add_bos(self._vocab))

    @property
    def add_eos(self) -> bool:
        return bool(L.llama_vocab_get_add_eos(self._vocab))

    def token_text(self, token: int) -> bytes:
        """The vocabulary's stored text of a token (as llama.cpp compares vocabularies)."""
        return L.llama_vocab_get_text(self._vocab, token) or b""

    @functools.cached_property
    def vocab_id(self) -> str:
        """A short name for the vocabulary: a hash of its type, its size, every VOCAB_ID_STRIDE-th token's
        text and the last VOCAB_ID_TAIL (where special tokens are added). Two models with the same name
        map text to the same token ids (two that do may still differ: a vocabulary padded to another
        size). A reply's stored token ids are read back only by a model of its vocabulary
        (ChatSession.prompt_tokens); another's tokenises the reply's text afresh."""
        h = hashlib.sha1(f"{self.vocab_type}/{self.n_vocab}".encode())
        tail = range(max(0, self.n_vocab - VOCAB_ID_TAIL), self.n_vocab)
        for token in [*range(0, self.n_vocab, VOCAB_ID_STRIDE), *tail]:
            h.update(self.token_text(token) + b"\0")
        return h.hexdigest()[:16]

    def is_eog(self, token: int) -> bool:
        if not self._eog_known[token]:
            self._eog[token] = bool(L.llama_vocab_is_eog(self._vocab, token))
            self._eog_known[token] = True
        return bool(self._eog[token])

    def piece(self, token: int) -> bytes:
        """The bytes a token renders to (special tokens render as empty text)."""
        cached = self._pieces[token]
        if cached is None:
            buf = ctypes.create_string_buffer(64)
            n = L.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = L.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
            cached = self._pieces[token] = buf.raw[:n]
        return cached

    def special_piece(self, token: int) -> bytes:
        """The bytes a token renders to, control tokens included (for showing drafts)."""
        buf = ctypes.create_string_buffer(128)
        n = L.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, True)
        return buf.raw[:max(n, 0)]

    def tokenize(self, text: str, add_special: bool = False, parse_special: bool = False) -> list[int]:
        """Tokenise text. `parse_special=False` keeps user text from becoming control tokens."""
        data = text.encode("utf-8")
        cap = len(data) + 16
        buf = (L.llama_token * cap)()
        n = L.llama_tokenize(self._vocab, data, len(data), buf, cap, add_special, parse_special)
        if n < 0:
            cap = -n
            buf = (L.llama_token * cap)()
            n = L.llama_tokenize(self._vocab, data, len(data), buf, cap, add_special, parse_special)
        return list(buf[:n])

    def tokenize_many(self, parts: Sequence[tuple[str, bool]], add_special: bool = False) -> list[list[int]]:
        """Tokenise several (text, parse_special) parts: one call, as the engine process serves it."""
        return [self.tokenize(text, add_special, parse_special) for text, parse_special in parts]

    def detokenize(self, tokens: Iterable[int]) -> str:
        return b"".join(self.piece(t) for t in tokens).decode("utf-8", errors="replace")

    # -- metadata
    def chat_template(self) -> str | None:
        raw = L.llama_model_chat_template(self.ptr, None)
        return raw.decode("utf-8", errors="replace") if raw else None


LOAD_MODE_NONE, LOAD_MODE_MMAP = 0, 1


def load_model_ptr(path: str, n_gpu_layers: int = 0, vocab_only: bool = False,
                   progress: Callable[[float], bool] | None = None, use_mmap: bool = False,
                   use_extra_bufts: bool = True):
    """Call llama.cpp's loader. `progress(fraction)` returning False aborts the load.

    Without mmap by default: on CPUs where llama.cpp repacks weights for faster kernels (AVX-512
    here), a mapped file stays resident beside its repacked copy, about doubling the memory.
    `use_extra_bufts=False` loads without that repacking (CPU_REPACK, AMX): see engine/repack.py."""
    init_backend()
    params = L.llama_model_default_params()
    params.n_gpu_layers = n_gpu_layers
    params.vocab_only = vocab_only
    params.use_extra_bufts = use_extra_bufts
    params.load_mode = LOAD_MODE_MMAP if (use_mmap or vocab_only) else LOAD_MODE_NONE
    callback = None
    if progress is not None:
        @L.llama_progress_callback
        def callback(fraction, _user_data):
            try:
                return bool(progress(float(fraction)))
            except Exception:
                return False
        params.progress_callback = callback
    ptr = L.llama_model_load_from_file(path.encode(), params)
    del callback  # llama.cpp does not keep it past the load
    return ptr


# --- context --------------------------------------------------------------------------------------


class Context:
    """One KV cache holding one token sequence, `tokens`, at positions 0..len-1.

    `eval` appends tokens and requests logits only at the batch indices asked for; `truncate` rolls
    the cache back; `logits(i)` views the logits of output `i` of the last batch without copying.
    """

    def __init__(self, model: Model, n_ctx: int, n_threads: int, n_batch: int = 512, n_outputs_max: int = 64):
        self.model = model
        params = L.llama_context_default_params()
        # Logits are read at most at a verify batch's positions (γ + 1 <= 33); llama.cpp otherwise
        # sizes its compute buffers for n_batch outputs: 512 x 152k floats, 300 MB per context.
        params.n_outputs_max = n_outputs_max
        params.n_ctx = n_ctx
        params.n_batch = n_batch
        params.n_ubatch = n_batch
        params.n_threads = n_threads
        params.n_threads_batch = n_threads
        params.n_seq_max = 1
        params.no_perf = True
        self._ptr = L.llama_init_from_model(model.ptr, params)
        if not self._ptr:
            raise BackendError(f"could not create a context of {n_ctx} tokens for {model.path}"
                               + _reason_suffix())
        self._mem = L.llama_get_memory(self._ptr)
        self.n_ctx: int = L.llama_n_ctx(self._ptr)
        # llama.cpp caps a batch at the context size asked for (-c 300: batches of 300) before it
        # rounds the context up (to 512): a longer batch aborts the process (GGML_ASSERT n_tokens_all
        # <= n_batch), so batches are split at the size it kept
        self.n_batch = min(n_batch, L.llama_n_batch(self._ptr), L.llama_n_ubatch(self._ptr))
        self.n_outputs_max = n_outputs_max
        self.n_vocab = model.n_vocab
        self.tokens: list[int] = []
        self._batch = L.llama_batch_init(n_batch, 0, 1)
        for i in range(n_batch):
            self._batch.n_seq_id[i] = 1
            self._batch.seq_id[i][0] = 0
        self._tok = np.ctypeslib.as_array(self._batch.token, shape=(n_batch,))
        self._pos = np.ctypeslib.as_array(self._batch.pos, shape=(n_batch,))
        self._want = np.ctypeslib.as_array(self._batch.logits, shape=(n_batch,))
        self.n_evaluated = 0            # tokens ever sent through the model (for tests and stats)

    def set_threads(self, n_threads: int) -> None:
        """Run the next passes on `n_threads` threads (single-token and batched alike): free between passes."""
        L.llama_set_n_threads(self._ptr, n_threads, n_threads)

    @property
    def n_threads(self) -> int:
        return L.llama_n_threads(self._ptr)

    def close(self) -> None:
        if self._ptr is not None:
            L.llama_batch_free(self._batch)
            L.llama_free(self._ptr)
            self._ptr = None

    def __del__(self):  # pragma: no cover
        try:
            self.close()
        except Exception:
            pass

    @property
    def room(self) -> int:
        return self.n_ctx - len(self.tokens)

    def truncate(self, n: int) -> None:
        """Forget every position from n on."""
        if n < len(self.tokens):
            if not L.llama_memory_seq_rm(self._mem, 0, n, -1):
                raise BackendError("llama.cpp could not roll back the KV cache")
            del self.tokens[n:]

    def clear(self) -> None:
        L.llama_memory_clear(self._mem, True)
        self.tokens.clear()

    def eval(self, tokens: Sequence[int], logits: str = "last", stop: Callable[[], bool] | None = None) -> None:
        """Append `tokens` to the cache. logits: "none", "last" or "all" (of this call's tokens).

        Batches longer than n_batch are split; logits are only ever requested in the final piece
        (so "all" is limited to n_outputs_max tokens, which is all a verify batch needs).
        `stop`: checked while the pass computes (llama.cpp's abort callback, between the graph's
        operations on the CPU; layers offloaded to a GPU are not checked), so a long prompt pass ends
        within a fraction of a second of a cancel, not seconds later; it raises Stopped. Meant for
        prompt passes: the check takes the GIL for every operation, so a thread busy in Python
        would slow the pass (in the engine process the only other thread waits on its pipe).
        """
        if stop is None:
            self._eval(tokens, logits)
            return
        @L.ggml_abort_callback
        def aborts(_data) -> bool:
            try:
                return bool(stop())
            except Exception:                        # (a check that fails does not stop the pass)
                return False
        L.llama_set_abort_callback(self._ptr, aborts, None)
        try:
            self._eval(tokens, logits)
        finally:
            L.llama_set_abort_callback(self._ptr, L.ggml_abort_callback(), None)

    def _eval(self, tokens: Sequence[int], logits: str) -> None:
        n = len(tokens)
        if n == 0:
            return
        if n > self.room:
            raise ContextFullError(f"context full: {len(self.tokens)} of {self.n_ctx} tokens used, "
                                   f"{n} more needed")
        if logits == "all" and n > min(self.n_batch, self.n_outputs_max):
            raise ValueError(f"logits at every position are limited to {self.n_outputs_max} positions")
        start = 0
        while start < n:
            end = min(n, start + self.n_batch)
            k = end - start
            self._tok[:k] = tokens[start:end]
            self._pos[:k] = np.arange(len(self.tokens), len(self.tokens) + k)
            self._want[:k] = 0
            if end == n:
                if logits == "all":
                    self._want[:k] = 1
                elif logits == "last":
                    self._want[k - 1] = 1
            self._batch.n_tokens = k
            rc = L.llama_decode(self._ptr, self._batch)
            if rc != 0:
                if rc == 2:
                    raise Stopped(f"stopped after {len(self.tokens)} tokens")
                if rc == 1:
                    raise ContextFullError(f"context full: no KV slot for {k} tokens at position "
                                           f"{len(self.tokens)} of {self.n_ctx}")
                raise BackendError(f"llama_decode failed with code {rc}" + _reason_suffix())
            self.tokens.extend(int(t) for t in tokens[start:end])
            self.n_evaluated += k
            start = end

    def sync(self, tokens: Sequence[int], logits: str = "last", stop: Callable[[], bool] | None = None) -> int:
        """Make the cache hold exactly `tokens`, evaluating only what follows the common prefix.

        Returns how many tokens were evaluated. When nothing new needs evaluating but logits are
        wanted, the last token is evaluated again so that its logits are fresh. `stop`: as eval's.
        """
        common = common_prefix(self.tokens, tokens)
        if common == len(tokens) and logits != "none" and common > 0:
            common -= 1
        self.truncate(common)
        self.eval(tokens[common:], logits=logits, stop=stop)
        return len(tokens) - common

    def sync_in_pieces(self, tokens: Sequence[int], piece: int,
                       stop: Callable[[], bool] | None = None) -> Iterator[tuple[int, int]]:
        """sync(tokens, logits="none"), `piece` tokens at a time: after each piece but the last, yields
        (tokens evaluated so far, tokens to evaluate), so that a long prompt pass can say how far it is.
        (On CPUs, pieces of 128-512 tokens read a 1,024-token prompt in the same time.)"""
        common = common_prefix(self.tokens, tokens)
        self.truncate(common)                      # (where the cache holds more, as sync drops it)
        for end in range(common + piece, len(tokens) + piece, piece):
            self.sync(tokens[:min(end, len(tokens))], logits="none", stop=stop)   # (the rest of the piece)
            if end < len(tokens):
                yield end - common, len(tokens) - common

    def logits(self, i: int = -1) -> np.ndarray:
        """Zero-copy float32 view of the logits of output i of the last batch (valid until the next eval)."""
        ptr = L.llama_get_logits_ith(self._ptr, i)
        if not ptr:
            raise BackendError(f"no logits at batch index {i}")
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def pos_max(self) -> int:
        """The highest position llama.cpp's cache holds (-1 when empty): for checking rollbacks."""
        return L.llama_memory_seq_pos_max(self._mem, 0)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    if list(a[:n]) == list(b[:n]):                # (the common case, compared at C speed: auto's copy
        return n                                  # search asks every round, over the whole context)
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _reason_suffix() -> str:
    errors = recent_errors()
    return f": {errors[-1]}" if errors else ""
