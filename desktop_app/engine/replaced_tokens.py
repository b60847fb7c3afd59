"""A reply's record of the tokens its prompt-lookup copies reached: kept, or replaced by another token.

A reply that renames a variable, or writes one-line code's ";" as line breaks, replaces the same
prompt token wherever a copy reaches it, and the keep rates by match length (auto_policy.KeepRates)
cannot see which token a copy is about to draft. So auto mode (auto_policy.py) keeps this record of
every token a copy drafted or would have drafted, judged from the text, and prices a token the reply
has replaced at its own record: the next copy through it stops before it. (A new user's request to
rename a variable in one-line code ran at 0.89x plain in the window, every copy failing at ";", ":"
or the old name.) The record is a reply's: auto clears it at every new reply.
"""
from __future__ import annotations

SEEN_WEIGHT = 0.5            # observations' worth of a copy's keep rate by match length in a replaced token's own
SEEN_DECAY = 0.7             # a token's record: the weight of its past at each new judgement of it


class ReplacedTokens:
    def __init__(self):
        self._record: dict[int, list[float]] = {}     # token -> [kept, tried], faded by SEEN_DECAY
        self._judged: set[tuple[int, int]] = set()    # (text position, token) already in the record

    def clear(self) -> None:
        self._record.clear()
        self._judged.clear()

    def judge(self, at: int, token: int, kept: bool) -> None:
        """A copy had `token` at text position `at`, and the text kept it or not. A place that two
        copies predicted alike counts once."""
        if (at, token) in self._judged:
            return
        self._judged.add((at, token))
        record = self._record.setdefault(token, [0.0, 0.0])
        record[0] = SEEN_DECAY * record[0] + kept
        record[1] = SEEN_DECAY * record[1] + 1

    def get(self, token: int) -> tuple[float, float] | None:
        """(kept, tried) of `token`, where the text has had another token in its place at least once;
        None where it was always kept or never copied."""
        record = self._record.get(token)
        return (record[0], record[1]) if record is not None and record[0] < record[1] else None


def keep_rate(p: float, record: tuple[float, float] | None) -> float:
    """A copied token's keep rate `p` (by match length), lowered towards its `record` (get()) with
    SEEN_WEIGHT observations' worth of `p` in it; never raised."""
    if record is None:
        return p
    return min(p, (record[0] + SEEN_WEIGHT * p) / (record[1] + SEEN_WEIGHT))
