"""Can this draft speculate for this target? Told from the two GGUF headers alone, before anything is
loaded, in one line for the model bar; and which of the files found on this machine make a pair.

The rules, and the words for why a pair fails them, are engine/pair_rules.py's: llama.cpp's, as the
engine applies them to the loaded vocabularies (engine/compat.py), which stays the authority. What the
header leaves out (add_bos, the BOS id...) takes llama.cpp's default for that tokenizer type. No
llama.cpp here: the window process never loads it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

from desktop_app.engine.pair_rules import TOKENIZERS_BY_HEADER, VOCAB_MAX_SIZE_DIFFERENCE, Vocabulary, first_difference
from desktop_app.models.gguf_info import GGUFError, GGUFInfo, read_info, read_vocabulary

MAX_FILES_PAIRED = 16               # suggest_pair reads at most this many headers (newest first)
# A draft with this share of the target's parameters or more will not pay, whatever its file: the
# test target's own model requantised to Q2_K (88 MB, the target's Q4_1 98 MB) steps at 0.70 of a
# target pass here and drafted at 0.42x plain. (Drafts made for a target are 0.3-0.55 of its size.)
DRAFT_PARAMS_MOST = 0.8

# llama.cpp's defaults where the header says nothing
_DEFAULTS = {   # model: (add_bos, add_eos, bos id, eos id), as llama.cpp's llama-vocab.cpp
    "llama": (True, False, 1, 2), "gpt2": (False, False, 11, 11), "bert": (True, False, 101, 102),
    "t5": (False, True, None, 1), "rwkv": (False, False, None, None),
}
CHOOSE = "choose a draft made for this target, or no draft to chat with the target alone"
SWAP = "swap Target and Draft"


@dataclass(frozen=True)
class PairVerdict:
    """ok: True (they pair), False (they cannot), None (cannot tell: a header could not be read)."""
    ok: bool | None
    text: str
    why: str = ""            # where ok is False: what differs ("the draft's tokenizer is llama-spm, ...")
    warning: str = ""        # where ok is True: why the pair will not pay (a draft not much smaller than its
                             # target: _no_smaller)


def tokenizer_name(info: GGUFInfo) -> str:
    model = info.tokenizer_model
    return TOKENIZERS_BY_HEADER.get(model, model) if model else "unknown"


def _specials(info: GGUFInfo) -> tuple[bool, bool, int | None, int | None]:
    add_bos, add_eos, bos, eos = _DEFAULTS.get(info.tokenizer_model or "", (False, False, None, None))
    return (add_bos if info.add_bos is None else info.add_bos, add_eos if info.add_eos is None else info.add_eos,
            bos if info.bos_id is None else info.bos_id, eos if info.eos_id is None else info.eos_id)


def _vocabulary(info: GGUFInfo, tokens: list[bytes]) -> Vocabulary:
    add_bos, add_eos, bos, eos = _specials(info)
    return Vocabulary(tokenizer_name(info), add_bos, bos, add_eos, eos, len(tokens), tokens.__getitem__)


def compare(t: GGUFInfo, t_tokens: list[bytes], d: GGUFInfo, d_tokens: list[bytes]) -> PairVerdict:
    """The verdict on target t and draft d, from their headers and token texts."""
    if not t_tokens or not d_tokens:
        which = "target's" if not t_tokens else "draft's"
        return PairVerdict(None, f"Cannot tell whether these two models pair: the {which} header has no vocabulary")
    differs = first_difference(_vocabulary(t, t_tokens), _vocabulary(d, d_tokens))
    if differs:
        return PairVerdict(False, f"These two cannot pair: {differs} — {CHOOSE}", differs)
    n_t, n_d = len(t_tokens), len(d_tokens)
    kind = tokenizer_name(t) + (f"/{t.tokenizer_pre}" if t.tokenizer_pre else "")
    if n_d == n_t:
        same = f"same tokenizer ({kind}, {n_t:,} tokens)"
    else:
        same = f"same tokenizer ({kind}); " + (f"draft vocabulary smaller ({n_d:,} of {n_t:,})" if n_d < n_t
                                               else f"draft vocabulary larger ({n_d:,}, the target's {n_t:,})") + ": fine"
    heavy = _no_smaller(t, d)
    if heavy:                          # (a warning, not "Pair OK … but": read as a pass, a new user's try)
        return PairVerdict(True, f"These two pair: {same} — but {heavy}", warning=heavy)
    return PairVerdict(True, f"Pair OK: {same}")


def _weight(i: GGUFInfo) -> tuple[int, int]:
    return i.n_params, i.file_size


PAYS_ONLY = "a draft pays only where it is much faster than its target"


def _with_file(i: GGUFInfo) -> str:
    return f"{i.params_text}, {i.file_size / 1e6:.0f} MB"


def _no_smaller(t: GGUFInfo, d: GGUFInfo, swap: str = SWAP) -> str:
    """Where draft d is not much smaller than target t, why that will not pay (their order swapped, one
    model twice, or the target's model in a smaller file), ending in `swap` where the draft is the
    larger and the target much smaller; "" otherwise. (The 1.5B model drafting for the 0.5B ran at
    0.39× plain, and nothing said why: a new user's try.)"""
    if _weight(d) < _weight(t):
        if d.n_params < DRAFT_PARAMS_MOST * t.n_params or not d.n_params:   # (not counted: nothing to say)
            return ""
        nearly = "" if d.params_text == t.params_text else "nearly "
        return (f"the draft ({_with_file(d)}) has {nearly}as many parameters as the target ({_with_file(t)}): "
                f"a smaller file runs little faster, and {PAYS_ONLY}")
    if os.path.realpath(d.path) == os.path.realpath(t.path):
        return f"the draft is the target itself: {PAYS_ONLY}"
    if _weight(d) == _weight(t):
        return f"the draft ({d.params_text}) is the target's size: {PAYS_ONLY}"
    size = (lambda i: i.params_text) if d.params_text != t.params_text else _with_file   # (as large in
                                                                           # parameters: by their files, as _weight)
    larger = f"the draft ({size(d)}) is larger than the target ({size(t)}): it would be slower than the target alone"
    if d.n_params and t.n_params >= DRAFT_PARAMS_MOST * d.n_params:   # (swapped, warned of as above)
        return f"{larger}, and so would the target drafting for it, as {PAYS_ONLY}"
    return f"{larger}; {swap}"


def draft_too_big(target_path: str, draft_path: str, swap: str = SWAP) -> str:
    """_no_smaller for two files, from their headers ("" where a header cannot be read)."""
    try:
        t, d = (_info(_stamp(os.fspath(p))) for p in (target_path, draft_path))
    except OSError:
        return ""
    return _no_smaller(t, d, swap) if t is not None and d is not None else ""


def _stamp(path: str) -> tuple[str, float, int]:
    st = os.stat(path)
    return path, st.st_mtime, st.st_size


@lru_cache(maxsize=16)
def _verdict(target: tuple[str, float, int], draft: tuple[str, float, int]) -> PairVerdict:
    out = []
    for role, (path, _, _) in (("target", target), ("draft", draft)):
        try:
            out.append(read_vocabulary(path))
        except GGUFError as exc:
            return PairVerdict(None, f"Cannot tell whether these two models pair: the {role}'s header cannot be read ({exc})")
    (t, t_tokens), (d, d_tokens) = out
    return compare(t, t_tokens, d, d_tokens)


def check_headers(target_path: str, draft_path: str) -> PairVerdict:
    """The verdict on a target and a draft file, from their headers alone (cached while the files
    stay the same); never raises."""
    try:
        return _verdict(_stamp(os.fspath(target_path)), _stamp(os.fspath(draft_path)))
    except OSError as exc:
        return PairVerdict(None, f"Cannot tell whether these two models pair: {exc.strerror or exc}")


@lru_cache(maxsize=256)
def _info(stamp: tuple[str, float, int]) -> GGUFInfo | None:
    try:
        return read_info(stamp[0])
    except GGUFError:
        return None


def _readable(files: Iterable[str], most: int | None = MAX_FILES_PAIRED) -> list[GGUFInfo]:
    """The headers of `files` (the first `most`; None: all) that can be read, in their order."""
    infos = []
    for path in list(files)[:most]:
        try:
            info = _info(_stamp(os.fspath(path)))
        except OSError:
            continue
        if info is not None:
            infos.append(info)
    return infos


def _smallest_draft(t: GGUFInfo, infos: list[GGUFInfo]) -> str | None:
    """The path of the smallest of `infos` that pairs with `t` and is much smaller (not one _no_smaller
    warns of), or None."""
    drafts = sorted((d for d in infos if d.path != t.path and d.tokenizer_model == t.tokenizer_model
                     and abs((d.vocab_size or 0) - (t.vocab_size or 0)) <= VOCAB_MAX_SIZE_DIFFERENCE
                     and not _no_smaller(t, d)), key=_weight)
    return next((d.path for d in drafts if check_headers(t.path, d.path).ok), None)


def draft_for(target: str, files: Iterable[str]) -> str | None:
    """The draft suggest_pair would give `target` among `files`, or None (none pairs, or it cannot be
    read): what the model bar chooses where a target is chosen that the draft chosen cannot pair with."""
    infos = [i for i in _readable(files, None) if i.path != target]     # (one choice: every file listed)
    try:
        t = _info(_stamp(target))
    except OSError:
        return None
    return _smallest_draft(t, infos) if t is not None else None


def suggest_pair(files: Iterable[str]) -> tuple[str, str | None] | None:
    """A target and a draft among `files` (newest first): the largest model that has a much smaller
    model of the same tokenizer that pairs with it (not one _no_smaller warns of), with the smallest
    such draft; else the newest readable model alone (its largest file, where the same model is there in
    several: the Q4_1 of a Q4_1 and its Q2_K copy); None when there is none. Reads headers only."""
    infos = _readable(files)
    if not infos:
        return None

    for t in sorted(infos, key=_weight, reverse=True):
        d = _smallest_draft(t, infos)
        if d is not None:
            return t.path, d
    newest = infos[0]                          # (of its model's files, the largest: not a Q2_K copy of a Q4)
    same = [i for i in infos if (i.n_params, i.vocab_size, i.tokenizer_model)
            == (newest.n_params, newest.vocab_size, newest.tokenizer_model)]
    return max(same, key=_weight).path, None
