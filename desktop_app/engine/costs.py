"""Measured costs (verify passes by batch size, draft steps, prompt passes) and the rate formula.

Expected tokens from one round that drafts γ tokens, each kept with probability α until the first
rejection, plus the target's own token: E(α, γ) = (1 - α^(γ+1)) / (1 - α).
A round costs γ draft steps plus one verify pass over γ+1 tokens; on a CPU a verify pass over
γ+1 tokens costs far more than one single-token pass, so we use the measured cost of each batch size
rather than assume it is flat. Auto mode (auto_policy.py) weighs its options on these costs.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

EMA = 0.2                   # weight of a new timing measurement
FAR_BELOW = 3.0             # a pass this many times faster than its cost says the cost was timed wrong
SPIKE = 1.5                 # a pass slower than this many times its cost moves it as one this slow would
                            # (unless the one before was too: CostModel._damped)
WIN_MARGIN = 1.02           # an option must be predicted 2 % faster than the best other to be used
PREFILL_MIN = 8              # tokens a pass must read to say what a token of a long prompt costs
DIP_MAX = 0.75              # a pass is priced at no less than this share of the nearest smaller one measured
STALE_TOKENS = 128          # a single-token pass's price is stale after passes over this many tokens without
STALE_PASSES = 8            # one, and at least this many passes: then a pass over more tokens moves every
                            # price at once, as a single-token pass would (CostModel.record_verify) ...
ESTABLISHED = 10            # ... where its own size's price is established: timed this often, or at load
PRICED_AT_ONCE = 33         # verify sizes priced together, once per state of the prices (CostModel.verify_costs):
                            # auto's widest check (auto_policy.AUTO_GAMMA_MAX + 1)


def expected_tokens(alpha: float, gamma: int) -> float:
    """Tokens one round yields on average: accepted drafts plus the target's token."""
    if alpha >= 1.0:
        return gamma + 1.0
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def round_rate(alpha: float, gamma: int, step_s: float, verify_s: float | None) -> float:
    """Expected tokens per second of a round that drafts γ tokens at step_s seconds each and checks
    them in one verify pass of verify_s seconds (over γ+1 tokens): E(α, γ) / (γ·step + verify).
    γ = 0 is a plain step: 1 / verify_s. 0.0 when the round's cost is not known.
    The "Does it pay?" curve rests on this, and a reply's predicted speed-up (metrics.py) on the same
    quotient summed over the reply's rounds; auto mode (auto_policy.py) uses it with acceptance that
    depends on position."""
    if verify_s is None:
        return 0.0
    cost = gamma * step_s + verify_s
    return expected_tokens(alpha, gamma) / cost if cost > 0.0 else 0.0


def reply_speedup(rounds: Iterable[tuple[int, float, int, float, float | None]],
                  plain_step_s: float) -> float | None:
    """The speed-up over plain decoding (one token per plain_step_s) of a reply made of `rounds`, each
    (how many, α, γ, step_s, verify_s): E(α, γ) tokens for γ·step + verify seconds apiece, round_rate's
    terms summed over the reply. A plain round is (n, 0, 0, 0, single pass). None where a verify cost
    is not known."""
    tokens = seconds = 0.0
    for n, alpha, gamma, step_s, verify_s in rounds:
        if verify_s is None:
            return None
        tokens += n * expected_tokens(alpha, gamma)
        seconds += n * (gamma * step_s + verify_s)
    return tokens * plain_step_s / seconds if seconds > 0 else None


def per_token(seconds: float, n_tokens: int, single_s: float) -> float:
    """A token's price in a batched pass over n_tokens that took `seconds`: its share of what the pass
    cost beyond a single-token pass of single_s (CostModel.prefill_cost), at least half its share of
    the whole (a single pass timed slow must not make reading look free)."""
    return max(seconds - single_s, seconds / 2) / n_tokens


def speedup(rate: float, plain_step_s: float) -> float:
    """A rate in tokens per second relative to plain decoding's, one token per plain_step_s."""
    return rate * plain_step_s


def at_pace(verify_s_by_batch: Mapping[int, float], single_s: float | None) -> dict[int, float]:
    """Verify prices (seconds per pass by batch size) at the pace where a single-token pass takes
    single_s: each the same multiple of their own single-token pass. As they are where either is
    unknown. Prices timed while the machine was busier or idler than a reply keep the ratios every
    choice of γ rests on, and take that reply's pace: priced as timed, a reply on a busy machine was
    predicted to check 3 tokens in less time than it took to decode one."""
    one = verify_s_by_batch.get(1)
    if not one or not single_s:
        return dict(verify_s_by_batch)
    return {k: v / one * single_s for k, v in verify_s_by_batch.items()}


def speedup_curve(alpha: float, draft_step_s: float, verify_s_by_batch: Mapping[int, float],
                  plain_step_s: float | None, gammas: Iterable[int]) -> list[float | None]:
    """The predicted speed-up over plain decoding for each γ in `gammas`, from acceptance α, the
    seconds of one draft step, the measured seconds of a verify pass per batch size (at the pace of
    plain_step_s, at_pace; interpolated between sizes as CostModel.verify_cost does) and the seconds
    of one plain step: what auto mode weighs, for a view to draw. None where a cost is not known."""
    return CostModel(verify_s=at_pace(verify_s_by_batch, plain_step_s)).speedup_curve(
        alpha, draft_step_s, plain_step_s, gammas)


def best_gamma(gammas: Sequence[int], curve: Sequence[float | None], margin: float = WIN_MARGIN) -> int:
    """The γ of `curve` (speed-ups over plain, one per γ of `gammas`) predicted fastest, or 0 when none
    is predicted to beat plain decoding by `margin` (the margin auto mode asks for too)."""
    best_g, best = 0, margin
    for g, s in zip(gammas, curve):
        if s is not None and s > best:
            best_g, best = g, s
    return best_g


@dataclass
class CostModel:
    """Running measurements for one loaded pair (kept across generations)."""

    verify_s: dict[int, float] = field(default_factory=dict)     # batch size -> seconds per pass
    draft_step_s: dict[str, float] = field(default_factory=dict)  # drafter -> seconds per drafted token
    prefill_s: dict[str, float] = field(default_factory=dict)     # "target"/"model" -> seconds per token
                                                                  # of a batched prompt pass
    _held_up: set = field(default_factory=set, repr=False)       # prices whose last timing was a SPIKE
    _passes_since_single: int = field(default=0, repr=False)     # passes, and the tokens they checked,
    _tokens_since_single: int = field(default=0, repr=False)     # since the last single-token pass
    _timed: dict = field(default_factory=dict, repr=False)      # batch size -> passes timed by record_verify
    _prices: tuple = field(default=(None, ()), repr=False, compare=False)   # (verify_s's items, verify_costs())

    # -- recording
    def record_verify(self, batch: int, seconds: float) -> None:
        """A pass over `batch` tokens took `seconds`; that size's cost moves towards it. A single-token
        pass is the yardstick: what changes its cost (a busy machine, a longer context) changes every
        pass alike, so it moves all sizes in proportion and the ratios between sizes, on which every
        choice of γ rests, stay as measured until rounds of those sizes correct them. Without this,
        hours of plain rounds on a loaded machine would make verify batches look cheap. The draft
        model's step and the prompt passes move with it too: held still, they had looked cheap beside
        it (a step at 0.10 of a pass after replies decoded plainly, measured at 0.50 in the last reply
        that drafted: a new user's try).
        A pass slower than SPIKE times its cost (one held up by another program for a moment) moves
        it as one SPIKE times slower would, the first time (_damped): one pass 10 times slower moves
        the costs by 10 %, not by 2.8 times (EMA's share of it), and the next, if slow too, counts whole.
        A pass FAR_BELOW times faster than its cost cannot be noise (noise only slows a pass): the
        yardstick was timed wrong (a load calibrated while the machine was swamped: 3 s for a 70 ms
        pass), and every size moves at once by as much; unless that size alone was priced above as many
        single passes as it has tokens, which no pass costs: then its own timing was (a burst while it
        alone was timed; moving every size by it once priced a single pass at 0.2 ms, and a reply at
        "c = 3056" and "plain decoding 1947 tok/s"), and the yardstick's too only where it is far
        above this pass. Nor can a pass over more tokens be FAR_BELOW times
        faster than a single-token pass: where one is, the single-token pass is priced at it.
        A single-token pass's price goes stale in a run of rounds without one (a reply that copies
        hundreds of tokens round after round): every pass slows as the context grows. So after
        STALE_PASSES passes over STALE_TOKENS tokens or more without one, a pass over more tokens moves
        every price as a single-token pass would, where its own size's price is ESTABLISHED (priced at
        load, or timed that often: a size first timed in a held-up moment would drag every price with
        it), and the ratios between sizes stay as they were priced. Priced against the stale yardstick,
        a 33-token check of the test model, 22.8 single passes at load and about 22 in the reply, had
        crept to 33 over 50 copying rounds (the context grown from 50 tokens to 740), and auto, copying
        every token of a repeated phrase right, stopped copying for the rest of the reply (a new user's
        try). A size priced wrong when the yardstick goes stale stays so until a single-token pass
        comes: then its own rounds correct it again."""
        if not seconds > 0:                              # (no pass takes no time: a clock's slip)
            return
        stale = self._count_since_single(batch)
        old = self.verify_s.get(batch)
        timed = self._timed.get(batch, ESTABLISHED if old is not None and old > 0 else 0)   # (priced at load)
        established = timed >= ESTABLISHED
        self._timed[batch] = timed + 1
        if old is None or old <= 0:
            self.verify_s[batch] = seconds
            return
        if 0 < seconds * FAR_BELOW < old:
            single = self.verify_s.get(1, 0.0)
            if batch > 1 and old > batch * single > 0:   # priced above `batch` single passes, which no pass
                self.verify_s[batch] = seconds           # over `batch` tokens costs: this size was timed wrong
                if seconds * FAR_BELOW >= single:        # alone, unless the yardstick is far above this pass
                    return                               # too: then every other size moves by as much as it
                self._move_yardstick(seconds / single, [k for k in self.verify_s if k != batch])
            else:                                        # the yardstick was timed wrong
                self._move_yardstick(seconds / old, list(self.verify_s))
            return
        single = self.verify_s.get(1, 0.0)
        if batch > 1 and seconds * FAR_BELOW < single:   # the single-token pass alone was timed wrong
            self._move_yardstick(min(seconds, *(v for k, v in self.verify_s.items() if k > 1)) / single, [1])
        new = (1 - EMA) * old + EMA * self._damped(("verify", batch), old, seconds)
        if batch == 1 or (stale and established):
            self._move_yardstick(new / old, list(self.verify_s))
        self.verify_s[batch] = new

    def for_another_count(self) -> "CostModel":
        """A copy of these prices for another thread count, which its own rounds then correct: its
        yardstick is fresh (a stale one would keep them from it). Which sizes are established stays
        as here: a size timed once, held up, would otherwise count as priced at load there (a review)."""
        out = copy.deepcopy(self)
        out._passes_since_single = out._tokens_since_single = 0
        return out

    def _count_since_single(self, batch: int) -> bool:
        """Count a pass over `batch` tokens; whether the single-token pass's price is stale by then."""
        if batch == 1:
            self._passes_since_single = self._tokens_since_single = 0
            return False
        self._passes_since_single += 1
        self._tokens_since_single += batch
        return self._passes_since_single >= STALE_PASSES and self._tokens_since_single >= STALE_TOKENS

    def _damped(self, key: tuple, old: float, seconds: float) -> float:
        """A timing as its price moves towards it: above SPIKE times the price, SPIKE times it, unless the
        last timing of that price was above too (then whole: the price is too low, or the machine
        slowed, and a price five times too low had taken 19 timings to come within 10 %)."""
        if seconds <= SPIKE * old:
            self._held_up.discard(key)
            return seconds
        if key in self._held_up:
            return seconds
        self._held_up.add(key)
        return SPIKE * old

    def _move_yardstick(self, factor: float, sizes: list[int]) -> None:
        """Move the verify `sizes` by `factor`, and with them every drafter's step and every prompt
        pass's price per token. A machine that slows slows them alike. And the draft model's step and
        prompt price are ratios to the single-token pass timed beside them at load
        (calibration._draft_ratios), so a single pass timed wrong there put them wrong alike (the
        target's prompt price, timed on its own then, most likely in the same state of the machine).
        Moved only by the slow updates, a draft step priced through a busy spell came out of it at
        10.2 passes when the spell's first fast pass lowered every verify size at once (2026-12-03,
        docs/auto-mode.md)."""
        for k in sizes:
            self.verify_s[k] *= factor
        for prices in (self.draft_step_s, self.prefill_s):
            for k in prices:
                prices[k] *= factor

    def record_draft(self, drafter: str, n_tokens: int, seconds: float) -> None:
        if n_tokens <= 0 or seconds < 0:
            return
        per = seconds / n_tokens
        old = self.draft_step_s.get(drafter)
        self.draft_step_s[drafter] = per if not old else (1 - EMA) * old + EMA * self._damped(("draft", drafter),
                                                                                          old, per)

    def record_prefill(self, model: str, n_tokens: int, seconds: float) -> None:
        """A batched pass over n_tokens of text (a prompt, or a draft model catching up) took `seconds`:
        the price of a token (prefill_cost) moves towards its share of what the pass cost beyond a
        single-token pass."""
        if n_tokens < PREFILL_MIN or not seconds > 0:
            return
        per = per_token(seconds, n_tokens, self.single_pass(model))
        old = self.prefill_s.get(model)
        self.prefill_s[model] = per if not old else (1 - EMA) * old + EMA * self._damped(("prefill", model),
                                                                                       old, per)

    # -- reading
    def single_pass(self, model: str) -> float:
        """Seconds of a pass over one token through `model` ("target": a plain step; "model": a draft
        step), 0.0 where not measured."""
        return self.verify_s.get(1, 0.0) if model == "target" else self.draft_step_s.get(model, 0.0)

    def prefill_cost(self, model: str, n_tokens: int) -> float:
        """Seconds to read n_tokens of text through `model`: a single-token pass, and prefill_s's price
        a token beyond it (where not measured, a single pass's). A draft's catch-up on a 2-core Xeon: 12
        tokens 99.5 ms, 33 tokens 218, 64 tokens 379, about a 34 ms step plus 5.4 ms a token; priced at
        a token's share of the 64-token pass, 12 tokens had cost 71 ms. The draft model reads fewer than
        PREFILL_MIN in its first draft pass, beside its own token (ModelDrafter.catch_up): their share
        only, that pass being paid as a draft step."""
        if n_tokens <= 0:
            return 0.0
        single = self.single_pass(model)
        rides_along = model != "target" and n_tokens < PREFILL_MIN
        return n_tokens * self.prefill_s.get(model, single) + (0.0 if rides_along else single)

    def verify_cost(self, batch: int) -> float | None:
        """Seconds for a verify pass over `batch` tokens: measured, else interpolated linearly between
        measured sizes (extrapolated from the two largest), else None; at least a single-token pass,
        and DIP_MAX of the nearest smaller size measured. Kernels work in tiles, so a batch can cost a
        little less than a smaller one (16 tokens 0.82 of 15 on the steep machine), but never a
        fraction of it: such a price is a timing taken while the machine was busy. A user's machine
        had remembered a 33-token check timed at 1.7 single passes, where 17 tokens cost 8.6; auto bet
        32 copied tokens on a two-token match, and the check took 13.6 passes (a reply at 0.85x
        plain). (The nearest size only: a smaller size timed slow would otherwise raise every size
        above it, and auto, no longer choosing them, would never time them again.) And at most
        `batch` single-token passes, which no pass over `batch` tokens costs: a size priced above that
        was timed while the machine was busy (a 3-token check at 8.6 single passes), and auto, never
        choosing it, would never time it again."""
        if batch == 1 and self.verify_s.get(1, 0.0) > 0:
            return self.verify_s[1]                     # (a plain step's, as timed: no table needed)
        prices = self.verify_costs()
        return prices[batch] if 0 < batch < len(prices) else self._priced([batch])[0]

    def verify_costs(self) -> Sequence[float | None]:
        """verify_cost(b) for b = 0 .. PRICED_AT_ONCE (b = 0: None), priced together once per state of
        verify_s. Auto weighs every size up to its widest check two or three times a round, and every
        round moves a price: priced one at a time, that was most of the Python auto ran each round
        (docs/auto-mode.md, "What auto's choosing costs itself")."""
        state = tuple(self.verify_s.items())
        if self._prices[0] != state:
            self._prices = (state, (None, *self._priced(range(1, PRICED_AT_ONCE + 1))))
        return self._prices[1]

    def _priced(self, batches: Iterable[int]) -> list[float | None]:
        """verify_cost(b) for each of `batches`, in increasing order: measured, else interpolated
        linearly between the measured sizes either side (extrapolated from the two nearest), within
        the bounds verify_cost gives."""
        sizes = sorted(self.verify_s)
        measured = {k: self._measured(k) for k in sizes}
        single = self.verify_s.get(1, 0.0)
        out: list[float | None] = []
        i = 0                                            # measured sizes below the batch
        for batch in batches:
            while i < len(sizes) and sizes[i] < batch:
                i += 1
            if i < len(sizes) and sizes[i] == batch:
                cost = measured[batch]
            elif len(sizes) < 2:
                out.append(None)
                continue
            else:
                a, b = ((sizes[i - 1], sizes[i]) if 0 < i < len(sizes)       # (either side, else the two
                        else (sizes[-2], sizes[-1]) if i else (sizes[0], sizes[1]))   # nearest)
                ta, tb = measured[a], measured[b]
                cost = max(ta, ta + (tb - ta) * (batch - a) / (b - a)) if batch > a else ta
            floor = DIP_MAX * measured[sizes[i - 1]] if i > 0 else 0.0
            out.append(max(min(cost, batch * single if single > 0 else math.inf), floor, single if batch > 1 else 0.0))
        return out

    def _measured(self, batch: int) -> float:
        """A measured size's seconds, at most `batch` single-token passes (verify_cost)."""
        single = self.verify_s.get(1, 0.0)
        return min(self.verify_s[batch], batch * single) if batch > 1 and single > 0 else self.verify_s[batch]

    def speedup_curve(self, alpha: float, step_s: float, plain_step_s: float | None,
                      gammas: Iterable[int]) -> list[float | None]:
        """The predicted speed-up over plain decoding (one token per plain_step_s) of rounds that draft
        γ tokens, for each γ in `gammas`: round_rate with this model's verify cost of γ+1 tokens.
        None where that cost (or plain_step_s) is not known."""
        out: list[float | None] = []
        for g in gammas:
            verify = self.verify_cost(g + 1)
            out.append(speedup(round_rate(alpha, g, step_s, verify), plain_step_s)
                       if verify is not None and plain_step_s else None)
        return out
