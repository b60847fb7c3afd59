"""Does anything known before a short copy is checked tell the copies that will be kept from the others?

At every reply position of the recorded traces (tests/data/traces, greedy and sampled) where prompt
lookup finds a copy after a match of two or three tokens that is not a guess (Copy.ambiguous), as
replay asks for it: whether the copy's first token was kept, split by what auto could know for free
(the target's probability of the token just written, how often the match's rarest token and the
copied token had occurred in the text so far, how much of the reply just before a copy would have got
right), for the stories and the other prompts apart.
docs/auto-mode.md ("Results in replay", the ideas tried) quotes it. No model is loaded; a few seconds.

    python scripts/short_copy_signals.py
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from desktop_app.engine.auto_policy import Copy
from desktop_app.engine.drafters import PromptLookupDrafter
from desktop_app.engine.trace import TraceSet

TRACES = Path(__file__).resolve().parent.parent / "tests" / "data" / "traces"
COUNTS = ((1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, 10**9))
PROBABILITY = ((0.0, 0.5), (0.5, 0.8), (0.8, 0.95), (0.95, 1.01))
RECENT = 32                                  # reply tokens over which the share copies got right is taken
SHARE = ((0.0, 0.05), (0.05, 0.3), (0.3, 0.5), (0.5, 1.01))


def short_copies():
    """(is a story, the target's probability of the last token, count of the match's rarest token,
    count of the copied token, the share of the reply's last RECENT tokens a copy would have got right,
    whether the first copied token was kept), one per place."""
    for path in sorted(TRACES.glob("*.json")):
        if path.name.endswith("prompts.json") or path.name == "conversations.json":
            continue
        traces = TraceSet.load(str(path))
        for t in traces.traces:
            lookup = PromptLookupDrafter(ends=traces.ends.__contains__ if traces.ends else None)
            right: list[bool] = []                       # per reply position: a copy found there got it right
            for i in range(1, len(t.reply)):
                context = list(t.prompt) + list(t.reply[:i])
                copy = Copy.find(lookup, context, 32, i)
                recent = right[-RECENT:]
                right.append(copy is not None and copy.tokens[0] == t.reply[i])
                if copy is None or copy.match_len > 3 or copy.ambiguous:
                    continue
                seen = Counter(context)
                yield ("story" in t.name, t.confidence[i - 1], min(seen[x] for x in context[-copy.match_len:]),
                       seen[copy.tokens[0]], sum(recent) / len(recent) if recent else 0.0, copy.tokens[0] == t.reply[i])


def _split(rows, key, bins) -> str:
    cells = []
    for lo, hi in bins:
        part = [r for r in rows if lo <= key(r) <= hi] if isinstance(lo, int) else [r for r in rows if lo <= key(r) < hi]
                                                   # (counts: both ends in; probabilities: the upper out)
        if part:
            kept = sum(r[-1] for r in part)
            cells.append(f"{lo}–{hi if hi < 10**9 else '…'}: {kept}/{len(part)} = {kept / len(part):.2f}")
    return "; ".join(cells)


def main() -> None:
    rows = list(short_copies())
    for label, part in (("stories", [r for r in rows if r[0]]), ("other prompts", [r for r in rows if not r[0]])):
        kept = sum(r[-1] for r in part)
        print(f"{label}: {kept} of {len(part)} first tokens kept ({kept / len(part):.2f})")
        print("  by the target's probability of the last token:", _split(part, lambda r: r[1], PROBABILITY))
        print("  by the count of the match's rarest token:     ", _split(part, lambda r: r[2], COUNTS))
        print("  by the count of the copied token:             ", _split(part, lambda r: r[3], COUNTS))
        print(f"  by the share of the last {RECENT} reply tokens copies got right:", _split(part, lambda r: r[4], SHARE))


if __name__ == "__main__":
    main()
