"""Drafters propose the next few tokens; the target then checks them all in one batch.

Every drafter has the narrow lifecycle of llama.cpp's common/speculative.h (begin, draft, accept),
documented on `Drafter` with the names of the papers (Leviathan et al. 2022, Chen et al. 2023):
γ drafted tokens x_1..x_γ, the draft's distributions q_i they were drawn from, and the target's p_i
that judges them.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from desktop_app.engine import backend
from desktop_app.engine.costs import AcceptanceEstimate, CostModel
from desktop_app.engine.sampling import Distribution, SamplingParams, process, softmax_prob


@dataclass
class Proposal:
    """Drafted tokens x_1..x_γ, the draft distribution q_i each was drawn from (None: a point mass,
    as for copied tokens), and q_i(x_i) for display. No tokens: the round is a plain step."""

    tokens: list[int] = field(default_factory=list)
    q: list[Distribution | None] = field(default_factory=list)
    q_token: list[float] = field(default_factory=list)
    n_steps: int = 0          # forward passes of a draft model spent on this proposal
    t_s: float = 0.0

    def truncated(self, n: int) -> "Proposal":
        return Proposal(self.tokens[:n], self.q[:n], self.q_token[:n], self.n_steps, self.t_s)


class Drafter(ABC):
    """Proposes tokens for the target to check. One reply's lifecycle:

    begin(prompt) once, while the target reads the prompt; then every round draft(context, γ_max, ...)
    and, once the target's verdict is known, rollback(n) and observe(γ, n_accepted). The decoder owns
    the text: a drafter only ever sees it, whole, through `context`.
    """

    name: str = ""            # "model", "lookup" or "none": how rounds, costs and acceptance are labelled

    def begin(self, prompt: Sequence[int]) -> None:
        """Read the prompt (token ids, template applied) while the target processes it, so that the
        first round drafts at once. Called only when the reply goes on to decode. Default: nothing."""

    @abstractmethod
    def draft(self, context: Sequence[int], gamma_max: int, params: SamplingParams,
              rng: np.random.Generator, p_min: float = 0.0) -> Proposal:
        """Propose up to gamma_max tokens x_1..x_γ to follow `context` (the whole text so far, prompt
        included), each drawn from its q_i under `params`, the target's own sampling chain, with the
        reply's `rng`. A draft model stops early where its most likely token has probability below
        p_min. An empty proposal makes the round a plain step; raising backend.ContextFullError does too."""

    def can_draft(self, context: Sequence[int]) -> bool:
        """Whether draft() could propose anything after `context` at all (auto mode does not weigh a
        drafter that cannot). Default: yes."""
        return True

    def rollback(self, n: int) -> None:
        """The verdict kept the first n tokens of the context the last draft followed, plus the
        accepted drafts: forget anything evaluated past them. Default: nothing."""

    def observe(self, n_drafted: int, n_accepted: int) -> None:
        """The verdict on the last proposal: γ = n_drafted tokens were checked, the first n_accepted
        kept (0 drafted: the round was a plain step, or another drafter's). Default: nothing."""


class NoDrafter(Drafter):
    """Plain decoding through the same loop: never proposes anything."""

    name = "none"

    def draft(self, context, gamma_max, params, rng, p_min=0.0) -> Proposal:
        return Proposal()


class ModelDrafter(Drafter):
    """A small model with its own KV cache, drafting autoregressively with the target's sampling chain.

    The two vocabularies may differ in size (llama.cpp allows 128 ids; the extra ids are padding, as
    in Qwen2.5-7B's 152064 against Qwen2.5-0.5B's 151936). The draft then never proposes an id the
    target lacks: its logits are cut to the ids both have, and q lives on the target's vocabulary.
    And a context holding an id the draft lacks (a target's padding id, which sampling can emit) is
    one the draft cannot evaluate: it proposes nothing then, for the rest of that reply (plain steps)."""

    name = "model"

    def __init__(self, ctx: backend.Context, n_vocab_target: int | None = None):
        self.ctx = ctx
        self.n_vocab_target = ctx.n_vocab if n_vocab_target is None else n_vocab_target
        self.n_common = min(ctx.n_vocab, self.n_vocab_target)     # ids both models have

    def can_draft(self, context: Sequence[int]) -> bool:
        """Not once the text holds an id the draft's vocabulary lacks (a bigger target's padding id):
        from then on, for as long as the text keeps it (the rest of that conversation), this drafter
        proposes nothing."""
        return self.can_read(context)

    def can_read(self, tokens: Sequence[int]) -> bool:
        """Whether every id in `tokens` is in the draft's vocabulary. Only the part past what the
        draft's cache holds is checked: the cache never holds an id the draft lacks."""
        if self.n_vocab_target <= self.ctx.n_vocab:
            return True
        start = backend.common_prefix(self.ctx.tokens, tokens)
        return max(tokens[start:], default=-1) < self.ctx.n_vocab

    def begin(self, prompt: Sequence[int]) -> None:
        """Evaluate the prompt but its last token, as the target does, reusing the cached prefix: the
        first round then drafts at once, and its timing is a round's, not the prompt's."""
        if 1 < len(prompt) <= self.ctx.n_ctx and self.can_read(prompt[:-1]):
            self.ctx.sync(prompt[:-1], logits="none")   # (otherwise draft() proposes nothing)

    def draft(self, context: Sequence[int], gamma_max: int, params: SamplingParams,
              rng: np.random.Generator, p_min: float = 0.0) -> Proposal:
        t0 = time.perf_counter()
        ctx = self.ctx
        gamma_max = min(gamma_max, ctx.n_ctx - len(context))
        out = Proposal()
        if gamma_max <= 0 or not self.can_read(context):
            return out
        ctx.sync(context, logits="last")
        out.n_steps = 1
        for i in range(gamma_max):
            logits = ctx.logits(-1)[:self.n_common]       # [n_common]: a zero-copy view, no id the target lacks
            if params.greedy:
                x = int(np.argmax(logits))
                q_x, top = softmax_prob(logits, x)       # for display and p-min; q itself is a point mass
                q_dist = None
            else:
                q_dist = process(logits, params, self.n_vocab_target)    # q: [n_vocab_target]
                x = q_dist.sample(rng.random())
                q_x, top = q_dist.prob(x), float(q_dist.probs.max())
            if p_min > 0.0 and top < p_min:
                break
            out.tokens.append(x)
            out.q.append(q_dist)
            out.q_token.append(q_x)
            if i + 1 < gamma_max:
                ctx.eval([x], logits="last")
                out.n_steps += 1
        out.t_s = time.perf_counter() - t0
        return out

    def rollback(self, n: int) -> None:
        self.ctx.truncate(n)


def match_bucket(length: int) -> int:
    """Match lengths grouped for acceptance statistics: 2-3, 4-7, 8-15, 16+ tokens."""
    return 0 if length < 4 else 1 if length < 8 else 2 if length < 16 else 3


# Prior acceptance per match-length bucket, as pseudo-counts (kept, rejected): longer matches copy
# more reliably. Observations soon outweigh them; unused buckets drift back towards them.
LOOKUP_PRIORS = ((1.1, 0.9), (1.5, 0.5), (1.7, 0.3), (1.85, 0.15))
PRIOR_PULL = 0.02
# The longest draft after 0, 1, 2, 3+ fully kept lookup rounds in a row: a copy that has not yet
# proved itself costs at most a batch of 4 when it is wrong at once, and a confirmed one doubles
# (batches of 4, 8, 16, 32, which on this project's x86 machine verify for less than their neighbours).
LOOKUP_RAMP = (3, 7, 15, 31)


class PromptLookupDrafter(Drafter):
    """Copies tokens from earlier in the context (prompt lookup decoding): find the longest earlier
    occurrence of the context's tail and propose the tokens that followed it. No second model.

    Copying costs nothing, but checking costs a verify pass that grows with its batch; so the draft
    length follows the match: the acceptance measured for matches of this length (per bucket) and the
    measured verify cost of each batch size choose the length with the best expected tokens per
    second, and no draft at all when plain decoding is predicted to be faster. The length is also
    capped by LOOKUP_RAMP: a long match that stops matching at once (a prompt sentence the reply
    quotes, then leaves) would otherwise cost a long verify batch for nothing."""

    name = "lookup"

    def __init__(self, costs: CostModel | None = None, ngram_min: int = 2, max_match: int = 64,
                 max_candidates: int = 64):
        self.costs = costs
        self.ngram_min = ngram_min
        self.max_match = max_match
        self.max_candidates = max_candidates
        self._tokens: list[int] = []
        self._index: dict[tuple[int, ...], list[int]] = {}   # n-gram -> positions right after it
        self.last_match_len = 0
        self.buckets = [AcceptanceEstimate(*prior) for prior in LOOKUP_PRIORS]
        self.streak = 0                                   # fully kept lookup rounds in a row
        self._unchecked: tuple[int, int, list[int]] | None = None   # (context length, bucket, copy) not yet judged

    def _update_index(self, context: Sequence[int]) -> None:
        n = self.ngram_min
        common = backend.common_prefix(self._tokens, context)
        if common < len(self._tokens):                # the context changed under us: rebuild
            self._tokens, self._index = [], {}
            self.streak = 0
            self._unchecked = None                    # its copy can no longer be judged
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

    def draft_length(self, match_len: int, available: int) -> int:
        """How many of the `available` copied tokens are worth checking."""
        if self.costs is None or self.costs.verify_cost(1) is None:
            return min(available, match_len)
        bucket = self.buckets[match_bucket(match_len)]
        for b in self.buckets:                      # every consultation pulls unused buckets towards the prior
            if b is not bucket:
                b.pull_towards_prior(PRIOR_PULL)
        cap = LOOKUP_RAMP[min(self.streak, len(LOOKUP_RAMP) - 1)]
        return self.costs.best_gamma(bucket.alpha, min(available, cap), 0.0)

    @property
    def alpha(self) -> float:
        """The acceptance measured for matches as long as the last one found: the α of its copy."""
        return self.buckets[match_bucket(self.last_match_len)].alpha

    def draft(self, context: Sequence[int], gamma_max: int, params: SamplingParams,
              rng: np.random.Generator, p_min: float = 0.0) -> Proposal:
        """Copy what followed the best earlier match (q_i: a point mass on each copied token)."""
        t0 = time.perf_counter()
        pos, length = self.find(context)
        self._settle(context)
        self.last_match_len = length
        out = Proposal()
        if pos >= 0 and gamma_max > 0:
            available = min(gamma_max, len(context) - pos)
            g = self.draft_length(length, available)
            out.tokens = [int(t) for t in context[pos:pos + g]]
            out.q = [None] * len(out.tokens)
            out.q_token = [1.0] * len(out.tokens)
            self._unchecked = (len(context), match_bucket(length), [int(t) for t in context[pos:pos + available]])
        out.t_s = time.perf_counter() - t0
        return out

    def _settle(self, context: Sequence[int]) -> None:
        """Judge the copy found last round, if no verify pass judged it (too short to be worth
        checking, or auto mode chose another way), against the tokens the round produced. Free, and
        it keeps learning the acceptance of short matches: otherwise a bucket whose prior says "not
        worth checking" would never be checked, and never measured."""
        if self._unchecked is None:
            return
        start, bucket, copied = self._unchecked
        self._unchecked = None
        if len(context) <= start:                        # (find() dropped it if the context changed)
            return
        produced = context[start:start + len(copied)]
        kept = 0
        while kept < len(produced) and produced[kept] == copied[kept]:
            kept += 1
        self.buckets[bucket].record(kept, kept + (kept < len(produced)))

    def observe(self, n_drafted: int, n_accepted: int) -> None:
        if n_drafted:
            self._unchecked = None                       # the verify pass judged it
            self.buckets[match_bucket(self.last_match_len)].record(n_accepted, n_drafted)
            self.streak = self.streak + 1 if n_accepted == n_drafted else 0
