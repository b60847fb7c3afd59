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
from typing import Callable, Sequence

import numpy as np

from desktop_app.engine import backend
from desktop_app.engine.costs import PREFILL_MIN
from desktop_app.engine.sampling import Distribution, SamplingParams, process, softmax_prob

CATCH_UP_MIN = PREFILL_MIN   # tokens behind from which ModelDrafter.catch_up reads them in a pass of its own


@dataclass
class Proposal:
    """Drafted tokens x_1..x_γ, the draft distribution q_i each was drawn from (None: a point mass,
    as for copied tokens), and q_i(x_i) for display. No tokens: the round is a plain step."""

    tokens: list[int] = field(default_factory=list)
    q: list[Distribution | None] = field(default_factory=list)
    q_token: list[float] = field(default_factory=list)
    n_steps: int = 0          # forward passes of a draft model spent on this proposal
    t_s: float = 0.0
    t_read_s: float = 0.0     # of t_s, what its first pass spent reading text it was behind on (not a step)

    @classmethod
    def copied(cls, tokens: Sequence[int]) -> "Proposal":
        """Tokens copied from the text: each q_i a point mass on x_i."""
        return cls(list(tokens), [None] * len(tokens), [1.0] * len(tokens))


class Drafter(ABC):
    """Proposes tokens for the target to check. One reply's lifecycle:

    begin(prompt) once, while the target reads the prompt; then every round draft(context, γ_max, ...)
    and, once the target's verdict is known, rollback(n) and observe(γ, n_accepted). The decoder owns
    the text: a drafter only ever sees it, whole, through `context`.
    """

    name: str = ""            # "model", "lookup" or "none": how rounds, costs and acceptance are labelled

    def begin(self, prompt: Sequence[int], stop: Callable[[], bool] | None = None) -> None:
        """Read the prompt (token ids, template applied) while the target processes it, so that the
        first round drafts at once. Called only when the reply goes on to decode. `stop`: a cancel
        check for the pass (backend.Context.eval). Default: nothing."""

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
    one the draft cannot evaluate: it proposes nothing then, for the rest of that reply (plain steps).

    A draft ends with the first end-of-generation token it proposes (`ends`, the target's): if the
    target keeps it the reply ends there, and if not, nothing after it can be kept either. (It drafted
    on through "<|im_end|>", a line break and "<|endoftext|>": draft steps, and a wider check, spent on
    tokens that could never be kept; a user's try.)"""

    name = "model"

    def __init__(self, ctx: backend.Context, n_vocab_target: int | None = None,
                 ends: Callable[[int], bool] | None = None):
        self.ctx = ctx
        self.n_vocab_target = ctx.n_vocab if n_vocab_target is None else n_vocab_target
        self.n_common = min(ctx.n_vocab, self.n_vocab_target)     # ids both models have
        self.ends = ends
        self.step_s: float | None = None     # the last step's time: the first pass's share that is not reading

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

    def begin(self, prompt: Sequence[int], stop: Callable[[], bool] | None = None) -> None:
        """Evaluate the prompt but its last token, as the target does, reusing the cached prefix: the
        first round then drafts at once, and its timing is a round's, not the prompt's. `stop`: as
        backend.Context.eval's."""
        if 1 < len(prompt) <= self.ctx.n_ctx and self.can_read(prompt[:-1]):
            self.ctx.sync(prompt[:-1], logits="none", stop=stop)   # (otherwise draft() proposes nothing)

    def behind(self, context: Sequence[int]) -> int:
        """Tokens of `context` (all but its last) this draft has not read: what catching up costs."""
        return max(0, len(context) - 1 - backend.common_prefix(self.ctx.tokens, context))

    def catch_up(self, context: Sequence[int], stop: Callable[[], bool] | None = None) -> int:
        """Read what it has not of `context` but its last token, in one batched pass, as begin() reads
        a prompt: auto mode's lazy prefill, the first time it drafts with the model in a reply.
        Returns the number of tokens read. `stop`: as begin()'s. Fewer than CATCH_UP_MIN behind
        (its own last draft, kept, after a round of its own; the few tokens of a plain or copied
        round) are left to draft(), whose first pass reads them with the text's last token, as in
        fixed mode: read apart, one token cost 21 + 34 ms where the first pass reading it costs 43
        (a 2-core Xeon), in nearly every model round. That pass's share beyond a step is the
        proposal's t_read_s."""
        n = self.behind(context)
        if n >= CATCH_UP_MIN and len(context) <= self.ctx.n_ctx and self.can_read(context[:-1]):
            self.ctx.sync(context[:-1], logits="none", stop=stop)
            return n
        return 0

    def draft(self, context: Sequence[int], gamma_max: int, params: SamplingParams,
              rng: np.random.Generator, p_min: float = 0.0) -> Proposal:
        t0 = time.perf_counter()
        ctx = self.ctx
        gamma_max = min(gamma_max, ctx.n_ctx - len(context))
        out = Proposal()
        if gamma_max <= 0 or not self.can_read(context):
            return out
        behind = ctx.sync(context, logits="last") - 1   # (read besides the text's last token)
        t_first = time.perf_counter() - t0
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
            if self.ends is not None and self.ends(x):
                break
            if i + 1 < gamma_max:
                ctx.eval([x], logits="last")
                out.n_steps += 1
        out.t_s = time.perf_counter() - t0
        if out.n_steps > 1:                              # a step: a one-token pass, as this round timed them
            self.step_s = (out.t_s - t_first) / (out.n_steps - 1)
        elif not behind:
            self.step_s = t_first
        if behind and self.step_s is not None:           # (its first pass read `behind` tokens more than a step)
            out.t_read_s = max(0.0, t_first - self.step_s)
        return out

    def rollback(self, n: int) -> None:
        self.ctx.truncate(n)


class PromptLookupDrafter(Drafter):
    """Copies tokens from earlier in the context (prompt lookup decoding): find the longest earlier
    occurrence of the context's tail (at least `ngram_min` tokens) and propose the tokens that
    followed it. No second model, and copying costs nothing.

    As a fixed setting it copies up to γ tokens whenever there is a match, as llama.cpp's
    ngram-simple does. Auto mode instead weighs each copy (auto_policy.py): it takes the whole copy
    (copy()) and decides how much of it is worth a verify batch from the acceptance measured for
    matches of that length and this machine's verify costs."""

    name = "lookup"

    def __init__(self, ngram_min: int = 2, max_match: int = 64, max_candidates: int = 64,
                 ends: Callable[[int], bool] | None = None):
        self.ngram_min = ngram_min
        self.max_match = max_match
        self.max_candidates = max_candidates
        self.ends = ends            # the target's end-of-generation tokens (Model.is_eog): a copy stops at one
        self._tokens: list[int] = []
        self._index: dict[tuple[int, ...], list[int]] = {}   # n-gram -> positions right after it

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
        """(start of the continuation, match length) of the best earlier match; (-1, 0) if none.
        The best is the longest; among equally long ones, the most recent."""
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

    def followers(self, context: Sequence[int], at_most: int = 2) -> int:
        """How many different tokens followed the earlier occurrences of the context's last
        `ngram_min` tokens (0: none occurred), counted up to `at_most`. Above 1 a short match is a
        guess between them: after such 2- and 3-token matches the target kept the copy's first token
        0.15 and 0.08 of the time on the recorded traces, against 0.54 and 0.76 after matches whose
        tokens had always been followed by the same one (docs/auto-mode.md)."""
        self._update_index(context)
        n = self.ngram_min
        if len(context) <= n:
            return 0
        seen: set[int] = set()
        for p in reversed(self._index.get(tuple(context[-n:]), [])):
            if p < len(context):
                seen.add(context[p])
                if len(seen) >= at_most:
                    break
        return len(seen)

    def copy(self, context: Sequence[int], gamma_max: int) -> tuple[list[int], int]:
        """(up to gamma_max tokens that followed the best earlier match, its match length);
        ([], 0) when there is none.

        A match that reaches back over its own continuation (the text's tail repeats with period
        d = the distance back to it, for at least one whole period) is copied on past the end of
        the text, period after period, as an overlapping LZ77 copy: a reply caught in a loop gets
        copies of up to gamma_max tokens, not of d.

        A copy ends with the first end-of-generation token in it (`ends`): the reply ends there, so
        nothing after it can be kept. Where a reply's last words match the end of the user's
        message, the copy ran on through the chat template (<|im_end|>, <|im_start|>assistant, the
        reply's own first line), and auto checked 16 tokens of which at most two could be kept (a
        user's try of the window, on a machine where that check cost 5.6 single passes)."""
        pos, length = self.find(context)
        return self.copy_found(context, gamma_max, pos, length), (length if pos >= 0 and gamma_max > 0 else 0)

    def copy_found(self, context: Sequence[int], gamma_max: int, pos: int, length: int) -> list[int]:
        """copy()'s tokens for the match find() gave: (pos, length)."""
        if pos < 0 or gamma_max <= 0:
            return []
        out = [int(t) for t in context[pos:pos + gamma_max]]
        period = len(context) - pos
        if length >= period:
            while len(out) < gamma_max:
                out.append(out[len(out) - period])
        if self.ends is not None:
            end = next((i for i, t in enumerate(out) if self.ends(t)), None)
            if end is not None:
                out = out[:end + 1]
        return out

    def draft(self, context: Sequence[int], gamma_max: int, params: SamplingParams,
              rng: np.random.Generator, p_min: float = 0.0) -> Proposal:
        """Copy what followed the best earlier match (q_i: a point mass on each copied token)."""
        t0 = time.perf_counter()
        tokens, _ = self.copy(context, gamma_max)
        out = Proposal.copied(tokens)
        out.t_s = time.perf_counter() - t0
        return out
