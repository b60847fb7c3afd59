"""Can this draft model speculate for this target? pair_rules' rules, on the loaded vocabularies."""
from __future__ import annotations

from dataclasses import dataclass

from desktop_app.engine import backend
from desktop_app.engine.errors import IncompatiblePair
from desktop_app.engine.loading import load_model
from desktop_app.engine.pair_rules import TOKENIZERS_BY_TYPE, VOCAB_MAX_SIZE_DIFFERENCE, Vocabulary, first_difference

__all__ = ["IncompatiblePair", "Compatibility", "check_pair", "compare_vocabularies", "VOCAB_MAX_SIZE_DIFFERENCE"]

@dataclass(frozen=True)
class Compatibility:
    ok: bool
    reason: str = ""


def _vocabulary(model: backend.Model) -> Vocabulary:
    return Vocabulary(TOKENIZERS_BY_TYPE.get(model.vocab_type, str(model.vocab_type)), model.add_bos, model.bos,
                      model.add_eos, model.eos, model.n_vocab, model.token_text)


def compare_vocabularies(target: backend.Model, draft: backend.Model) -> Compatibility:
    """First difference between two vocabularies that rules out speculation (pair_rules), or ok."""
    differs = first_difference(_vocabulary(target), _vocabulary(draft))
    return Compatibility(False, differs) if differs else Compatibility(True)


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
