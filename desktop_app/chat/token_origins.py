"""Where each token of a reply came from: a kept draft, the target's correction, a bonus token, or a
plain step — and in which round. Built live from the engine's events (a RoundEvent, then its
TokenEvents) or afterwards from the rounds the history stores (`RoundEvent.from_record`). No Qt here.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

from desktop_app.chat.reply_footer import DRAFTER_LABELS
from desktop_app.engine.events import RoundEvent, TokenKind

KIND_NAMES = {TokenKind.ACCEPTED: "kept draft", TokenKind.CORRECTION: "correction", TokenKind.BONUS: "bonus",
              TokenKind.PLAIN: "plain step"}


@dataclass(frozen=True)
class TokenOrigin:
    text: str
    kind: TokenKind
    round: int                 # the round's index (shown from 1, as the speculation panel numbers them)
    drafter: str               # "model", "lookup" or "none"
    position: int              # this token's place among the round's emitted tokens, from 1
    accepted: int              # drafts the round kept
    gamma: int                 # drafts the round proposed

    @property
    def tooltip(self) -> str:
        head = f"round {self.round + 1}"
        if self.kind == TokenKind.PLAIN or not self.gamma:
            return f"{head} · plain step"
        where = f"{head} · {DRAFTER_LABELS.get(self.drafter, self.drafter)}"
        if self.kind == TokenKind.ACCEPTED:
            return f"{where} · kept draft {self.position}/{self.gamma}"
        return f"{where} · {KIND_NAMES[self.kind]} after {self.accepted}/{self.gamma} drafts kept"


def origin(event: RoundEvent, i: int, text: str) -> TokenOrigin:
    """The origin of the round's i-th emitted token (from 0), showing `text`."""
    return TokenOrigin(text, event.kinds[i], event.index, event.drafter, i + 1, event.accepted, event.gamma)


def origins_from_rounds(records: Sequence[dict] | None, n_tokens: int | None = None) -> list[TokenOrigin]:
    """The reply's tokens from its stored rounds: their emitted pieces in order, without the end-of-
    generation token a round cut at "eos" ends with, and no more than the reply's `n_tokens` (a reply
    cut by a stop string keeps its last round whole). Texts are the token pieces; `align` fits them to
    the stored text."""
    out: list[TokenOrigin] = []
    for i, record in enumerate(records or ()):
        event = RoundEvent.from_record(i, record)
        n = event.n_reply_tokens
        out.extend(origin(event, j, event.emitted_text[j]) for j in range(min(n, len(event.kinds))))
    return out if n_tokens is None else out[:n_tokens]


def kind_counts(origins: Iterable[TokenOrigin]) -> dict[str, int]:
    return dict(Counter(o.kind.value for o in origins))


def align(origins: Sequence[TokenOrigin], text: str) -> tuple[list[tuple[str, TokenOrigin | None]], str]:
    """Fit the tokens' pieces to the reply's text: (piece of text, its token) in order, and the text
    after the last token (released at the end, or not from a token). A piece that does not match where
    it should — half of a character split across tokens — takes the text up to the next piece that
    matches, so the shown text is always exactly `text`."""
    spans: list[tuple[str, TokenOrigin | None]] = []
    pos = 0
    for k, o in enumerate(origins):
        piece = o.text
        if text.startswith(piece, pos):
            spans.append((piece, o))
            pos += len(piece)
            continue
        following = next((p.text for p in origins[k + 1:] if p.text and "\ufffd" not in p.text), None)
        end = text.find(following, pos, pos + len(piece) + len(following) + 8) if following else -1
        if end < 0:
            end = min(len(text), pos + len(piece.replace("\ufffd", "")))
        spans.append((text[pos:end], o))
        pos = end
    return spans, text[pos:]


MARKUP = frozenset("`*_~#>|[]()!\\-+=:")     # characters Markdown may hide: tried first where the texts part


def shown_positions(text: str, shown: str) -> list[int]:
    """Where each character of `text` (a reply's Markdown) is in `shown` (the text it renders to), or -1
    for one the rendering hides (a code fence, "**", a heading's "#"). Walks both in step. Where they
    differ: a MARKUP character of `text` is taken as hidden; else the fewest characters of either
    are skipped after which three agree (few of both, then up to 512 of `text` alone: a link's
    address, then up to 32 of both); else the character is taken as hidden. Any two whitespace
    characters agree (a soft line break renders as a space)."""
    def agree(i: int, j: int, n: int = 3) -> bool:     # the next n characters shown follow, with
        k = 0                                           # MARKUP in `text` skipped as the walk skips it
        while k < n and i < len(text) and j + k < len(shown):
            a, b = text[i], shown[j + k]
            if a == b or (a.isspace() and b.isspace()):
                k += 1
            elif a not in MARKUP:
                return False
            i += 1
        return k == n or j + k == len(shown)

    def both(most: int):
        return ((di, s - di) for s in range(1, most + 1) for di in range(s, -1, -1))

    out = [-1] * len(text)
    i = j = 0
    while i < len(text) and j < len(shown):
        a, b = text[i], shown[j]
        if a == b or (a.isspace() and b.isspace()):
            out[i] = j
            i, j = i + 1, j + 1
            continue
        if a in MARKUP:
            i += 1
            continue
        tries = (*both(8), *((di, 0) for di in range(9, 513)), *both(32))
        di, dj = next(((di, dj) for di, dj in tries if agree(i + di, j + dj)), (1, 0))
        i, j = i + di, j + dj
    return out
