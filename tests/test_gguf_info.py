"""The GGUF header reader on damaged files: every failure is a GGUFError, bounded by the file size,
and listing models never fails on one bad file."""
from __future__ import annotations

import os
import random
import shutil
import struct
import threading
from pathlib import Path

import pytest

from desktop_app.engine.probe_model import N_CTX_TRAIN, N_VOCAB, write_probe_model
from desktop_app.models.discovery import find_gguf_files
from desktop_app.models.gguf_info import GGUFError, GGUFInfo, read_info
from gguf_damage import Header, mutate, put, read_header

N_TENSORS_AT, N_KV_AT = 8, 16


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> Path:
    """A real, loadable GGUF model of 1 MB (the CPU probe's), written with llama.cpp's gguf package."""
    path = tmp_path_factory.mktemp("probe") / "probe.gguf"
    write_probe_model(path)
    return path


@pytest.fixture(scope="module")
def probe_header(probe) -> Header:
    return read_header(probe)


def damaged(tmp_path: Path, data: bytes, name: str = "damaged.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def read_within(path: Path, seconds: float = 10.0):
    """read_info on another thread: a reader that blocks (on a pipe, say) fails the test instead of hanging it."""
    box: dict = {}

    def target():
        try:
            box["info"] = read_info(path)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"read_info({path.name}) still running after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["info"]


def test_the_intact_probe_model_is_read(probe):
    info = read_info(probe)
    assert (info.architecture, info.name, info.context_length, info.vocab_size) == \
        ("llama", "tandem-cpu-probe", N_CTX_TRAIN, N_VOCAB)
    assert info.n_params > N_VOCAB * 256 and info.n_layer == 2 and info.n_head_kv == 2


def test_a_file_cut_short_in_its_weights_is_an_error(tmp_path, probe):
    """Its header is whole, so it read as a good model and paired, and only Load failed (a new user's
    try, with a model cut to 60 MB). The weights' extent is the header's: the probe ends exactly there."""
    from desktop_app.ui.model_bar import describe

    data = probe.read_bytes()
    assert read_info(damaged(tmp_path, data[:-1] + b"\0" * 64)).file_size == len(data) + 63   # (more is fine)
    cut = damaged(tmp_path, data[:len(data) - 1])
    with pytest.raises(GGUFError, match=f"cut short: its weights end at byte {len(data):,}, and it has "
                                        f"{len(data) - 1:,} \\(100 %"):
        read_info(cut)
    assert describe(str(damaged(tmp_path, data[:len(data) * 3 // 5]))).startswith("cannot read: the file is cut short")


def test_an_alignment_that_is_not_a_power_of_two_is_an_error(tmp_path):
    import gguf

    path = tmp_path / "aligned.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint32("general.alignment", 48)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    with pytest.raises(GGUFError, match="general.alignment is 48, not a power of 2"):
        read_info(path)


def test_a_huge_tensor_count_is_an_error_of_its_own(tmp_path, probe):
    bad = damaged(tmp_path, put(probe.read_bytes(), N_TENSORS_AT, 8, 2**62))
    with pytest.raises(GGUFError, match="claims 4,611,686,018,427,387,904 tensors, more than the 1,180,352-byte file"):
        read_info(bad)


def _kv_value_offset(header: Header, key: str) -> int:
    return header.kv_offsets[key] + 4                     # after the value type


DAMAGES = {
    # name: (how to damage the header, what the error says)
    "n_tensors 2^64-1": (lambda h: put(h.data, N_TENSORS_AT, 8, 2**64 - 1), "tensors, more than"),
    "n_kv 2^62": (lambda h: put(h.data, N_KV_AT, 8, 2**62), "metadata items, more than"),
    "n_kv one too many": (lambda h: put(h.data, N_KV_AT, 8, len(h.kv_offsets) + 1), "ends inside its header"),
    "key length 2^64-1": (lambda h: put(h.data, 24, 8, 2**64 - 1), "ends inside its header"),
    "key length 0": (lambda h: put(h.data, 24, 8, 0), "empty or implausibly long name"),
    "name length 2^63": (lambda h: put(h.data, _kv_value_offset(h, "general.name"), 8, 2**63), "ends inside"),
    "vocabulary length 2^62": (lambda h: put(h.data, _kv_value_offset(h, "tokenizer.ggml.tokens") + 4, 8, 2**62),
                               "items in tokenizer.ggml.tokens, more than"),
    "token length 2^64-1": (lambda h: put(h.data, _kv_value_offset(h, "tokenizer.ggml.tokens") + 12, 8, 2**64 - 1),
                            "an item of tokenizer.ggml.tokens"),
    "scores length 2^61": (lambda h: put(h.data, _kv_value_offset(h, "tokenizer.ggml.scores") + 4, 8, 2**61),
                           "items in tokenizer.ggml.scores, more than"),
    "unknown value type 13": (lambda h: put(h.data, h.kv_offsets["general.name"], 4, 13), "unknown type 13"),
    "unknown value type 2^32-1": (lambda h: put(h.data, h.kv_offsets["general.name"], 4, 2**32 - 1), "unknown type"),
    "array of arrays": (lambda h: put(h.data, _kv_value_offset(h, "tokenizer.ggml.tokens"), 4, 9), "array of arrays"),
    "array of unknown type": (lambda h: put(h.data, _kv_value_offset(h, "tokenizer.ggml.tokens"), 4, 77),
                              "array of unknown type 77"),
    "version 1": (lambda h: put(h.data, 4, 4, 1), "unsupported GGUF version 1"),
    "big-endian version": (lambda h: put(h.data, 4, 4, 3 << 24), "big-endian"),
    "not GGUF": (lambda h: b"GGML" + h.data[4:], "not a GGUF file"),
    "empty": (lambda h: b"", r"is empty \(0 bytes\): a download or copy that did not finish"),
    "signature only": (lambda h: b"GGUF", "ends inside its header"),
    "cut inside the counts": (lambda h: h.data[:12], "ends inside its header"),
    "cut soon after the vocabulary's count": (lambda h: h.data[:_kv_value_offset(h, "tokenizer.ggml.tokens") + 200],
                                              "320 items in tokenizer.ggml.tokens, more than the"),
    "cut inside the vocabulary": (lambda h: h.data[:_kv_value_offset(h, "tokenizer.ggml.tokens") + 3000],
                                  "ends inside its header .an item of tokenizer.ggml.tokens"),
    "cut inside the tensors": (lambda h: h.data[:-10], "ends inside its header"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_each_damaged_header_is_a_gguf_error(tmp_path, probe_header, damage):
    make, says = DAMAGES[damage]
    with pytest.raises(GGUFError, match=says) as refused:
        read_within(damaged(tmp_path, make(probe_header)))
    if damage.startswith(("cut", "signature")):          # (a count past the end read as a riddle where a cut
        assert str(refused.value).endswith("cut short (a download or copy that did not finish?) or damaged")
                                                         # among the weights said "cut short": a new user's try)


def test_tensor_shapes_past_llama_cpps_limits(tmp_path, probe, probe_header):
    import gguf

    reader = gguf.GGUFReader(str(probe))
    n_dims_at = reader.tensors[0].field.parts[2].ctypes.data - reader.data.ctypes.data
    del reader
    data = probe_header.data
    with pytest.raises(GGUFError, match="has 5 dimensions"):
        read_info(damaged(tmp_path, put(data, n_dims_at, 4, 5)))
    with pytest.raises(GGUFError, match="has 4,294,967,295 dimensions"):
        read_info(damaged(tmp_path, put(data, n_dims_at, 4, 2**32 - 1)))
    with pytest.raises(GGUFError, match="negative dimension"):
        read_info(damaged(tmp_path, put(data, n_dims_at + 4, 8, 2**64 - 1)))
    with pytest.raises(GGUFError, match="claims .* elements"):
        huge = put(put(data, n_dims_at + 4, 8, 2**62), n_dims_at + 12, 8, 2**62)
        read_info(damaged(tmp_path, huge))


def header_only(path: Path, **fields) -> Path:
    """A GGUF file of a "llama" header alone, with a two-token vocabulary and `fields` (key with "." as
    "__": a list is written as an array, anything else as a string)."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    for key, value in fields.items():
        key = key.replace("__", ".")
        writer.add_array(key, value) if isinstance(value, list) else writer.add_string(key, value)
    writer.add_array("tokenizer.ggml.tokens", ["a", "b"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


def test_fields_of_the_wrong_type_are_errors(tmp_path):
    path = header_only(tmp_path / "typed.gguf", llama__context_length="lots")
    with pytest.raises(GGUFError, match="llama.context_length is not an integer"):
        read_info(path)


def test_a_load_checks_the_header_whole_not_the_summary_s_fields(tmp_path):
    """What a load asks of a file before llama.cpp reads it (check_whole): a whole header, and weights as
    long as it says. Not the summary's fields: llama.cpp loads files whose head counts are per-layer
    arrays, which read_info refuses (a review: the load check had refused them too)."""
    from desktop_app.models.gguf_info import check_whole
    path = header_only(tmp_path / "per-layer.gguf", llama__attention__head_count=[8, 8, 4])
    with pytest.raises(GGUFError, match="head_count is not an integer"):
        read_info(path)
    check_whole(path)
    from desktop_app.engine.loading import check_gguf_header
    check_gguf_header(str(path))                       # (the engine's check before a load: not refused)
    with pytest.raises(GGUFError):                     # (a header cut short is still refused)
        check_whole(damaged(tmp_path, b"GGUF", "cut.gguf"))


def test_a_folder_or_a_pipe_named_gguf_is_an_error_not_a_hang(tmp_path):
    (tmp_path / "folder.gguf").mkdir()
    with pytest.raises(GGUFError, match="folder.gguf is not a regular file"):
        read_within(tmp_path / "folder.gguf")
    os.mkfifo(tmp_path / "pipe.gguf")
    with pytest.raises(GGUFError, match="pipe.gguf is not a regular file"):
        read_within(tmp_path / "pipe.gguf")
    with pytest.raises(GGUFError, match="missing.gguf cannot be read"):
        read_within(tmp_path / "missing.gguf")


def fuzz(tmp_path: Path, header: Header, rounds: int, seed: int) -> dict:
    """read_info on `rounds` random damages of `header`: it returns or raises GGUFError, nothing else."""
    rng = random.Random(seed)
    path = tmp_path / "fuzzed.gguf"
    outcomes = {"read": 0, "error": 0}
    for i in range(rounds):
        data = mutate(header, rng)
        path.write_bytes(data)
        size = max(len(data), header.size)
        os.truncate(path, size)                  # (zeros where the weights were: the reader checks their extent)
        try:
            info = read_info(path)
        except GGUFError as exc:
            assert str(exc) and "\n" not in str(exc)
            outcomes["error"] += 1
            continue
        except BaseException as exc:  # noqa: BLE001 - the test's whole point
            (tmp_path / f"failing-{i}.gguf").write_bytes(data)
            raise AssertionError(f"damage {i} (kept as failing-{i}.gguf) raised {exc!r}") from exc
        assert isinstance(info, GGUFInfo) and info.file_size == size
        info.summary()
        outcomes["read"] += 1
    return outcomes


def test_fuzzed_probe_headers_only_ever_raise_gguf_error(tmp_path, probe_header):
    outcomes = fuzz(tmp_path, probe_header, rounds=1500, seed=12)
    assert outcomes["error"] > 500 and outcomes["read"] > 50        # both paths were exercised


# -- the real test model (fetched)

def _real_copy(tmp_path: Path, model: str, folder: str = "models") -> Path:
    out = tmp_path / folder
    out.mkdir(exist_ok=True)
    return Path(shutil.copyfile(model, out / "SmolLM2-damaged.gguf"))


@pytest.mark.network
def test_the_issues_file_a_real_model_claiming_2_to_the_62_tensors(tmp_path, test_model_path):
    bad = _real_copy(tmp_path, test_model_path)
    with open(bad, "r+b") as fh:
        fh.seek(N_TENSORS_AT)
        fh.write(struct.pack("<Q", 2**62))
    with pytest.raises(GGUFError, match="claims 4,611,686,018,427,387,904 tensors"):
        read_info(bad)
    listed = [p for p in find_gguf_files([tmp_path / "models"]) if tmp_path in p.parents]
    assert listed == [bad]                                          # listed: its header is not read there


@pytest.mark.network
def test_fuzzed_real_headers_only_ever_raise_gguf_error(tmp_path, test_model_path):
    header = read_header(Path(test_model_path))
    assert len(header.data) > 1_000_000 and len(header.fields) > 90_000      # tokens, merges and 272 tensors
    outcomes = fuzz(tmp_path, header, rounds=300, seed=62)
    assert outcomes["error"] > 100 and outcomes["read"] > 10


def test_listing_skips_loops_pipes_and_folders_and_never_reads_headers(tmp_path, probe):
    folder = tmp_path / "mine"
    folder.mkdir()
    good = Path(shutil.copyfile(probe, folder / "good.gguf"))
    (folder / "bad.gguf").write_bytes(put(probe.read_bytes(), N_TENSORS_AT, 8, 2**62))
    (folder / "loop-a.gguf").symlink_to(folder / "loop-b.gguf")
    (folder / "loop-b.gguf").symlink_to(folder / "loop-a.gguf")
    (folder / "dangling.gguf").symlink_to(folder / "nowhere.gguf")
    os.mkfifo(folder / "pipe.gguf")
    (folder / "dir.gguf").mkdir()
    os.utime(good, (1, 1))                                             # oldest: listed last
    found = find_gguf_files([folder, tmp_path / "not-there"])
    assert [p for p in found if tmp_path in p.parents] == [folder / "bad.gguf", good]


def test_listing_ignores_folder_entries_that_are_not_paths(tmp_path, probe):
    good = Path(shutil.copyfile(probe, tmp_path / "good.gguf"))
    found = find_gguf_files([5, None, tmp_path])
    assert [p for p in found if tmp_path in p.parents] == [good]


def test_the_models_own_name_is_shown_only_where_the_files_name_does_not_say_it(test_model_path, tmp_path):
    """An uploader's general.name can mislead ("Qwen2.5 Coder 0.5B Instruct AWQ" for a Q4_K_M file): beside a
    file name that names the model (its basename and size label), the line leaves it out."""
    info = read_info(test_model_path)                  # SmolLM2-135M-Instruct.Q4_1.gguf: "smollm2", "135M"
    assert info.named_by_file and info.name == "Smollm2 135M 8k Lc100K Mix1 Ep2"
    assert info.summary().startswith("135M parameters · Q4_1 · ")
    renamed = tmp_path / "model.gguf"
    renamed.symlink_to(test_model_path)
    other = read_info(str(renamed))
    assert not other.named_by_file and other.summary() == f"{info.name} · {info.summary()}"
    bigger = tmp_path / "SmolLM2-1135M.gguf"                 # "135M" only inside another size: not named
    bigger.symlink_to(test_model_path)
    assert not read_info(str(bigger)).named_by_file


def test_the_size_shown_is_the_makers_label_where_the_file_stores_a_tied_output_layer_twice(tmp_path):
    """Qwen2.5's small models tie their output layer to the embeddings, and their GGUFs store it twice:
    counting every tensor said "1.8B parameters" beside a file named 1.5B (a new user's first screen).
    The maker's general.size_label is shown where the file has one; the tensor count where it has not."""
    import gguf
    import numpy as np

    def write(path, label):
        writer = gguf.GGUFWriter(str(path), "qwen2")
        if label:
            writer.add_size_label(label)
        embeddings = np.zeros((1000, 64), dtype=np.float32)
        writer.add_tensor("token_embd.weight", embeddings)
        writer.add_tensor("output.weight", embeddings.copy())         # the tied layer, stored again
        writer.add_tensor("blk.0.attn_q.weight", np.zeros((64, 64), dtype=np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        return read_info(path)

    labelled = write(tmp_path / "labelled.gguf", "68K")
    assert labelled.n_params == 2 * 64_000 + 64 * 64 and labelled.size_label == "68K"
    assert labelled.summary().split(" · ")[1] == "68K parameters"
    unlabelled = write(tmp_path / "unlabelled.gguf", None)
    assert unlabelled.size_label is None and unlabelled.summary().split(" · ")[1] == "132K parameters"
