"""Auto mode: each round, which drafter and how many tokens it drafts, from what this machine and this
text have shown so far.

Each round auto weighs plain decoding, prompt lookup's copy and (when the settings name it) the draft
model, and takes the option with the best predicted tokens per second, E(γ) / (γ · step + verify(γ+1)):

- verify(b): CostModel.verify_cost, timed at load for a few sizes, then refined by every real round
  of that size (and every size in proportion to single-token passes). A step costs
  CostModel.draft_step_s["model"] for the draft model, nothing for a copy.
- E(γ) for a copy: keep rates by the length L of the match each copied token would extend (the
  match that found the copy plus the copied tokens before it): a copy that has been right for L
  tokens tends to stay right, and how much so is measured on this reply. Every copy found, drafted
  or not, is judged for free as the text reaches it, so these numbers are always current.
  Where recent copies keep fewer tokens than the priors predict, every bin's prior is scaled
  down by that ratio: a copy that fails at its first token says nothing of the longer bins itself.
  After a short match whose tokens were followed by different tokens before (Copy.ambiguous), the
  first copied token is a guess between them, with keep rates of its own. A match counts only its
  tokens within the reply (Copy.find): in a conversation the chat template's header matches the
  start of every earlier reply. Copies of the prompt (the user's text, earlier turns included) and of
  the reply's own earlier text are learnt apart (Copy.source), each from its own prior: on the
  recorded traces the first were kept far more often after matches of the same length (0.70 against
  0.44 after two tokens, 0.94 against 0.77 after 8-11), and one kind's failures said little of the
  other. A reply's copies of itself start from what they kept there (0.45 after two tokens, 0.67
  after 4-11), greedy and sampled alike: at the prompt's priors a sampled answer on a 2-core CPU
  copied 15 tokens of itself after 5-7-token matches and kept 1-3 of them.
  A token that copies in this reply drafted and the text replaced (a renamed name; a ";" of one-line
  code that the reply writes as a line break) is priced from its own record in the reply
  (replaced_tokens.py), so later copies stop before it.
- E(γ) for the draft model: keep rates by draft position (KeepRates), learnt from its rounds. Their
  prior is the target's own recent confidence (its probability of the tokens it chose): a draft
  agrees with the target about as often as the target is sure of itself (measured on the recorded
  traces: 0.59-0.99 agreement against 0.54-1.00 confidence, prompt by prompt).
- The draft model reads the text lazily: until auto first drafts with it in a reply, its prompt pass
  is not paid (time to first token is plain decoding's). Choosing it means catching it up first
  (CostModel.prefill_cost: a step and a price per token), a cost spread over the tokens the reply is
  expected to have left (reply_horizon: twice its length so far, at least HORIZON_MIN, at most what
  max_tokens leaves) and repaid against the recent rate of the rounds without it.
- Exploration: the draft model has no free judgement, so it is explored (a probe round) when it
  has hardly been tried and could pay at the target's confidence, or, once tried, at its upper
  confidence bound; a probe that does not lead to a win doubles the rounds before the next. A probe
  is one round: after it the model drafts only where its estimate wins. (Probes that ran on while
  the upper bound could pay drafted 15 tokens a round for 29 rounds of a sampled reply that kept
  about half of them, on a machine where a 16-token check costs 5 single passes: 0.81x plain.) An
  untried model is only ever probed, never chosen on its prior alone. Once tried, a probe drafts at
  most twice as deep as its drafts have been judged in this reply: where only first positions had
  been (a model kept at γ 1), the upper bound of every deeper position is its prior's, near 1, and
  auto probed with 9-15 tokens (a conversation's first reply, xeon profile: six probes kept 14 of 76
  tokens, 0.88x plain; 0.95x with the cap). Chosen on its estimate rather than probed, it drafts
  as deep as the estimate (not its upper bound) says.
- Every new reply may be text of another kind: the draft model starts it untried (its agreement
  with the target is the text's), the target's confidence so far counts for a few rounds only, and
  the copy estimates move part way back to their priors. So what looked bad before is tried again
  when the text changes, and what looked good is not bet on before this text confirms it (judged
  reply after reply in replay: replay.judge_warm). Verify costs are re-measured by every round, so
  choices follow the machine when it changes.

No prior here encodes a machine: without measured costs auto decodes plainly.

The constants below were chosen on the recorded traces of the built-in prompts (tests/data/traces),
replayed under the cost profiles of cost_profiles.py (replay.py); the held-out prompts there were
recorded after they were fixed. `AutoPolicy` holds no model: the decoder (decoding.py) and the
replay drive the same object, the first with real passes, the second with a recorded text and a
cost profile.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Sequence

from desktop_app.engine.costs import WIN_MARGIN, CostModel, expected_tokens
from desktop_app.engine.replaced_tokens import ReplacedTokens, keep_rate

AUTO_GAMMA_MAX = 32          # auto's own ceiling of γ, whatever γ fixed mode is set to
HORIZON_MAX = 256            # tokens over which a one-off cost (the draft's catch-up) is spread, at most
HORIZON_MIN = 64             # ... and at least (fewer only where max_tokens leaves fewer)
PRIOR_PULL = 0.6             # at every new reply, the copy estimates move this far back towards their priors

# Prompt lookup: keep rates by the length L of the match a copied token extends (the match that found
# the copy, plus the copied tokens before it), prior and weight: a copy right for L tokens tends to
# stay right.
LOOKUP_BINS = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
COPY_SOURCES = ("prompt", "reply")   # learnt apart, each from its own prior (Copy.source)
LOOKUP_PRIOR = {"prompt": (0.5, 0.7, 0.8, 0.85, 0.9, 0.92, 0.94, 0.94, 0.94, 0.94, 0.94),
                "reply": (0.45, 0.55, 0.67, 0.67, 0.67, 0.92, 0.94, 0.94, 0.94, 0.94, 0.94)}   # as kept on the
                # recorded traces (greedy and sampled) from 2 to 11 tokens: a reply repeats its own phrases
LOOKUP_PRIOR_WEIGHT = 5.5    # observations' worth of prior per bin
LOOKUP_FORGET = 0.017        # every round, lookup's counts move this far back towards the prior
AMBIGUOUS_BELOW = 4          # a match shorter than this whose last tokens were followed by different
AMBIGUOUS_PRIOR = 0.2        # tokens before (Copy.ambiguous): its first copied token has keep rates of
                             # its own, with this prior
LOOKUP_POOL = 5.0            # observations' worth of "as the priors say" in the ratio that scales every
                             # bin's prior down where recent copies fall short of theirs (KeepRates.shrink)

# The draft model: keep rates by draft position 1, 2, 3-4, 5-8, 9-16, 17-32.
MODEL_BINS = (1, 2, 3, 5, 9, 17)
MODEL_PRIOR_WEIGHT = 3.6     # observations' worth of prior per position bin
MODEL_FORGET = 0.084         # each draft-model round, its counts move this far towards the prior
                             # (half as far in rounds without it)
CONF_PRIOR = 0.7             # the target's confidence before any round
CONF_DECAY = 0.96            # weight of the past in the target's recent confidence, per round
CONF_REPLY_WEIGHT = 3.0      # rounds' worth of the confidence so far that a new reply starts with
CONF_MARGIN = 0.01           # a first probe must be able to pay at the confidence plus this
MIN_EVIDENCE = 1.0           # draft-model rounds below which it counts as not tried
PROBE_OPTIMISM = 1.0         # once tried, explored while it could pay this many standard errors up
PROBE_GAMMA_MAX = 16         # the longest draft exploring the model
PROBE_GAP_MIN = 16           # rounds without the draft model before it is probed again
PROBE_GAP_MAX = 512
FIRST_PROBE = 8              # the first round of a reply in which the model may be explored
BIG_CATCH_UP = 16            # tokens behind from which catching the model up is an investment
RECENT_DECAY = 0.9           # weight of the past in the recent rate the model must beat


def _bin(bins: Sequence[int], i: int) -> int:
    """The bin of `i`: the last of `bins` (ascending) at or below it, the first where none is."""
    return max(0, bisect_right(bins, i) - 1)


class KeepRates:
    """keep(L) = P(the next drafted token is kept | the L - 1 before it were), in bins of L: observed
    counts, which fade (forgetting), plus `weight` observations' worth of the prior as it is now (a
    prior that moves, as the draft model's does with the target's confidence, counts at once).

    With `pool` > 0 every bin's prior is scaled by shrink(), the ratio of what all bins kept to what
    their priors predicted (`pool` observations' worth of 1.0 in it), when that ratio is below 1. A
    bin is seen only where the tokens before it were kept: copies that fail at their first token
    leave the later bins at their priors, and the short bins' failures say those priors are too high
    for this text (the demo pair's story: 16-token copies after 2-token matches, nearly all failing
    at once, on the gpu profile)."""

    def __init__(self, bins: Sequence[int], prior: Sequence[float], weight: float, pool: float = 0.0):
        self.bins = tuple(bins)
        self.prior = list(prior)
        self.weight = weight
        self.pool = pool
        self.kept = [0.0] * len(bins)            # observed, faded
        self.tried = [0.0] * len(bins)

    def record(self, start: int, n_kept: int, rejected: bool) -> None:
        """Tokens at L = start .. start + n_kept - 1 were kept, and when `rejected` the one after
        them was not."""
        for k in range(n_kept + rejected):
            b = _bin(self.bins, start + k)
            self.tried[b] += 1
            self.kept[b] += k < n_kept

    def pull_towards_prior(self, weight: float) -> None:
        """Fade the observations by `weight`: the estimates move that far back towards the prior."""
        for b in range(len(self.bins)):
            self.kept[b] *= 1 - weight
            self.tried[b] *= 1 - weight

    def shrink(self) -> float:
        """The factor on every bin's prior: (Σ kept + pool) / (Σ tried × prior + pool), at most 1
        (1 without pooling)."""
        if not self.pool:
            return 1.0
        predicted = sum(t * q for t, q in zip(self.tried, self.prior))
        return min(1.0, (sum(self.kept) + self.pool) / (predicted + self.pool))

    def keep(self, length: int, optimism: float = 0.0) -> float:
        """keep(L); with optimism z > 0, z standard errors above it (at most 0.99)."""
        return self._keep(_bin(self.bins, length), optimism, self.shrink())

    def _keep(self, b: int, optimism: float, shrink: float) -> float:
        n = self.tried[b] + self.weight
        p = (self.kept[b] + self.prior[b] * shrink * self.weight) / n
        if optimism:
            p = min(0.99, p + optimism * (p * (1 - p) / (n + 1)) ** 0.5)
        return p

    def expected(self, start: int, gamma_max: int, optimism: float = 0.0, first: float | None = None,
                 seen: Sequence[tuple[float, float] | None] = ()) -> list[float]:
        """E(γ) for γ = 0..gamma_max of a draft whose first token is at L = start: the tokens a
        round yields, drafts kept plus the target's own. `first`: the first token's keep rate, when
        it is known apart (an ambiguous copy's). `seen[k]`: the record of the k-th drafted token
        where the reply has replaced it (replaced_tokens.keep_rate prices it)."""
        out = [1.0]
        survive = 1.0
        shrink = self.shrink()
        rates = [self._keep(b, optimism, shrink) for b in range(len(self.bins))]   # (each worked out once)
        for k in range(gamma_max):
            p = first if k == 0 and first is not None else rates[_bin(self.bins, start + k)]
            survive *= keep_rate(p, seen[k] if k < len(seen) else None)
            out.append(out[-1] + survive)
        return out


@dataclass(frozen=True)
class Copy:
    """Prompt lookup's best candidate this round: the tokens that followed the longest earlier match
    of the text's tail (at most AUTO_GAMMA_MAX of them), and that match's length."""

    tokens: tuple[int, ...]
    match_len: int
    ambiguous: bool = False  # a match shorter than AMBIGUOUS_BELOW whose last tokens were followed by
                             # different tokens before (PromptLookupDrafter.followers): its first
                             # token is a guess between them
    source: str = "prompt"   # where the copied tokens come from: "prompt" (what the user gave, earlier
                             # turns included) or "reply" (this reply's own earlier text): COPY_SOURCES

    @classmethod
    def find(cls, lookup, context: Sequence[int], room: int, reply_len: int) -> "Copy | None":
        """Prompt lookup's candidate for the round after `context` (at most `room` tokens), as the
        decoder and the replay offer it to choose(); None: no match. `lookup`: a PromptLookupDrafter.

        Of a match, only the reply's tokens (its last `reply_len`) and the one before them (the line
        break that ends a chat template's header) count: the header is the same at every turn, so in
        a conversation it matches the start of every earlier reply, whose opening says nothing of this
        one's. Counted whole, it made a five-token match at a reply's first round, and auto copied the
        last reply's first 16 tokens (as llama.cpp's lookup would)."""
        start, match_len = lookup.find(context)
        tokens = lookup.copy_found(context, room, start, match_len)
        match_len = min(match_len, reply_len + 1)
        if not tokens or match_len < lookup.ngram_min:
            return None
        return cls(tuple(tokens), match_len, match_len < AMBIGUOUS_BELOW and lookup.followers(context) > 1,
                   "reply" if start >= len(context) - reply_len else "prompt")


@dataclass(frozen=True)
class ModelOption:
    """The draft model, offered to auto this round: `behind` tokens of the text it has not read yet
    (its catch-up, paid before it can draft)."""

    behind: int


@dataclass(frozen=True)
class Choice:
    drafter: str             # "none", "lookup" or "model"
    gamma: int
    rate: float              # predicted tokens per second (0.0: costs not measured yet)
    probe: bool = False      # a round that explores the draft model rather than one predicted to win


PLAIN = Choice("none", 0, 0.0)


def reply_horizon(left: int, reply_len: int) -> int:
    """The tokens a reply `reply_len` long, with `left` more allowed by max_tokens, is expected to
    have left: twice what it has (a reply that has run for n tokens is about as likely as not to run
    n more, and some run far longer), from HORIZON_MIN to HORIZON_MAX. Not `left` alone: a chat's
    max_tokens (1024 in the window) says nothing of when an answer ends, and a short answer's draft
    catch-up, spread over 256 tokens that never came, cost a user 3.8 s for one drafted round at
    its end. (The recorded traces run to max_tokens, so replay cannot favour this rule; it leaves
    their tables about as they were.)"""
    return max(1, min(left, HORIZON_MAX, max(HORIZON_MIN, 2 * reply_len)))


class AutoPolicy:
    """Chooses (drafter, γ) per round; learns acceptance from verdicts and from the text itself.

    Lifecycle: begin() at each reply, then per round choose() and, once the round is done,
    observe(). Its numbers persist across replies for as long as the pair is loaded."""

    def __init__(self, costs: CostModel):
        self.costs = costs
        self.model = KeepRates(MODEL_BINS, [CONF_PRIOR] * len(MODEL_BINS), MODEL_PRIOR_WEIGHT)
        self._conf_sum = CONF_PRIOR * CONF_REPLY_WEIGHT  # the target's recent probability of its own
        self._conf_n = CONF_REPLY_WEIGHT                 # tokens: a fading sum, and its weight
        self.lookup = {source: KeepRates(LOOKUP_BINS, LOOKUP_PRIOR[source], LOOKUP_PRIOR_WEIGHT, LOOKUP_POOL)
                       for source in COPY_SOURCES}          # copies' keep rates, learnt apart by source
        self.lookup_ambiguous = KeepRates((1,), (AMBIGUOUS_PRIOR,), LOOKUP_PRIOR_WEIGHT)   # their first tokens
        self.model_evidence = 0.0                        # draft-model rounds seen in this reply
        self.model_depth = 0                             # the deepest draft position judged in them
        self.probe_gap = PROBE_GAP_MIN
        self.rounds_without_model = 0
        self._pending: list[list] = []                   # copies not yet fully judged: [start, match length,
                                                         # copy, kept, whether its first token is a guess,
                                                         # source]
        self.replaced_tokens = ReplacedTokens()          # what copies in this reply met, token by token
        self._recent_tokens = 0.0                        # tokens and seconds of recent rounds without the model
        self._recent_s = 0.0

    # -- a reply's lifecycle

    def begin(self) -> None:
        """A new reply: its text may be of another kind than the last one's. The draft model starts
        untried (how often it agrees with the target is the text's: 0.59-0.99 prompt to prompt on the
        recorded traces, so the last reply says little), the target's confidence so far counts as
        only CONF_REPLY_WEIGHT rounds, the copy estimates move part way back to their priors, and
        copies from the last reply are dropped unjudged."""
        confidence = self.confidence
        self._conf_n = min(self._conf_n, CONF_REPLY_WEIGHT)
        self._conf_sum = confidence * self._conf_n
        self.model = KeepRates(MODEL_BINS, [confidence] * len(MODEL_BINS), MODEL_PRIOR_WEIGHT)
        self.model_evidence = 0.0
        self.model_depth = 0
        self.probe_gap = PROBE_GAP_MIN
        for rates in self.lookup.values():
            rates.pull_towards_prior(PRIOR_PULL)
        self.lookup_ambiguous.pull_towards_prior(PRIOR_PULL)
        self.drop_copies(new_reply=True)
        self.rounds_without_model = self.probe_gap - FIRST_PROBE

    def drop_copies(self, new_reply: bool = False) -> None:
        """Forget the copies not yet judged: the text they were found in is not this reply's. With
        `new_reply`, forget too what copies showed of the last reply's tokens (replaced_tokens)."""
        self._pending.clear()
        if new_reply:
            self.replaced_tokens.clear()

    def choose(self, context: Sequence[int], room: int, copy: Copy | None, model: ModelOption | None,
               left: int, reply_len: int) -> Choice:
        """The option with the best predicted tokens per second for the round after `context`:
        at most `room` drafted tokens, the lookup candidate `copy` (None: no match), the draft
        model (None: not offered), `left` tokens left by max_tokens in a reply `reply_len` long."""
        self.settle(context)
        guess = copy is not None and copy.ambiguous
        if copy is not None and copy.tokens and not self._continues(len(context), copy.tokens):
            self._pending.append([len(context), copy.match_len, copy.tokens, 0, guess, copy.source])
        plain_s = self.costs.verify_cost(1)
        if not plain_s or room <= 0:
            return PLAIN
        best = Choice("none", 0, 1.0 / plain_s)
        if copy is not None and copy.tokens:
            n = min(len(copy.tokens), room)
            expected = self.lookup[copy.source].expected(copy.match_len, n,
                                                         first=self.lookup_ambiguous.keep(1) if guess else None,
                                                         seen=[self.replaced(t) for t in copy.tokens[:n]])
            g, rate = self._best_gamma(expected, 0.0)
            if g and rate > best.rate * WIN_MARGIN:
                best = Choice("lookup", g, rate)
        if model is not None:
            best = self._weigh_model(best, model, room, reply_horizon(left, reply_len))
        return best

    def observe(self, choice: Choice, n_drafted: int, n_kept: int, seconds: float,
                confidence: float | None = None) -> None:
        """The round `choice` led to: n_drafted checked and the first n_kept kept, in `seconds`
        (drafting and verifying), and the target's probability of the token it chose itself
        (`confidence`). Copies need no report: settle() judges them from the text."""
        if confidence is not None:
            self._conf_sum = CONF_DECAY * self._conf_sum + confidence
            self._conf_n = CONF_DECAY * self._conf_n + 1
            self.model.prior = [self.confidence] * len(MODEL_BINS)
        for rates in self.lookup.values():
            rates.pull_towards_prior(LOOKUP_FORGET)
        self.lookup_ambiguous.pull_towards_prior(LOOKUP_FORGET)
        if choice.drafter == "model" and n_drafted:
            self.model.pull_towards_prior(MODEL_FORGET)
            self.model.record(1, n_kept, n_kept < n_drafted)
            self.model_evidence += 1
            self.model_depth = max(self.model_depth, n_kept + (n_kept < n_drafted))
            self.rounds_without_model = 0
        else:
            self.model.pull_towards_prior(MODEL_FORGET / 2)
            self.rounds_without_model += 1
            self._recent_tokens = RECENT_DECAY * self._recent_tokens + n_kept + 1
            self._recent_s = RECENT_DECAY * self._recent_s + seconds

    def settle(self, context: Sequence[int]) -> None:
        """Judge earlier copies against the text now known, as a verify pass would have: each copied
        token as soon as the text reaches it, until the copy's first wrong token or its end."""
        still = []
        for item in self._pending:
            start, match_len, copy, kept, guess, source = item
            rates = self.lookup[source]
            known = context[start + kept:start + len(copy)]
            n = 0
            while n < len(known) and known[n] == copy[kept + n]:
                n += 1
            rejected = n < len(known)
            for k in range(int(guess and kept == 0), n + rejected):   # (a guess's first token says nothing of it)
                self.replaced_tokens.judge(start + kept + k, copy[kept + k], k < n)
            if guess and kept == 0 and (n or rejected):    # an ambiguous copy's first token, on its own
                self.lookup_ambiguous.record(1, min(n, 1), n == 0)
                if n and (n > 1 or rejected):
                    rates.record(match_len + 1, n - 1, rejected)
            elif n or rejected:
                rates.record(match_len + kept, n, rejected)
            item[3] = kept + n
            if not rejected and item[3] < len(copy):
                still.append(item)
        self._pending = still

    def replaced(self, token: int) -> tuple[float, float] | None:
        """(kept, tried) of `token` as copies in this reply met it, where the reply has replaced it
        (ReplacedTokens.get)."""
        return self.replaced_tokens.get(token)

    def _continues(self, at: int, tokens) -> bool:
        """Whether a copy still being judged already predicts `tokens` from position `at` (the same
        passage found again one round on): judged once, not once per round."""
        for start, _, copy, kept, _, _ in self._pending:
            rest = copy[at - start:]
            if at - start <= kept and rest and tuple(tokens[:len(rest)]) == tuple(rest[:len(tokens)]):
                return True
        return False

    @property
    def confidence(self) -> float:
        """The target's recent confidence: a fading mean of its probability of the tokens it chose."""
        return self._conf_sum / self._conf_n

    @property
    def recent_rate(self) -> float:
        """Tokens per second of the recent rounds without the draft model: what catching it up
        must be repaid against."""
        return self._recent_tokens / self._recent_s if self._recent_s > 0 else 0.0

    # -- predictions

    def _best_gamma(self, expected: Sequence[float], step_s: float) -> tuple[int, float]:
        """(γ ≥ 1, tokens per second) with the best predicted rate for E(γ) = expected[γ], or
        (0, 0.0) when no verify cost of those sizes is known."""
        best_g, best = 0, 0.0
        prices = self.costs.verify_costs()
        for g in range(1, len(expected)):
            verify = prices[g + 1] if g + 1 < len(prices) else self.costs.verify_cost(g + 1)
            if verify is None:
                break
            rate = expected[g] / (g * step_s + verify)
            if rate > best:
                best_g, best = g, rate
        return best_g, best

    def _weigh_model(self, best: Choice, model: ModelOption, room: int, horizon: int) -> Choice:
        """The draft model against the best option so far: chosen on its estimate, explored, or not."""
        step = self.costs.draft_step_s.get("model")
        if step is None:
            return best
        catch_up = self.costs.prefill_cost("model", model.behind)

        def with_catch_up(rate: float) -> float:     # the rate over the horizon, catch-up included
            return horizon / (horizon / rate + catch_up) if rate > 0 else 0.0

        bar = max(best.rate, self.recent_rate) if model.behind > BIG_CATCH_UP else best.rate
        tried = self.model_evidence >= MIN_EVIDENCE     # untried, its estimate is only a prior: probe it first
        g, rate = self._best_gamma(self.model.expected(1, room), step) if tried else (0, 0.0)
        if g and with_catch_up(rate) > bar * WIN_MARGIN:
            self.probe_gap = PROBE_GAP_MIN
            return Choice("model", g, rate)
        if self.rounds_without_model < self.probe_gap:  # (a probe is one round: the next must win on
            return best                                 # its estimate, or wait for the next probe)
        n = min(room, PROBE_GAMMA_MAX)
        if tried:                                   # no deeper than twice what its drafts were judged at
            n = min(n, max(2, 2 * self.model_depth))
        if not tried:                               # could it pay at the target's confidence?
            alpha = min(0.99, self.confidence + CONF_MARGIN)
            optimistic = [expected_tokens(alpha, k) for k in range(n + 1)]
        else:
            optimistic = self.model.expected(1, n, PROBE_OPTIMISM)
        g_opt, rate_opt = self._best_gamma(optimistic, step)
        if g_opt and with_catch_up(rate_opt) > bar * WIN_MARGIN:
            self.probe_gap = min(PROBE_GAP_MAX, 2 * self.probe_gap)
            return Choice("model", g_opt, rate_opt, probe=True)
        self.rounds_without_model = 0                    # not even optimistically: look again after a gap
        return best
