"""The pair check from GGUF headers alone (models/pairing.py): the vocabulary's texts read fast and
exactly, damaged files refused, and verdicts that agree with the engine's own check on the loaded
vocabularies (engine/compat.py), padded vocabularies included."""
from __future__ import annotations

import shutil

import gguf
import pytest

from desktop_app.engine.compat import VOCAB_MAX_SIZE_DIFFERENCE, check_pair
from desktop_app.models.gguf_info import GGUFError, read_info, read_vocabulary
from desktop_app.models.pairing import CHOOSE, check_headers, suggest_pair

from gguf_padding import pad_vocabulary

pytestmark = pytest.mark.network      # the fetched test models


@pytest.fixture(scope="module")
def padded(test_model_path, q2k_draft_path, tmp_path_factory):
    """The test target with its vocabulary padded by the most llama.cpp allows, and by one more."""
    folder = tmp_path_factory.mktemp("padded")
    return {n: str(pad_vocabulary(test_model_path, folder / f"target-pad{n}.gguf", n))
            for n in (VOCAB_MAX_SIZE_DIFFERENCE, VOCAB_MAX_SIZE_DIFFERENCE + 1)}


def test_the_vocabulary_read_is_llama_cpps_own(test_model_path, gemma_path):
    for path in (test_model_path, gemma_path):
        info, tokens = read_vocabulary(path)
        expected = gguf.GGUFReader(path).get_field("tokenizer.ggml.tokens").contents()
        assert tokens == [t.encode("utf-8") for t in expected]
        assert info == read_info(path) and info.vocab_size == len(tokens)
    smol = read_info(test_model_path)
    assert (smol.tokenizer_model, smol.tokenizer_pre, smol.bos_id, smol.eos_id, smol.add_bos) == (
        "gpt2", "smollm", 1, 2, False)
    gemma = read_info(gemma_path)
    assert (gemma.tokenizer_model, gemma.bos_id, gemma.eos_id, gemma.add_bos, gemma.add_eos) == (
        "llama", 2, 1, True, False)


def test_a_file_cut_inside_its_vocabulary_is_refused(test_model_path, tmp_path):
    field = gguf.GGUFReader(test_model_path).get_field("tokenizer.ggml.tokens")
    start, end = field.offset, field.offset + sum(part.nbytes for part in field.parts)
    with open(test_model_path, "rb") as fh:
        data = fh.read(end + 1)
    path = tmp_path / "cut.gguf"
    for cut in [start + (end - start) * k // 7 for k in range(1, 7)] + [end - 1]:
        path.write_bytes(data[:cut])
        with pytest.raises(GGUFError, match="ends inside its header|more than the"):
            read_vocabulary(path)
    assert not check_headers(test_model_path, str(path)).ok


def test_padded_target_pairs_and_says_the_draft_is_smaller(padded, q2k_draft_path, shallow_draft_path):
    verdict = check_headers(padded[VOCAB_MAX_SIZE_DIFFERENCE], shallow_draft_path)
    assert verdict.ok is True
    assert verdict.text == "Pair OK: same tokenizer (gpt2/smollm); draft vocabulary smaller (49,152 of 49,280): fine"
    bigger_draft = check_headers(q2k_draft_path, padded[VOCAB_MAX_SIZE_DIFFERENCE])
    assert bigger_draft.ok is True and "draft vocabulary larger (49,280" in bigger_draft.text
    too_far = check_headers(padded[VOCAB_MAX_SIZE_DIFFERENCE + 1], q2k_draft_path)
    assert too_far.ok is False and "49,281 (target) and 49,152 (draft) tokens" in too_far.text


def test_header_verdicts_agree_with_the_engines_check(test_model_path, q2k_draft_path, gemma_path, qwen_draft_path,
                                                       padded):
    pairs = [(test_model_path, q2k_draft_path), (q2k_draft_path, test_model_path), (test_model_path, gemma_path),
             (gemma_path, test_model_path), (qwen_draft_path, test_model_path), (qwen_draft_path, gemma_path),
             (padded[VOCAB_MAX_SIZE_DIFFERENCE], q2k_draft_path), (q2k_draft_path, padded[VOCAB_MAX_SIZE_DIFFERENCE]),
             (padded[VOCAB_MAX_SIZE_DIFFERENCE + 1], q2k_draft_path)]
    failed = 0
    for target, draft in pairs:
        header, engine = check_headers(target, draft), check_pair(target, draft)
        assert header.ok == engine.ok, (target, draft)
        if not engine.ok:                    # and they say why in the same words
            failed += 1
            assert header.text == f"These two cannot pair: {engine.reason} — {CHOOSE}", (header.text, engine.reason)
    assert failed == 5


def test_a_draft_no_smaller_than_its_target_is_said_to_be_so(test_model_path, q2k_draft_path, shallow_draft_path,
                                                              capsys, tmp_path):
    """The 1.5B model drafting for the 0.5B ran at 0.39× plain, and nothing said why (a new user's
    try). Those two pair, and the verdict says the draft will not pay; in the right order, nothing.
    Nor does the target's own model in a smaller file pay (the Q2_K test draft: 0.42× plain), and that
    is said too; a draft with a fraction of the target's parameters is fine."""
    from desktop_app.commands.checks import draft_note
    from desktop_app.models.pairing import draft_too_big

    assert check_headers(test_model_path, shallow_draft_path).text == "Pair OK: same tokenizer (gpt2/smollm, 49,152 tokens)"
    same = check_headers(test_model_path, q2k_draft_path)         # (135M parameters both: the draft's file smaller)
    assert same.ok is True and same.warning and same.text == (
        "These two pair: same tokenizer (gpt2/smollm, 49,152 tokens) — but the draft (135M, 88 MB) has as many "
        "parameters as the target (135M, 98 MB): a smaller file runs little faster, and a draft pays only where it "
        "is much faster than its target")
    swapped = check_headers(shallow_draft_path, test_model_path)   # (the draft the larger: swapping them helps)
    assert swapped.ok is True and swapped.warning and swapped.text == (   # (not "Pair OK … but": read as a pass)
        "These two pair: same tokenizer (gpt2/smollm, 49,152 tokens) — but the draft (135M) is larger than the "
        "target (50M): it would be slower than the target alone; swap Target and Draft")
    # 135M parameters both, the draft's file the larger: swapped, they would be warned of too, so no swap is asked
    assert check_headers(q2k_draft_path, test_model_path).warning == (
        "the draft (135M, 98 MB) is larger than the target (135M, 88 MB): it would be slower than the target alone, "
        "and so would the target drafting for it, as a draft pays only where it is much faster than its target")
    assert draft_too_big(test_model_path, test_model_path) == ("the draft is the target itself: a draft pays only "
                                                               "where it is much faster than its target")
    twin = tmp_path / "twin.gguf"                                 # as large: swapping them changes nothing
    shutil.copyfile(q2k_draft_path, twin)
    assert draft_too_big(q2k_draft_path, str(twin)) == ("the draft (135M) is the target's size: a draft pays only "
                                                        "where it is much faster than its target")
    draft_note(shallow_draft_path, test_model_path)               # the command line's words
    draft_note(test_model_path, shallow_draft_path)
    draft_note(test_model_path, q2k_draft_path)
    assert capsys.readouterr().err == (
        "note: the draft (135M) is larger than the target (50M): it would be slower than the target alone; swap "
        "-m and -md\n"
        "note: the draft (135M, 88 MB) has as many parameters as the target (135M, 98 MB): a smaller file runs "
        "little faster, and a draft pays only where it is much faster than its target\n")


def test_suggest_pair_takes_the_larger_file_as_target(test_model_path, q2k_draft_path, shallow_draft_path,
                                                     gemma_path, qwen_draft_path):
    assert suggest_pair([q2k_draft_path, gemma_path, shallow_draft_path, test_model_path, qwen_draft_path]) == (
        test_model_path, shallow_draft_path)
    # the target's own model in a smaller file is not suggested as its draft: it would not pay; of the two
    # files of the newest model, the larger is offered alone (not the newer Q2_K copy)
    assert suggest_pair([q2k_draft_path, gemma_path, test_model_path, qwen_draft_path]) == (test_model_path, None)
    assert suggest_pair([gemma_path, qwen_draft_path]) == (gemma_path, None)     # no pair: the newest alone
    assert suggest_pair([]) is None


def test_strings_longer_than_a_read_chunk_are_skipped_and_read(tmp_path):
    from desktop_app.models import gguf_info

    path = tmp_path / "long.gguf"
    long = "x" * (gguf_info._CHUNK + 12_345)
    tokens = ["<s>", "</s>", long, "é", *(f"t{i}" for i in range(5000)), long + "y"]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_array("test.strings", ["a", long, "b", long])       # skipped
    writer.add_token_list(tokens)                                    # kept
    writer.add_tokenizer_model("llama")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    info, read = read_vocabulary(path)
    assert read == [t.encode() for t in tokens]
    assert read_info(path) == info and info.vocab_size == len(tokens) and info.tokenizer_model == "llama"
