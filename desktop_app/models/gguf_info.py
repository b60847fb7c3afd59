"""What a GGUF file is, read from its header alone (no llama.cpp, no weights): for showing a model
before loading it. Reads the metadata and the tensor shapes; skips everything else."""
from __future__ import annotations

import os
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
KEEP_ARRAYS = {"tokenizer.ggml.tokens"}     # only its length is kept


class GGUFError(ValueError):
    pass


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

    def kv_cache_bytes(self, n_ctx: int, bytes_per_value: int = 2) -> int:
        """Size of an F16 KV cache of n_ctx tokens (what llama.cpp allocates by default)."""
        return n_ctx * self.n_layer * self.n_head_kv * (self.key_length + self.value_length) * bytes_per_value

    def summary(self) -> str:
        parts = [self.name, _human_params(self.n_params) + " parameters", self.quantization,
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


class _Reader:
    def __init__(self, fh: BinaryIO):
        self.fh = fh

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        data = self.fh.read(size)
        if len(data) != size:
            raise GGUFError("the file ends inside its header")
        return struct.unpack(fmt, data)[0]

    def string(self) -> str:
        n = self.take("<Q")
        if n > 1 << 26:
            raise GGUFError("implausible string length in the header")
        data = self.fh.read(n)
        if len(data) != n:
            raise GGUFError("the file ends inside its header")
        return data.decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        self.fh.seek(self.take("<Q"), os.SEEK_CUR)

    def value(self, vtype: int, keep: bool):
        if vtype in _SCALARS:
            return self.take(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            itype, n = self.take("<I"), self.take("<Q")
            if itype in _SCALARS:
                self.fh.seek(struct.calcsize(_SCALARS[itype]) * n, os.SEEK_CUR)
            elif itype == _STRING:
                for _ in range(n):
                    self.skip_string()
            else:
                for _ in range(n):
                    self.value(itype, False)
            return n if keep else None
        raise GGUFError(f"unknown metadata type {vtype}")


def read_info(path: str | os.PathLike) -> GGUFInfo:
    path = os.fspath(path)
    with open(path, "rb") as fh:
        r = _Reader(fh)
        if fh.read(4) != b"GGUF":
            raise GGUFError(f"{os.path.basename(path)} is not a GGUF file")
        version = r.take("<I")
        if version not in (2, 3):
            raise GGUFError(f"unsupported GGUF version {version}")
        n_tensors, n_kv = r.take("<Q"), r.take("<Q")
        meta: dict = {}
        for _ in range(n_kv):
            key = r.string()
            meta[key] = r.value(r.take("<I"), key in KEEP_ARRAYS)
        n_params = 0
        for _ in range(n_tensors):
            r.skip_string()
            dims = [r.take("<Q") for _ in range(r.take("<I"))]
            r.take("<I")
            r.take("<Q")
            count = 1
            for d in dims:
                count *= d
            n_params += count
    arch = str(meta.get("general.architecture", "unknown"))
    ftype = meta.get("general.file_type")
    n_head = int(meta.get(f"{arch}.attention.head_count", 0) or 0)
    n_head_kv = int(meta.get(f"{arch}.attention.head_count_kv", n_head) or 0)
    head_dim = int(meta.get(f"{arch}.embedding_length", 0) or 0) // n_head if n_head else 0
    return GGUFInfo(
        path=path, file_size=os.path.getsize(path),
        name=str(meta.get("general.name") or os.path.splitext(os.path.basename(path))[0]),
        architecture=arch,
        quantization=FILE_TYPES.get(ftype, f"type {ftype}") if ftype is not None else "unknown",
        n_params=n_params, context_length=meta.get(f"{arch}.context_length"),
        vocab_size=meta.get("tokenizer.ggml.tokens"),
        has_chat_template="tokenizer.chat_template" in meta,
        n_layer=int(meta.get(f"{arch}.block_count", 0) or 0), n_head_kv=n_head_kv,
        key_length=int(meta.get(f"{arch}.attention.key_length", head_dim) or 0),
        value_length=int(meta.get(f"{arch}.attention.value_length", head_dim) or 0))
