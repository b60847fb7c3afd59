"""Drafters propose the next few tokens; the target then checks them all in one batch.

One narrow lifecycle, in the spirit of llama.cpp's common/speculative.h: `draft(context, ...)`
proposes up to n tokens after `context` (the full token sequence so far), `rollback(n)` forgets
what the drafter evaluated past the first n tokens once the round's verdict is known.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from desktop_app.engine import backend
from desktop_app.engine.sampling import Distribution, SamplingParams, process, softmax_prob


@dataclass
class Proposal:
    """Drafted tokens x_1..x_γ, the draft distribution q_i each was drawn from (None: a point mass,
    as for copied tokens), and q_i(x_i) for display."""

    tokens: list[int] = field(default_factory=list)
    q: list[Distribution | None] = field(default_factory=list)
    q_token: list[float] = field(default_factory=list)
    n_steps: int = 0          # forward passes of a draft model spent on this proposal
    t_s: float = 0.0

    def truncated(self, n: int) -> "Proposal":
        return Proposal(self.tokens[:n], self.q[:n], self.q_token[:n], self.n_steps, self.t_s)


class NoDrafter:
    """Plain decoding through the same loop: never proposes anything."""

    name = "none"

    def draft(self, context, n_max, params, rng, p_min=0.0) -> Proposal:
        return Proposal()

    def rollback(self, n: int) -> None:
        pass


class ModelDrafter:
    """A small model with its own KV cache, drafting autoregressively with the target's sampling chain."""

    name = "model"

    def __init__(self, ctx: backend.Context):
        self.ctx = ctx

    def draft(self, context: Sequence[int], n_max: int, params: SamplingParams,
              rng: np.random.Generator, p_min: float = 0.0) -> Proposal:
        t0 = time.perf_counter()
        ctx = self.ctx
        n_max = min(n_max, ctx.n_ctx - len(context))
        out = Proposal()
        if n_max <= 0:
            return out
        ctx.sync(context, logits="last")
        out.n_steps = 1
        for i in range(n_max):
            logits = ctx.logits(-1)
            if params.greedy:
                x = int(np.argmax(logits))
                q_x, top = softmax_prob(logits, x)       # for display and p-min; q itself is a point mass
                q_dist = None
            else:
                q_dist = process(logits, params)
                x = q_dist.sample(rng.random())
                q_x, top = q_dist.prob(x), float(q_dist.probs.max())
            if p_min > 0.0 and top < p_min:
                break
            out.tokens.append(x)
            out.q.append(q_dist)
            out.q_token.append(q_x)
            if i + 1 < n_max:
                ctx.eval([x], logits="last")
                out.n_steps += 1
        out.t_s = time.perf_counter() - t0
        return out

    def rollback(self, n: int) -> None:
        self.ctx.truncate(n)


class PromptLookupDrafter:
    """Copies tokens from earlier in the context (prompt lookup decoding): find the longest earlier
    occurrence of the context's tail and propose the tokens that followed it. No second model."""

    name = "lookup"

    def __init__(self, ngram_min: int = 2, max_match: int = 64, max_candidates: int = 64):
        self.ngram_min = ngram_min
        self.max_match = max_match
        self.max_candidates = max_candidates
        self._tokens: list[int] = []
        self._index: dict[tuple[int, ...], list[int]] = {}   # n-gram -> positions right after it
        self.last_match_len = 0

    def _update_index(self, context: Sequence[int]) -> None:
        n = self.ngram_min
        common = backend.common_prefix(self._tokens, context)
        if common < len(self._tokens):                # the context changed under us: rebuild
            self._tokens, self._index = [], {}
        for end in range(max(n, len(self._tokens) + 1), len(context) + 1):
            key = tuple(context[end - n:end])
            self._index.setdefault(key, []).append(end)
        self._tokens = list(context)

    def find(self, context: Sequence[int]) -> tuple[int, int]:
        """(start of the continuation, match length) of the best earlier match; (-1, 0) if none."""
        self._update_index(context)
        n = self.ngram_min
        if len(context) <= n:
            return -1, 0
        tail = tuple(context[-n:])
        best_pos, best_len = -1, 0
        positions = self._index.get(tail, [])
        for pos in reversed(positions[-self.max_candidates - 1:]):
            if pos >= len(context):                     # the tail itself
                continue
            length = n
            while (length < self.max_match and pos - length - 1 >= 0
                   and context[pos - length - 1] == context[len(context) - length - 1]):
                length += 1
            if length > best_len:
                best_pos, best_len = pos, length
        return best_pos, best_len

    def draft(self, context: Sequence[int], n_max: int, params: SamplingParams,
              rng: np.random.Generator, p_min: float = 0.0) -> Proposal:
        t0 = time.perf_counter()
        pos, length = self.find(context)
        self.last_match_len = length
        out = Proposal()
        if pos >= 0 and n_max > 0:
            out.tokens = [int(t) for t in context[pos:pos + n_max]]
            out.q = [None] * len(out.tokens)
            out.q_token = [1.0] * len(out.tokens)
        out.t_s = time.perf_counter() - t0
        return out

    def rollback(self, n: int) -> None:
        pass
