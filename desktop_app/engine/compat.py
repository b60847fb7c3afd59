"""Can this draft model speculate for this target? The rules llama.cpp applies, read from vocabularies only."""
from __future__ import annotations

from dataclasses import dataclass

from desktop_app.engine import backend
from desktop_app.engine.errors import IncompatiblePair
from desktop_app.engine.loading import load_model

__all__ = ["IncompatiblePair", "Compatibility", "check_pair", "compare_vocabularies", "VOCAB_MAX_SIZE_DIFFERENCE"]

VOCAB_MAX_SIZE_DIFFERENCE = 128     # as llama.cpp's common/speculative.cpp
VOCAB_CHECK_START_TOKEN_ID = 5


VOCAB_TYPE_NAMES = {0: "none", 1: "SPM", 2: "BPE", 3: "WPM", 4: "UGM", 5: "RWKV", 6: "PLaMo-2"}


@dataclass(frozen=True)
class Compatibility:
    ok: bool
    reason: str = ""


def compare_vocabularies(target: backend.Model, draft: backend.Model) -> Compatibility:
    """First difference between two vocabularies that rules out speculation, or ok."""
    if target.vocab_type != draft.vocab_type:
        names = VOCAB_TYPE_NAMES
        return Compatibility(False, f"vocabulary types differ (target {names.get(target.vocab_type, target.vocab_type)}, "
                                    f"draft {names.get(draft.vocab_type, draft.vocab_type)})")
    if target.add_bos != draft.add_bos or (target.add_bos and target.bos != draft.bos):
        return Compatibility(False, f"BOS differs (target add={target.add_bos} id={target.bos}, "
                                    f"draft add={draft.add_bos} id={draft.bos})")
    if target.add_eos != draft.add_eos or (target.add_eos and target.eos != draft.eos):
        return Compatibility(False, f"EOS differs (target add={target.add_eos} id={target.eos}, "
                                    f"draft add={draft.add_eos} id={draft.eos})")
    n_t, n_d = target.n_vocab, draft.n_vocab
    if abs(n_t - n_d) > VOCAB_MAX_SIZE_DIFFERENCE:
        return Compatibility(False, f"vocabulary sizes differ by more than {VOCAB_MAX_SIZE_DIFFERENCE} "
                                    f"(target {n_t}, draft {n_d})")
    for token in range(VOCAB_CHECK_START_TOKEN_ID, min(n_t, n_d)):
        a, b = target.token_text(token), draft.token_text(token)
        if a != b:
            return Compatibility(False, f"token {token} differs (target {a!r}, draft {b!r})")
    return Compatibility(True)


def check_pair(target_path: str, draft_path: str) -> Compatibility:
    """Compare two GGUF files' vocabularies (loaded vocabulary-only, so this is fast)."""
    target = load_model(target_path, vocab_only=True)
    try:
        draft = load_model(draft_path, vocab_only=True)
        try:
            return compare_vocabularies(target, draft)
        finally:
            draft.close()
    finally:
        target.close()
