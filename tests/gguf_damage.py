"""Damaging GGUF headers for the reader's tests: where each count, length and type field of a real
header lies (found by llama.cpp's own reader, `gguf.GGUFReader`, on the intact file), and mutations
of those fields and of random bytes."""
from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

EXTREMES = [0, 1, 4, 5, 9, 13, 255, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1]


@dataclass(frozen=True)
class Field:
    offset: int
    size: int          # 4 or 8 bytes
    what: str


@dataclass(frozen=True)
class Header:
    data: bytes        # the header alone: signature to the end of the last tensor's description
    fields: list[Field]
    kv_offsets: dict[str, int]    # metadata key -> offset of its value type field
    size: int = 0      # the whole file's: a header fuzzed is written out to it, as if its weights followed


def read_header(path: Path) -> Header:
    import gguf

    reader = gguf.GGUFReader(str(path))
    base = reader.data.ctypes.data

    def at(part) -> int:
        return part.ctypes.data - base

    fields: list[Field] = []
    kv_offsets = {}
    for name, field in reader.fields.items():
        for part in field.parts:
            if part.dtype.kind in "ui" and part.size == 1 and part.itemsize in (4, 8):
                fields.append(Field(at(part), part.itemsize, name))
        if not name.startswith("GGUF."):
            kv_offsets[name] = at(field.parts[2])
    for tensor in reader.tensors:
        name_len, _name, n_dims, dims, raw_dtype, offset = tensor.field.parts
        fields += [Field(at(name_len), 8, f"{tensor.name} name length"), Field(at(n_dims), 4, f"{tensor.name} n_dims"),
                   Field(at(raw_dtype), 4, f"{tensor.name} type"), Field(at(offset), 8, f"{tensor.name} offset")]
        fields += [Field(at(dims) + 8 * i, 8, f"{tensor.name} dim {i}") for i in range(len(dims))]
    end = max(f.offset + f.size for f in fields)
    data = bytes(np.asarray(reader.data[:end]))
    del reader
    return Header(data, fields, kv_offsets, path.stat().st_size)


def put(data: bytes, offset: int, size: int, value: int) -> bytes:
    b = bytearray(data)
    b[offset:offset + size] = struct.pack("<I" if size == 4 else "<Q", value % (1 << (8 * size)))
    return bytes(b)


def mutate(header: Header, rng: random.Random) -> bytes:
    """One random damage: a structural field set to an extreme or random value, random bytes
    overwritten, a cut, or bytes inserted or removed."""
    data = header.data
    kind = rng.randrange(5)
    if kind == 0:
        f = rng.choice(header.fields)
        value = rng.choice(EXTREMES + [len(data), len(data) - f.offset, rng.getrandbits(8 * f.size)])
        return put(data, f.offset, f.size, value)
    if kind == 1:
        b = bytearray(data)
        for _ in range(rng.randint(1, 16)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if kind == 2:
        return data[:rng.randrange(len(data))]
    at = rng.randrange(len(data))
    if kind == 3:
        return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 12))) + data[at:]
    return data[:at] + data[at + rng.randint(1, 12):]
