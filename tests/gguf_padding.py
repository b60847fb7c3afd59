"""Padded copies of GGUF models, for pairs whose vocabularies differ in size as real pairs do.

Qwen2.5-7B has 152064 vocabulary entries and Qwen2.5-0.5B 151936: the extra ids are padding (token
type UNUSED, text "[PAD<id>]"), which llama.cpp lets a pair differ by (up to 128 ids). A padded copy
of a model grows its vocabulary the same way, and its embedding (and output) rows with it.

Untrained padding rows are zeros, and their logits rarely matter. Here a padded row can instead be a
copy of a real token's row, so that the padded id gets real probability mass where that token is
likely; `boost` scales the copy a little, which makes the padded id win the argmax wherever the
original would (an exact copy ties with the original, and an argmax takes the lower id).
Quantised rows are independent blocks of bytes, so an exact copy is the row's bytes; a boosted one
is dequantised, scaled and quantised again (gguf's quantisers: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, ...).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import gguf
import numpy as np

ROW_TENSORS = ("token_embd.weight", "output.weight")   # one row per vocabulary id (output: if untied)


def pad_vocabulary(src: Path | str, dst: Path | str, n_pad: int, copies: Sequence[int] = (),
                   boost: float = 1.0) -> Path:
    """Write `src` with its vocabulary grown by `n_pad` ids to `dst` (atomically); returns dst.
    Padded id n_vocab + i has the row of token copies[i] (scaled by `boost`); the others zero rows."""
    assert len(copies) <= n_pad
    reader = gguf.GGUFReader(src)
    arch = reader.get_field(gguf.Keys.General.ARCHITECTURE).contents()
    tokens = reader.get_field(gguf.Keys.Tokenizer.LIST).contents()
    n_vocab = len(tokens)
    padded = {
        gguf.Keys.Tokenizer.LIST: tokens + [f"[PAD{i}]" for i in range(n_vocab, n_vocab + n_pad)],
        gguf.Keys.Tokenizer.TOKEN_TYPE: (reader.get_field(gguf.Keys.Tokenizer.TOKEN_TYPE).contents()
                                         + [int(gguf.TokenType.UNUSED)] * n_pad),
        gguf.Keys.LLM.VOCAB_SIZE.format(arch=arch): n_vocab + n_pad,
    }
    scores = reader.get_field(gguf.Keys.Tokenizer.SCORES)
    if scores is not None:
        padded[gguf.Keys.Tokenizer.SCORES] = scores.contents() + [min(scores.contents())] * n_pad

    data = {}
    for tensor in reader.tensors:
        data[tensor.name] = tensor.data
        if tensor.name in ROW_TENSORS:
            assert tensor.data.shape[0] == n_vocab, (tensor.name, tensor.data.shape)
            data[tensor.name] = _grow_rows(tensor.data, tensor.tensor_type, n_pad, copies, boost)
    return write_copy(reader, dst, padded, data)


def write_copy(reader: gguf.GGUFReader, dst: Path | str, values: dict, data: dict,
               leave_out: Sequence[str] = ()) -> Path:
    """Write the model `reader` reads to `dst` (atomically), with the header values in `values` in place
    of its own, the fields in `leave_out` left out, and the tensors `data` names (name -> data: in the
    reader's order, of their own types); returns dst."""
    arch = reader.get_field(gguf.Keys.General.ARCHITECTURE).contents()
    dst = Path(dst)
    tmp = dst.with_name(dst.name + ".tmp")
    writer = gguf.GGUFWriter(tmp, arch, endianess=reader.endianess)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF.") or field.name in leave_out:
            continue                                     # (the writer writes the first two itself)
        value = values.get(field.name, field.contents())
        sub_type = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, value, field.types[0], sub_type=sub_type)
    tensors = [t for t in reader.tensors if t.name in data]
    for tensor in tensors:
        rows = data[tensor.name]
        writer.add_tensor_info(tensor.name, rows.shape, rows.dtype, rows.nbytes, tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in tensors:
        writer.write_tensor_data(data[tensor.name], tensor_endianess=reader.endianess)
    writer.close()
    os.replace(tmp, dst)
    return dst


def _grow_rows(rows: np.ndarray, qtype: gguf.GGMLQuantizationType, n_pad: int, copies: Sequence[int],
               boost: float) -> np.ndarray:
    """rows: [n_vocab, row bytes] (quantised) or [n_vocab, n_embd]; returns [n_vocab + n_pad, ...]."""
    extra = np.zeros((n_pad, *rows.shape[1:]), dtype=rows.dtype)   # all-zero bytes dequantise to 0.0
    copied = np.array(rows[list(copies)])
    if boost != 1.0 and len(copies):
        copied = gguf.quants.quantize(gguf.quants.dequantize(copied, qtype) * boost, qtype)
    extra[:len(copies)] = copied
    return np.concatenate([rows, extra])
