"""A tiny synthetic llama model for probing the CPU kernels, written once with the `gguf` package.

Two layers of random weights stored directly in the quantised types llama.cpp repacks on CPUs
(Q4_0, Q4_K, IQ4_NL, Q2_K with AVX2/AVX-512) or has Intel AMX kernels for (Q4_0, Q4_1, Q8_0, Q4_K,
Q5_K, Q6_K, IQ4_XS), with every dimension a multiple of 256 so that each repacking path accepts
them. Random quantised blocks need no quantiser: the bytes are random and only the float16 scales
are set, small, so the activations stay finite. About 1 MB; loads and evaluates in milliseconds.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

VERSION = 1                                      # bump when the model changes: a new file is written
N_EMBD, N_FF, N_LAYERS, N_HEAD, N_HEAD_KV = 256, 512, 2, 4, 2
N_CTX_TRAIN = 256
SCALE = 1e-3                                     # every block's float16 scale (and min)

# Byte offsets of the float16 scale fields (d, and dmin/m where the type has one) in one block.
SCALE_OFFSETS = {"Q4_0": (0,), "Q4_1": (0, 2), "Q8_0": (0,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,),
                 "IQ4_XS": (0,), "IQ4_NL": (0,), "Q2_K": (80, 82)}
# The matrix weights of the two layers and the output, in order, take these types in turn.
TYPES = ["Q4_0", "Q8_0", "Q4_K", "Q4_1", "Q6_K", "IQ4_NL", "Q5_K", "Q2_K", "IQ4_XS"]


def _vocabulary() -> tuple[list[str], list[int]]:
    """SentencePiece-style: <unk>, <s>, </s>, the 256 byte tokens, padded to a multiple of 64."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256                  # unknown, control, control, byte
    while len(tokens) % 64:
        tokens.append(f"t{len(tokens)}")
        types.append(1)                            # normal
    return tokens, types


N_VOCAB = len(_vocabulary()[0])


def _random_blocks(rng: np.random.Generator, type_name: str, rows: int, cols: int) -> np.ndarray:
    import gguf

    qtype = gguf.GGMLQuantizationType[type_name]
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    assert cols % block_size == 0, (type_name, cols)
    blocks = rng.integers(0, 256, size=(rows, cols // block_size, type_size), dtype=np.uint8)
    scale = np.frombuffer(np.float16(SCALE).tobytes(), dtype=np.uint8)
    for offset in SCALE_OFFSETS[type_name]:
        blocks[:, :, offset:offset + 2] = scale
    return blocks.reshape(rows, -1)


def _matrices() -> list[tuple[str, int, int]]:
    """(name, rows, cols) of every quantised matrix: rows = outputs (ne1), cols = inputs (ne0)."""
    head_dim = N_EMBD // N_HEAD
    out = []
    for i in range(N_LAYERS):
        out += [(f"blk.{i}.attn_q.weight", N_EMBD, N_EMBD), (f"blk.{i}.attn_k.weight", N_HEAD_KV * head_dim, N_EMBD),
                (f"blk.{i}.attn_v.weight", N_HEAD_KV * head_dim, N_EMBD), (f"blk.{i}.attn_output.weight", N_EMBD, N_EMBD),
                (f"blk.{i}.ffn_gate.weight", N_FF, N_EMBD), (f"blk.{i}.ffn_up.weight", N_FF, N_EMBD),
                (f"blk.{i}.ffn_down.weight", N_EMBD, N_FF)]
    return out + [("output.weight", N_VOCAB, N_EMBD)]


def write_probe_model(path: Path) -> None:
    import gguf

    rng = np.random.default_rng(20824)
    tokens, token_types = _vocabulary()
    writer = gguf.GGUFWriter(os.fspath(path), "llama")
    writer.add_name("tandem-cpu-probe")
    writer.add_context_length(N_CTX_TRAIN)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYERS)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD_KV)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_token_types(token_types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_tensor("token_embd.weight", rng.normal(0, 0.02, (N_VOCAB, N_EMBD)).astype(np.float32))
    ones = np.ones(N_EMBD, dtype=np.float32)
    writer.add_tensor("output_norm.weight", ones)
    for i in range(N_LAYERS):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
    for k, (name, rows, cols) in enumerate(_matrices()):
        type_name = TYPES[k % len(TYPES)]
        writer.add_tensor(name, _random_blocks(rng, type_name, rows, cols),
                          raw_dtype=gguf.GGMLQuantizationType[type_name])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def probe_model_path(folder: Path) -> Path:
    """The probe model in `folder`, written there (atomically) the first time."""
    path = folder / f"cpu-probe-v{VERSION}.gguf"
    if path.is_file():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".cpu-probe-", suffix=".gguf", dir=folder)
    os.close(fd)
    try:
        write_probe_model(Path(tmp))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
