"""The pair rules on plain vocabulary facts (engine/pair_rules.py): no model needed."""
from desktop_app.engine.pair_rules import (TOKENIZERS_BY_HEADER, TOKENIZERS_BY_TYPE, VOCAB_MAX_SIZE_DIFFERENCE,
                                           Vocabulary, first_difference)


def _vocab(tokens, tokenizer="gpt2", add_bos=False, bos=1, add_eos=False, eos=2):
    return Vocabulary(tokenizer, add_bos, bos, add_eos, eos, len(tokens), tokens.__getitem__)


def test_both_sides_name_a_tokenizer_alike():
    # the header's names (model bar) and the loaded model's (engine) must say the same words
    assert set(TOKENIZERS_BY_HEADER.values()) == set(TOKENIZERS_BY_TYPE.values())


def test_the_first_difference_is_named():
    tokens = [b"<s>", b"</s>", b"a", b"b", b"c", b"hello", b"world"]
    assert first_difference(_vocab(tokens), _vocab(list(tokens))) is None
    assert first_difference(_vocab(tokens), _vocab(tokens, "llama-spm")) == \
        "the draft's tokenizer is llama-spm, the target's gpt2"
    assert first_difference(_vocab(tokens, add_bos=True), _vocab(tokens)) == \
        "they begin text differently (target: BOS 1, draft: no BOS)"
    assert first_difference(_vocab(tokens), _vocab(tokens, add_eos=True, eos=7)) == \
        "they end text differently (target: no EOS, draft: EOS 7)"
    assert first_difference(_vocab(tokens), _vocab(tokens[:5] + [b"hallo", b"world"])) == \
        "token 5 differs (target 'hello', draft 'hallo')"
    assert first_difference(_vocab(tokens), _vocab(tokens[:3] + [b"x", b"y"] + tokens[5:])) is None   # ids < 5
    padded = tokens + [b"<pad>"] * VOCAB_MAX_SIZE_DIFFERENCE
    assert first_difference(_vocab(padded), _vocab(tokens)) is None
    assert first_difference(_vocab(padded + [b"<pad>"]), _vocab(tokens)) == \
        f"their vocabularies have {len(padded) + 1:,} (target) and 7 (draft) tokens, more than 128 apart"
