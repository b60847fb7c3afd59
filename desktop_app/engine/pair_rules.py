"""Whether a draft can speculate for a target: llama.cpp's rules (common/speculative.cpp), on plain
facts of two vocabularies, with the reason a user reads when they cannot. One place for the rules and
their wording: the model bar applies them to the GGUF headers before anything loads
(models/pairing.py), the engine to the loaded vocabularies (compat.py), and both say the same.

No llama.cpp here: the window process imports this.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

VOCAB_MAX_SIZE_DIFFERENCE = 128     # vocabulary sizes may differ by this much (padding)
VOCAB_CHECK_START_TOKEN_ID = 5      # token texts must agree from this id on, up to the smaller vocabulary

# A tokenizer by the name people know it, from a GGUF header's tokenizer.ggml.model and from a loaded
# model's llama_vocab_type: one name for one tokenizer, whichever side reads it.
TOKENIZERS_BY_HEADER = {"no_vocab": "none", "llama": "llama-spm", "gpt2": "gpt2", "bert": "bert-wpm",
                        "t5": "t5-ugm", "rwkv": "rwkv", "plamo2": "plamo2"}
TOKENIZERS_BY_TYPE = {0: "none", 1: "llama-spm", 2: "gpt2", 3: "bert-wpm", 4: "t5-ugm", 5: "rwkv", 6: "plamo2"}


@dataclass(frozen=True)
class Vocabulary:
    """What the rules read of one model's vocabulary."""

    tokenizer: str                        # as people know it: "gpt2", "llama-spm", ...
    add_bos: bool
    bos: int | None
    add_eos: bool
    eos: int | None
    size: int
    token: Callable[[int], bytes]         # a token's stored text by id


def _show(token: bytes) -> str:
    text = token.decode("utf-8", errors="replace")
    return repr(text if len(text) <= 24 else text[:23] + "…")


def first_difference(target: Vocabulary, draft: Vocabulary) -> str | None:
    """The first difference that rules speculation out, as the end of a sentence ("…: the draft's
    tokenizer is llama-spm, the target's gpt2"); None when the draft can speculate for the target."""
    if target.tokenizer != draft.tokenizer:
        return f"the draft's tokenizer is {draft.tokenizer}, the target's {target.tokenizer}"

    def ends(kind: str, add_t: bool, id_t: int | None, add_d: bool, id_d: int | None) -> str | None:
        if add_t == add_d and (not add_t or id_t == id_d):
            return None
        verb = "begin" if kind == "BOS" else "end"
        return (f"they {verb} text differently (target: {f'{kind} {id_t}' if add_t else f'no {kind}'}, "
                f"draft: {f'{kind} {id_d}' if add_d else f'no {kind}'})")

    differs = (ends("BOS", target.add_bos, target.bos, draft.add_bos, draft.bos)
               or ends("EOS", target.add_eos, target.eos, draft.add_eos, draft.eos))
    if differs:
        return differs
    if abs(target.size - draft.size) > VOCAB_MAX_SIZE_DIFFERENCE:
        return (f"their vocabularies have {target.size:,} (target) and {draft.size:,} (draft) tokens, "
                f"more than {VOCAB_MAX_SIZE_DIFFERENCE} apart")
    for i in range(VOCAB_CHECK_START_TOKEN_ID, min(target.size, draft.size)):
        a, b = target.token(i), draft.token(i)
        if a != b:
            return f"token {i:,} differs (target {_show(a)}, draft {_show(b)})"
    return None
