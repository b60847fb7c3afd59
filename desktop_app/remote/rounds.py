"""Rebuilding speculative rounds from what llama-server streams.

With `"timings_per_token": true`, every streamed chunk of /v1/chat/completions carries the reply's
cumulative timings: `predicted_n` (tokens generated), `predicted_ms`, and, once the server has
drafted, `draft_n` (tokens drafted) and `draft_n_accepted` (drafted tokens kept). The server
(tools/server/server-context.cpp) counts a round's drafts when it drafts them and its kept ones when it
has verified them, takes the round's time then, and emits the round's k + 1 tokens (k kept drafts,
then the target's own token) one chunk each. So:

- a change of the pair (draft_n, draft_n_accepted) opens a round of d = Δdraft_n drafted and
  k = Δdraft_n_accepted kept; its first k + 1 tokens are that round's, and it is complete (and
  handed on at once) when they have come;
- a token under an unchanged pair, with no round waiting for tokens, is a plain step (the server
  drafted nothing), handed on at once;
- a chunk's Δpredicted_ms is the time of the round or plain step its first new token opens;
- a reply's last round may be cut short by its end (an end-of-generation token, a stop string);
  the chunk that brings the reply to max_tokens tokens ends it, so its round is handed on marked
  "max_tokens" (the server's own last chunk, which says "length", brings no token);
- an end-of-generation token is counted (predicted_n) but has no text: it stays the last token of
  its round, marked "eos", as in a local reply.

What the stream does not say: the token ids, and the text of the drafts the target rejected (the
rounds carry -1 for every id and "?" for those texts), nor how a round's time splits between drafting
and verifying (a round's time is its whole, t_round_s, with t_draft_s = t_verify_s = 0), nor what plain
decoding would cost there. The server sends no chunk for a token whose text it holds back (a split
UTF-8 character, a possible stop string); the next chunk then brings several tokens, whose text is
given to the last of them, and whose first ones finish the round still waiting for tokens.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from desktop_app.engine.events import RoundEvent, TokenKind

UNKNOWN_ID = -1
UNKNOWN_TEXT = "?"
DRAFTER = "server"


@dataclass
class _Round:
    """A drafting round waiting for its k + 1 tokens."""

    drafted: int
    kept: int
    texts: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return len(self.texts) >= self.kept + 1


class RoundRebuilder:
    """Feed it every streamed chunk (`feed`), then the end (`finish`); each returns the rounds completed
    by then, numbered from 0, as the engine's RoundEvents."""

    def __init__(self, max_tokens: int | None = None):
        self.max_tokens = max_tokens
        self.rounds: list[RoundEvent] = []
        self._pair = (0, 0)
        self._n = 0                     # predicted_n so far
        self._ms = 0.0                  # predicted_ms so far
        self._open: _Round | None = None
        self._text = ""                 # text of chunks without timings, waiting for the next that has them

    def feed(self, text: str, timings: dict | None, end: str = "") -> list[RoundEvent]:
        self._text += text
        if not timings or "predicted_n" not in timings:
            return []
        pair = (int(timings.get("draft_n", 0)), int(timings.get("draft_n_accepted", 0)))
        n, ms = int(timings["predicted_n"]), float(timings.get("predicted_ms", self._ms))
        new = max(0, n - self._n)
        seconds = max(0.0, ms - self._ms) / 1000
        texts = [""] * (new - 1) + [self._text] if new else []
        if end == "eos" and new >= 2:                 # held-back text released at the end: it is the tokens'
            texts = [""] * (new - 2) + [self._text, ""]   # before the end-of-generation token, which has none
        if new:
            self._text = ""
        self._n, self._ms = n, ms
        out: list[RoundEvent] = []
        if pair != self._pair:
            # tokens the last round still waits for came first (their chunks were held back)
            while texts and self._open is not None and not self._open.complete:
                self._open.texts.append(texts.pop(0))
            if self._open is not None:                # complete now, or cut short (it should not be)
                out.append(self._emit(self._open))
            self._open = _Round(pair[0] - self._pair[0], pair[1] - self._pair[1], seconds=seconds)
            self._pair = pair
            seconds = 0.0
        for i, piece in enumerate(texts):
            if self._open is not None:
                self._open.texts.append(piece)
                self._open.seconds += seconds if i == 0 else 0.0
                if self._open.complete:
                    out.append(self._emit(self._open))
                    self._open = None
            else:
                out.append(self._plain(piece, seconds if i == 0 else 0.0))
        if not end and self.max_tokens and n >= self.max_tokens:
            end = "max_tokens"                        # the last token the reply has room for
            if self._open is not None:                # (a round cut short by the limit)
                out.append(self._emit(self._open, end))
                self._open = None
                return out
        if end and out and self._open is None:
            out[-1] = self._mark_end(out[-1], end)
        return out

    def finish(self, timings: dict | None, end: str = "") -> list[RoundEvent]:
        """The reply ended (`end`: "eos", "max_tokens", or "" when unknown); `timings`: the final
        chunk's, if it had any. A round still waiting for tokens was cut short by the end."""
        out = self.feed("", timings, end) if timings else []
        if self._text:                                # text after the last timed chunk
            if self._open is not None:
                self._open.texts.append(self._text)
            else:
                out.append(self._plain(self._text, 0.0))
            self._text = ""
        if self._open is not None:
            out.append(self._emit(self._open, end))
            self._open = None
        elif end and out and not out[-1].end:
            out[-1] = self._mark_end(out[-1], end)
        return out

    # -- events
    def _emit(self, r: _Round, end: str = "") -> RoundEvent:
        own = r.texts[:r.kept + 1]
        kinds = [TokenKind.ACCEPTED] * min(r.kept, len(own))
        if len(own) > r.kept:
            kinds.append(TokenKind.BONUS if r.kept == r.drafted else TokenKind.CORRECTION)
        drafted_text = tuple(own[:r.kept]) + (UNKNOWN_TEXT,) * (r.drafted - min(r.kept, len(own)))
        return self._event(r.drafted, r.kept, own, kinds, r.seconds, end, drafted_text)

    def _plain(self, text: str, seconds: float) -> RoundEvent:
        return self._event(0, 0, [text], [TokenKind.PLAIN], seconds, "", ())

    def _event(self, drafted: int, kept: int, texts: list[str], kinds: list[TokenKind], seconds: float,
               end: str, drafted_text: tuple[str, ...]) -> RoundEvent:
        event = RoundEvent(index=len(self.rounds), drafter=DRAFTER if drafted else "none",
                           drafted=(UNKNOWN_ID,) * drafted, drafted_text=drafted_text, q=(), p=(),
                           accepted=kept, emitted=(UNKNOWN_ID,) * len(texts), emitted_text=tuple(texts),
                           kinds=tuple(kinds), target_top=(), t_draft_s=0.0, t_verify_s=0.0,
                           t_round_s=seconds, n_past=0, end=end)
        self.rounds.append(event)
        return event

    def _mark_end(self, event: RoundEvent, end: str) -> RoundEvent:
        marked = replace(event, end=end)
        self.rounds[event.index] = marked
        return marked
