"""What a GGUF file is, read from its header alone (no llama.cpp, no weights): for showing a model
before loading it. Reads the metadata and the tensor shapes; skips everything else.

Any file may be damaged, so every count and length in the header is checked against the bytes the
file has left before anything is read or skipped, and every failure is a GGUFError: a listing of
models must never fail on one bad file. The header's own limits follow llama.cpp's reader
(ggml/src/gguf.cpp): no arrays of arrays, at most 4 dimensions per tensor, no negative dimension,
element counts below 2^63.

Why not `gguf.GGUFReader`, llama.cpp's own Python reader (a dependency already): it builds a numpy
array for every metadata item, every token included, so on this project's 2-core machine it took
2.1 s for SmolLM2-135M's header, 8.2 s for Qwen2.5-Coder-0.5B's and 10.5 s for Gemma 3 270M's,
against 30-100 ms here; and on damaged headers it fails with whatever numpy raises (IndexError on a
truncated file, ValueError, KeyError...), since a read past the end of its memory map comes back short
instead of failing.
"""
from __future__ import annotations

import os
import re
import stat
import struct
from dataclasses import dataclass
from typing import BinaryIO

FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
              11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
              17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
              23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M",
              30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4"}

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_TEXT_KEYS = {"general.architecture", "general.name",      # the only strings whose text is kept
              "general.basename", "general.size_label",
              "tokenizer.ggml.model", "tokenizer.ggml.pre"}
_TOKENS = "tokenizer.ggml.tokens"
_CHUNK = 1 << 20
_MAX_TEXT = 4096                                         # longer ones are skipped, as if absent
_MAX_DIMS = 4                                            # GGML_MAX_DIMS
_INT64_MAX = (1 << 63) - 1
_U64 = struct.Struct("<Q")
# the fewest bytes each item can take, to bound a count by the bytes left
_MIN_KV = 8 + 4 + 1                     # key length, value type, a one-byte value
_MIN_TENSOR = 8 + 4 + 4 + 8             # name length, dimension count, type, data offset


class GGUFError(ValueError):
    """The file cannot be read as a GGUF header; the message says why, in one line."""


@dataclass(frozen=True)
class _Array:
    n: int


_SKIPPED = object()     # a string value whose text was not kept


@dataclass(frozen=True)
class GGUFInfo:
    path: str
    file_size: int
    name: str
    architecture: str
    quantization: str
    n_params: int
    context_length: int | None
    vocab_size: int | None
    has_chat_template: bool
    n_layer: int = 0
    n_head_kv: int = 0
    key_length: int = 0
    value_length: int = 0
    tokenizer_model: str | None = None     # tokenizer.ggml.model: llama (SentencePiece), gpt2 (BPE), ...
    tokenizer_pre: str | None = None       # tokenizer.ggml.pre: the pre-tokenizer (qwen2, smollm, ...)
    bos_id: int | None = None
    eos_id: int | None = None
    add_bos: bool | None = None            # None: the file does not say (llama.cpp then has a default)
    add_eos: bool | None = None
    named_by_file: bool = False            # the file's name names the model (its basename and size label)
    size_label: str | None = None          # general.size_label: the maker's size ("1.5B"), which counts a
                                           # tied output layer once where the file stores it twice

    def kv_cache_bytes(self, n_ctx: int, bytes_per_value: int = 2) -> int:
        """Size of an F16 KV cache of n_ctx tokens (what llama.cpp allocates by default)."""
        return n_ctx * self.n_layer * self.n_head_kv * (self.key_length + self.value_length) * bytes_per_value

    @property
    def params_text(self) -> str:
        """Its size in parameters as its header names it ("1.5B"), or as counted."""
        return self.size_label or _human_params(self.n_params)

    def summary(self) -> str:
        """One line on the file. general.name is left out where the file's own name (shown beside this
        line) already names the model: uploaders' names can mislead ("Qwen2.5 Coder 0.5B Instruct AWQ"
        for a Q4_K_M file)."""
        parts = [] if self.named_by_file else [self.name]
        parts += [self.params_text + " parameters", self.quantization,
                 f"{self.file_size / 1e9:.2f} GB"]
        if self.context_length:
            parts.append(f"context {self.context_length:,}")
        if self.vocab_size:
            parts.append(f"vocabulary {self.vocab_size:,}")
        if not self.has_chat_template:
            parts.append("no chat template")
        return " · ".join(parts)


def _human_params(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.{1 if n < 10 * size else 0}f}{unit}"
    return str(n)


CUT = ": it is cut short (a download or copy that did not finish?) or damaged"   # (a header's count past
# the file's end read as a riddle, where a cut among the weights said "cut short": a new user's try)


def _ends_inside(where: str) -> GGUFError:
    """The error for a header that runs past the file's end; `where`: what was being read, and at which byte."""
    return GGUFError(f"the file ends inside its header ({where}){CUT}")


class _Reader:
    """Reads forward through the header, refusing any read or skip past the end of the file."""

    def __init__(self, fh: BinaryIO, size: int, keep_tokens: bool = False):
        self.fh, self.size, self.pos = fh, size, 0
        self.keep_tokens = keep_tokens
        self.tokens: list[bytes] | None = None     # the vocabulary's texts, when keep_tokens

    def _room(self, n: int, what: str) -> None:
        if n > self.size - self.pos:
            raise _ends_inside(f"{what} at byte {self.pos:,} needs {n:,} bytes, {self.size - self.pos:,} are left")

    def read(self, n: int, what: str) -> bytes:
        self._room(n, what)
        data = self.fh.read(n)
        if len(data) != n:                                   # the file shrank while we read it
            raise _ends_inside(f"{what} at byte {self.pos:,}")
        self.pos += n
        return data

    def skip(self, n: int, what: str) -> None:
        self._room(n, what)
        self.fh.seek(n, os.SEEK_CUR)
        self.pos += n

    def take(self, fmt: str, what: str):
        return struct.unpack(fmt, self.read(struct.calcsize(fmt), what))[0]

    def count(self, what: str, min_item_size: int) -> int:
        """An item count, refused when the bytes left could not hold that many items."""
        n = self.take("<Q", f"the number of {what}")
        if n * min_item_size > self.size - self.pos:
            raise GGUFError(f"the header claims {n:,} {what}, more than the {self.size:,}-byte file can hold{CUT}")
        return n

    def string(self, what: str, keep: bool = True) -> str | None:
        n = self.take("<Q", f"the length of {what}")
        if not keep or n > _MAX_TEXT:
            self.skip(n, what)
            return None
        return self.read(n, what).decode("utf-8", errors="replace")

    def skip_strings(self, n: int, key: str) -> None:
        """Skip n strings (a vocabulary: 262k of them), with the checks of `string`."""
        self._strings(n, key, None)

    def read_strings(self, n: int, key: str) -> list[bytes]:
        """Read n strings (a vocabulary) as bytes, with the checks of `string`."""
        out: list[bytes] = []
        self._strings(n, key, out.append)
        return out

    def _strings(self, n: int, key: str, keep) -> None:
        """n strings, each handed to `keep` (or skipped when None), parsed from chunks of the file in a
        tight loop: a 150k-token vocabulary in a few tens of milliseconds."""
        fh, size, pos, unpack = self.fh, self.size, self.pos, _U64.unpack_from
        buf, off = b"", 0
        for _ in range(n):
            if len(buf) - off < 8:
                buf, off = buf[off:] + fh.read(_CHUNK), 0
                if len(buf) < 8:
                    self.pos = pos
                    raise _ends_inside(f"an item of {key} at byte {pos:,}")
            length = unpack(buf, off)[0]
            if length > size - pos - 8:
                self.pos = pos
                raise _ends_inside(f"an item of {key} at byte {pos:,}")
            end = off + 8 + length
            if end > len(buf):
                if keep is None:                              # a long string: skip it in the file
                    fh.seek(pos + 8 + length)
                    buf, end = b"", 0
                else:
                    buf, off = buf[off:] + fh.read(max(_CHUNK, 8 + length)), 0
                    end = 8 + length
                    if end > len(buf):                        # the file shrank while we read it
                        self.pos = pos
                        raise _ends_inside(f"an item of {key} at byte {pos:,}")
            if keep is not None:
                keep(buf[off + 8:end])
            pos += 8 + length
            off = end
        fh.seek(pos)                                          # (the chunk read ahead of the last string)
        self.pos = pos

    def value(self, vtype: int, key: str):
        """A metadata value; `key` is as shown in messages (printable)."""
        if vtype in _SCALARS:
            return self.take(_SCALARS[vtype], f"the value of {key}")
        if vtype == _STRING:
            text = self.string(f"the value of {key}", keep=key in _TEXT_KEYS)
            return _SKIPPED if text is None else text
        if vtype == _ARRAY:
            itype = self.take("<I", f"the item type of {key}")
            if itype in _SCALARS:
                size = struct.calcsize(_SCALARS[itype])
                n = self.count(f"items in {key}", size)
                self.skip(n * size, f"the items of {key}")
            elif itype == _STRING:
                n = self.count(f"items in {key}", 8)
                if self.keep_tokens and key == _TOKENS:
                    self.tokens = self.read_strings(n, key)
                else:
                    self.skip_strings(n, key)
            elif itype == _ARRAY:
                raise GGUFError(f"{key} is an array of arrays, which GGUF does not allow")
            else:
                raise GGUFError(f"{key} is an array of unknown type {itype}")
            return _Array(n)
        raise GGUFError(f"{key} has unknown type {vtype}")


def _printable(text: str) -> str:
    """Text from a file or a file name, safe for a one-line message."""
    return text if text.isprintable() else ascii(text)


def _open(path: str, name: str) -> tuple[BinaryIO, int]:
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):      # a folder, or a pipe that would block the reader forever
            raise GGUFError(f"{name} is not a regular file")
        return open(path, "rb"), st.st_size
    except OSError as exc:
        raise GGUFError(f"{name} cannot be read ({exc.strerror or exc})") from exc


EMPTY = "empty (0 bytes): a download or copy that did not finish?"   # (the model bar's line and a load's)


def _read_header(r: _Reader, name: str) -> tuple[dict, int, list[tuple[int, int, int]]]:
    """The metadata, the parameter count, and each tensor's (elements, ggml type, data offset)."""
    if r.size == 0:                           # ("not a GGUF file" of an empty one: a new user's try)
        raise GGUFError(f"{name} is {EMPTY}")
    if r.size < 4 or r.read(4, "the signature") != b"GGUF":
        raise GGUFError(f"{name} is not a GGUF file")
    version = r.take("<I", "the version")
    if version not in (2, 3):
        raise GGUFError(f"unsupported GGUF version {version}"
                        + (" (a big-endian file?)" if version and not version & 0xFFFF else ""))
    n_tensors = r.count("tensors", _MIN_TENSOR)
    n_kv = r.count("metadata items", _MIN_KV)
    meta: dict = {}
    for i in range(n_kv):
        key = r.string(f"the name of metadata item {i}")
        if not key:
            raise GGUFError(f"metadata item {i} has an empty or implausibly long name")
        key = _printable(key)
        if key in meta:
            raise GGUFError(f"metadata item {key} appears twice")
        meta[key] = r.value(r.take("<I", f"the type of {key}"), key)
    n_params = 0
    tensors = []
    for i in range(n_tensors):
        r.string(f"the name of tensor {i}", keep=False)
        n_dims = r.take("<I", f"the dimension count of tensor {i}")
        if n_dims > _MAX_DIMS:
            raise GGUFError(f"tensor {i} has {n_dims:,} dimensions (at most {_MAX_DIMS})")
        count = 1
        for _ in range(n_dims):
            dim = r.take("<q", f"a dimension of tensor {i}")
            if dim < 0:
                raise GGUFError(f"tensor {i} has a negative dimension")
            count *= dim
        if count > _INT64_MAX:
            raise GGUFError(f"tensor {i} claims {count:,} elements")
        tensors.append((count, r.take("<I", f"the type of tensor {i}"), r.take("<Q", f"the offset of tensor {i}")))
        n_params += count
    return meta, n_params, tensors


def _weights_end(meta: dict, header_end: int, tensors: list[tuple[int, int, int]]) -> int:
    """The byte at which the file's tensor data ends, as its header describes it (tensors of a type the
    gguf package does not know are left out). A file cut short in its weights has a whole header:
    it read as a good model, and only Load failed (a new user's try)."""
    from gguf.constants import GGML_QUANT_SIZES        # (here: the package takes 0.1 s to import)
    alignment = _int(meta, "general.alignment", 32)
    if alignment <= 0 or alignment & (alignment - 1):       # (as llama.cpp's gguf.cpp refuses it)
        raise GGUFError(f"general.alignment is {alignment:,}, not a power of 2")
    start = -(-header_end // alignment) * alignment
    ends = [start + offset + count // GGML_QUANT_SIZES[kind][0] * GGML_QUANT_SIZES[kind][1]
            for count, kind, offset in tensors if kind in GGML_QUANT_SIZES]
    return max(ends, default=0)


def _int(meta: dict, key: str, default: int | None = 0) -> int | None:
    """A non-negative integer field, or `default` when absent."""
    value = meta.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise GGUFError(f"{key} is not an integer")
    if value < 0:
        raise GGUFError(f"{key} is negative ({value})")
    return value


def _text(meta: dict, key: str) -> str | None:
    value = meta.get(key)
    if value is None or value is _SKIPPED:
        return None
    if not isinstance(value, str):
        raise GGUFError(f"{key} is not a string")
    return value


def _flag(meta: dict, key: str) -> bool | None:
    value = meta.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise GGUFError(f"{key} is not a boolean")
    return value


def read_info(path: str | os.PathLike) -> GGUFInfo:
    """The header's summary of a GGUF file. Raises GGUFError, and only GGUFError, when it cannot."""
    return _read(path, keep_tokens=False)[0]


def read_vocabulary(path: str | os.PathLike) -> tuple[GGUFInfo, list[bytes]]:
    """The header's summary and the vocabulary's token texts (as stored: bytes, by id); an empty list
    for a file without tokenizer.ggml.tokens. Raises GGUFError, and only GGUFError, when it cannot."""
    info, tokens = _read(path, keep_tokens=True)
    return info, tokens or []


def check_whole(path: str | os.PathLike) -> None:
    """Raise GGUFError where the file's header cannot be read or its weights run past its end; nothing
    of what read_info's summary asks of the metadata (llama.cpp loads files whose head counts are
    per-layer arrays, which the summary does not read)."""
    _whole(os.fspath(path), keep_tokens=False)


def _whole(path: str, keep_tokens: bool) -> tuple[str, int, dict, int, _Reader]:
    """(the file's printable name, its size, its metadata, its parameter count, its reader), the header
    read whole and the weights' extent checked against the file's size."""
    name = _printable(os.path.basename(path))
    fh, size = _open(path, name)
    reader = _Reader(fh, size, keep_tokens)
    try:
        with fh:
            meta, n_params, tensors = _read_header(reader, name)
    except OSError as exc:                    # an I/O error in the middle of the header
        raise GGUFError(f"{name} cannot be read ({exc.strerror or exc})") from exc
    end = _weights_end(meta, reader.pos, tensors)
    if end > size:
        raise GGUFError(f"the file is cut short: its weights end at byte {end:,}, and it has {size:,} "
                        f"({100 * size / end:.0f} %; a download or copy that did not finish?)")
    return name, size, meta, n_params, reader


def _read(path: str | os.PathLike, keep_tokens: bool) -> tuple[GGUFInfo, list[bytes] | None]:
    path = os.fspath(path)
    name, size, meta, n_params, reader = _whole(path, keep_tokens)
    arch = _text(meta, "general.architecture") or "unknown"
    ftype = _int(meta, "general.file_type", None)
    tokens = meta.get("tokenizer.ggml.tokens")
    if tokens is not None and not isinstance(tokens, _Array):
        raise GGUFError("tokenizer.ggml.tokens is not an array")
    n_head = _int(meta, f"{arch}.attention.head_count")
    n_head_kv = _int(meta, f"{arch}.attention.head_count_kv", n_head)
    head_dim = _int(meta, f"{arch}.embedding_length") // n_head if n_head else 0
    return GGUFInfo(
        path=path, file_size=size,
        name=_text(meta, "general.name") or os.path.splitext(name)[0],
        architecture=arch,
        quantization=FILE_TYPES.get(ftype, f"type {ftype}") if ftype is not None else "unknown",
        n_params=n_params, context_length=_int(meta, f"{arch}.context_length", None),
        vocab_size=tokens.n if tokens is not None else None,
        has_chat_template="tokenizer.chat_template" in meta,
        n_layer=_int(meta, f"{arch}.block_count"), n_head_kv=n_head_kv,
        key_length=_int(meta, f"{arch}.attention.key_length", head_dim),
        value_length=_int(meta, f"{arch}.attention.value_length", head_dim),
        tokenizer_model=_text(meta, "tokenizer.ggml.model"), tokenizer_pre=_text(meta, "tokenizer.ggml.pre"),
        bos_id=_int(meta, "tokenizer.ggml.bos_token_id", None), eos_id=_int(meta, "tokenizer.ggml.eos_token_id", None),
        add_bos=_flag(meta, "tokenizer.ggml.add_bos_token"), add_eos=_flag(meta, "tokenizer.ggml.add_eos_token"),
        named_by_file=_names(name, _text(meta, "general.basename"), _text(meta, "general.size_label")),
        size_label=_text(meta, "general.size_label"),
    ), reader.tokens


def _names(file_name: str, basename: str | None, size_label: str | None) -> bool:
    """Whether a file's name holds the model's basename and size label, each whole (not "2B" in
    "32B"), "-", "_" and spaces alike: "Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf" holds "Qwen2.5-Coder"
    and "1.5B"."""
    def norm(text: str) -> str:
        return re.sub(r"[-_ ]", "-", text.lower())
    return bool(basename and size_label) and all(
        re.search(r"(?<![0-9a-z])" + re.escape(norm(x)) + r"(?![0-9a-z])", norm(file_name))
        for x in (basename, size_label))
