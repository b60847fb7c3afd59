"""The lookup ceiling: how fast prompt lookup could be on a given reply if it knew the future.

Prompt lookup can only copy what came before, and every copy it checks costs a verify pass that
grows with its batch. Given the reply plain decoding produced, we know, for each place in it, the
longest run that some earlier occurrence of the last `ngram_min` tokens would have copied correctly.
A lookup that always chose exactly that copy (or none) and never drafted a token the target then
rejects is the best any n-gram copier can do. Its speed-up over plain decoding, priced with the
measured verify cost of each batch size, is the ceiling: a measured lookup far below it is choosing
badly; one close to it is held back by the text and the hardware, not by its policy.
"""
from __future__ import annotations

from typing import Callable, Sequence


def copyable_runs(prompt: Sequence[int], reply: Sequence[int], ngram_min: int = 2) -> list[int]:
    """For each reply position i: how many of reply[i:] the best earlier occurrence of the
    `ngram_min` tokens before position i would copy correctly (0 where none would).
    "Earlier" means anywhere in prompt + reply[:i]. A copy that reaches the end of the text known
    at position i goes on as an overlapping copy (the text repeating with the period of the
    distance back), as a lookup's copy of a loop does."""
    text = list(prompt) + list(reply)
    start = len(prompt)
    index: dict[tuple[int, ...], list[int]] = {}     # n-gram -> positions right after it
    for end in range(ngram_min, start):
        index.setdefault(tuple(text[end - ngram_min:end]), []).append(end)
    runs = []
    for pos in range(start, len(text)):
        best = 0
        if pos >= ngram_min:
            tail = tuple(text[pos - ngram_min:pos])
            for src in index.get(tail, []):
                n = 0
                # past pos, text[src + n] is what the copy just copied correctly: a loop's overlapping copy
                while pos + n < len(text) and text[src + n] == text[pos + n]:
                    n += 1
                best = max(best, n)
            index.setdefault(tail, []).append(pos)
        runs.append(best)
    return runs


def lookup_ceiling(prompt: Sequence[int], reply: Sequence[int], verify_cost: Callable[[int], float | None],
                   draft_max: int, ngram_min: int = 2) -> float | None:
    """The best speed-up over plain decoding that an n-gram copier with drafts of at most
    `draft_max` tokens could reach on `reply`: every round either decodes one token plainly
    (verify_cost(1)) or checks a copy of which the target keeps k tokens and adds its own (k + 1
    tokens). Such a round costs verify_cost(g + 1) for the g ≥ k tokens checked, and where a longer
    batch happens to cost less than a shorter one (it can, on a CPU), the copier is granted the
    cheaper. The cheapest way through the reply, by dynamic programming, against n plain passes.
    None if the costs are not measured."""
    n = len(reply)
    single = verify_cost(1)
    if not n or not single:
        return None
    costs = [single]
    for g in range(1, draft_max + 1):
        c = verify_cost(g + 1)
        if c is None:
            return None
        costs.append(c)
    for k in range(draft_max - 1, 0, -1):   # keeping k of a longer copy: the cheapest batch of k + 1 or more
        costs[k] = min(costs[k], costs[k + 1])
    runs = copyable_runs(prompt, reply, ngram_min)
    best = [0.0] * (n + 1)             # best[i]: least time to produce reply[i:]
    for i in range(n - 1, -1, -1):
        t = single + best[i + 1]
        for k in range(1, min(runs[i], draft_max, n - i - 1) + 1):
            t = min(t, costs[k] + best[i + k + 1])
        best[i] = t
    return n * single / best[0]
