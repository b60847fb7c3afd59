"""Rebuilding speculative rounds from what llama-server streams.

With `"timings_per_token": true`, every streamed chunk of /v1/chat/completions carries the reply's
cumulative timings: `predicted_n` (tokens generated), and, once the server has drafted,
`draft_n` (tokens drafted) and `draft_n_accepted` (drafted tokens kept). The server counts a round's
drafts when it drafts them and its kept ones when it has verified them, then emits the round's
k + 1 tokens (k kept drafts, then the target's own token) one chunk each. So:

- a change of the pair (draft_n, draft_n_accepted) opens a round of d = Δdraft_n drafted and
  k = Δdraft_n_accepted kept, whose first k + 1 tokens are that round's;
- tokens after those, before the pair changes again, are plain steps (the server drafted nothing);
- a reply's last round may be cut short by its end (an end-of-generation token, a stop string).

What the stream does not say: the token ids, and the text of the drafts the target rejected
(the rounds carry -1 for every id and "?" for those texts), nor how a round's time splits between
drafting and verifying (a round's time is its whole: t_round_s, with t_draft_s = t_verify_s = 0), nor
what plain decoding would cost there. A chunk whose text the server held back
(a stop string's prefix, a split UTF-8 character) arrives with the next one, so its tokens' text is
given to the last of them. Two rounds whose chunks were all held back would arrive as one.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from desktop_app.engine.events import RoundEvent, TokenKind

UNKNOWN_ID = -1
UNKNOWN_TEXT = "?"
DRAFTER = "server"


@dataclass
class _Run:
    """Tokens since the pair last changed: a round of `drafted`/`kept` (0/0: plain steps only)."""

    drafted: int
    kept: int
    texts: list[str] = field(default_factory=list)     # one per token
    seconds: float = 0.0


class RoundRebuilder:
    """Feed it every streamed chunk (`feed`), then the end (`finish`); each returns the rounds it closed,
    numbered from 0, as the engine's RoundEvents."""

    def __init__(self):
        self.rounds: list[RoundEvent] = []
        self._pair = (0, 0)
        self._n = 0                     # predicted_n so far
        self._ms = 0.0                  # predicted_ms so far
        self._run = _Run(0, 0)
        self._text = ""                 # text of chunks without timings, waiting for the next that has them

    @property
    def n_tokens(self) -> int:
        return self._n

    def feed(self, text: str, timings: dict | None) -> list[RoundEvent]:
        self._text += text
        if not timings or "predicted_n" not in timings:
            return []
        pair = (int(timings.get("draft_n", 0)), int(timings.get("draft_n_accepted", 0)))
        n, ms = int(timings["predicted_n"]), float(timings.get("predicted_ms", self._ms))
        closed = []
        if pair != self._pair:
            closed = self._close()
            self._run = _Run(pair[0] - self._pair[0], pair[1] - self._pair[1])
            self._pair = pair
        new = n - self._n
        if new > 0:
            self._run.texts += [""] * (new - 1) + [self._text]
            self._text = ""
        self._run.seconds += max(0.0, ms - self._ms) / 1000
        self._n, self._ms = n, ms
        return closed

    def finish(self, timings: dict | None, end: str = "") -> list[RoundEvent]:
        """The reply ended (`end`: "eos", "max_tokens", or "" when unknown); `timings`: the final
        chunk's, if it had any. Closes the last run."""
        closed = self.feed("", timings) if timings else []
        if self._text and self._run.texts:
            self._run.texts[-1] += self._text
            self._text = ""
        return closed + self._close(end)

    def _close(self, end: str = "") -> list[RoundEvent]:
        run, out = self._run, []
        if not run.texts:
            return out
        per_token = run.seconds / len(run.texts)
        texts = list(run.texts)
        if run.drafted:
            own = texts[:run.kept + 1]                 # the round's: its kept drafts, then the target's token
            texts = texts[run.kept + 1:]
            kinds = [TokenKind.ACCEPTED] * run.kept
            if len(own) > run.kept:
                kinds.append(TokenKind.BONUS if run.kept == run.drafted else TokenKind.CORRECTION)
            kinds = kinds[:len(own)]
            drafted_text = tuple(own[:run.kept]) + (UNKNOWN_TEXT,) * (run.drafted - min(run.kept, len(own)))
            out.append(self._event(run.drafted, run.kept, own, kinds, per_token * len(own),
                                   end if not texts else "", drafted_text))
        for i, text in enumerate(texts):                # plain steps
            out.append(self._event(0, 0, [text], [TokenKind.PLAIN], per_token, end if i == len(texts) - 1 else "", ()))
        self._run = _Run(0, 0)
        return out

    def _event(self, drafted: int, kept: int, texts: list[str], kinds: list[TokenKind], seconds: float,
               end: str, drafted_text: tuple[str, ...]) -> RoundEvent:
        event = RoundEvent(index=len(self.rounds), drafter=DRAFTER if drafted else "none",
                           drafted=(UNKNOWN_ID,) * drafted, drafted_text=drafted_text, q=(), p=(),
                           accepted=kept, emitted=(UNKNOWN_ID,) * len(texts), emitted_text=tuple(texts),
                           kinds=tuple(kinds), target_top=(), t_draft_s=0.0, t_verify_s=0.0,
                           t_round_s=seconds, n_past=0, end=end)
        self.rounds.append(event)
        return event
