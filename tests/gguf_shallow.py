"""Shallow copies of GGUF models: a draft much smaller than its target, with the target's vocabulary.

The test target (SmolLM2 135M) has no smaller model of its own vocabulary to fetch, and its own
model requantised (the Q2_K test draft) is as large in parameters, a pair the model bar warns of. A
shallow copy keeps the first `n_layers` blocks and drops the rest: the same vocabulary and embedding,
a fraction of the parameters, so a pair the headers call fine. (Its text is poor: it is for what
the headers say and for loading, not for acceptance.)
"""
from __future__ import annotations

from pathlib import Path

import gguf

from gguf_padding import write_copy


def shallow_copy(src: Path | str, dst: Path | str, n_layers: int) -> Path:
    """Write `src` with only its first `n_layers` blocks to `dst` (atomically); returns dst."""
    reader = gguf.GGUFReader(src)
    arch = reader.get_field(gguf.Keys.General.ARCHITECTURE).contents()
    blocks = gguf.Keys.LLM.BLOCK_COUNT.format(arch=arch)
    assert n_layers < reader.get_field(blocks).contents()
    kept = {t.name: t.data for t in reader.tensors
            if not t.name.startswith("blk.") or int(t.name.split(".")[1]) < n_layers}
    return write_copy(reader, dst, {blocks: n_layers}, kept,
                      leave_out=[gguf.Keys.General.SIZE_LABEL])   # (the maker's size, no longer this file's)
