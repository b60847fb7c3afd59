"""Shallow copies of GGUF models: a draft much smaller than its target, with the target's vocabulary.

The test target (SmolLM2 135M) has no smaller model of its own vocabulary to fetch, and its own
model requantised (the Q2_K test draft) is as large in parameters, a pair the model bar warns of. A
shallow copy keeps the first `n_layers` blocks and drops the rest: the same vocabulary and embedding,
a fraction of the parameters, so a pair the headers call fine. (Its text is poor: it is for what
the headers say and for loading, not for acceptance.)
"""
from __future__ import annotations

import os
from pathlib import Path

import gguf


def shallow_copy(src: Path | str, dst: Path | str, n_layers: int) -> Path:
    """Write `src` with only its first `n_layers` blocks to `dst` (atomically); returns dst."""
    reader = gguf.GGUFReader(src)
    arch = reader.get_field(gguf.Keys.General.ARCHITECTURE).contents()
    blocks = gguf.Keys.LLM.BLOCK_COUNT.format(arch=arch)
    assert n_layers < reader.get_field(blocks).contents()
    kept = [t for t in reader.tensors if not t.name.startswith("blk.") or int(t.name.split(".")[1]) < n_layers]

    dst = Path(dst)
    tmp = dst.with_name(dst.name + ".tmp")
    writer = gguf.GGUFWriter(tmp, arch, endianess=reader.endianess)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue                                     # the writer writes these itself
        if field.name == gguf.Keys.General.SIZE_LABEL:
            continue                                     # (the maker's size, no longer this file's)
        value = n_layers if field.name == blocks else field.contents()
        sub_type = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, value, field.types[0], sub_type=sub_type)
    for tensor in kept:
        writer.add_tensor_info(tensor.name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes,
                               tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in kept:
        writer.write_tensor_data(tensor.data, tensor_endianess=reader.endianess)
    writer.close()
    os.replace(tmp, dst)
    return dst
