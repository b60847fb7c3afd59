"""Accumulating a generation's rounds into GenerationStats."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from desktop_app.engine.costs import CostModel, at_pace, reply_speedup
from desktop_app.engine.events import GenerationStats, RoundEvent


class StatsRecorder:
    def __init__(self, n_prompt_tokens: int, n_prompt_evaluated: int):
        self.stats = GenerationStats(n_prompt_tokens=n_prompt_tokens, n_prompt_evaluated=n_prompt_evaluated)
        self._drafted_at: list[int] = []      # rounds that drafted at least i+1 tokens
        self._kept_at: list[int] = []         # ... in which token i+1 was kept
        self._draft_steps = 0
        self._plain_rounds = 0
        self._plain_verify_s = 0.0
        self._plain_round_s = 0.0             # draft + verify time of those rounds (auto mode looks
                                              # for a copy even in rounds that then draft nothing)
        self.plain_pass = PlainPass()         # plain decoding's pass for the rounds so far
        self._rejections = 0
        self._draft_rounds = 0
        self._draft_written = 0               # tokens those rounds emitted (RoundEvent.emitted)
        self._drafting: Counter[tuple[str, int]] = Counter()   # (drafter, γ) -> rounds that drafted
        self._kept_by: Counter[str] = Counter()                 # drafter -> drafts kept, rejections
        self._rejected_by: Counter[str] = Counter()             # and drafting seconds
        self._draft_s_by: Counter[str] = Counter()

    def add_round(self, r: RoundEvent, n_draft_steps: int) -> None:
        s = self.stats
        s.n_rounds += 1
        s.t_draft_s += r.t_draft_s
        s.t_verify_s += r.t_verify_s
        s.t_other_s += max(0.0, r.t_round_s - r.t_draft_s - r.t_verify_s)
        self.plain_pass.add(r)
        if r.gamma:
            self._draft_rounds += 1
            self._draft_written += len(r.emitted)
            s.n_drafted += r.gamma
            s.n_accepted += r.accepted
            self._draft_steps += n_draft_steps
            if r.accepted < r.gamma:
                self._rejections += 1
                self._rejected_by[r.drafter] += 1
            self._drafting[r.drafter, r.gamma] += 1
            self._kept_by[r.drafter] += r.accepted
            self._draft_s_by[r.drafter] += r.t_draft_s
            while len(self._drafted_at) < r.gamma:
                self._drafted_at.append(0)
                self._kept_at.append(0)
            for i in range(r.gamma):
                self._drafted_at[i] += 1
                self._kept_at[i] += i < r.accepted
        else:
            self._plain_rounds += 1
            self._plain_verify_s += r.t_verify_s
            self._plain_round_s += r.t_draft_s + r.t_verify_s

    def so_far(self) -> GenerationStats:
        """The rounds' statistics so far that need neither the reply's clock nor the costs: counts,
        acceptance, draft and verify seconds (a live panel's numbers, as the reply's end will give them)."""
        s = replace(self.stats)
        self._acceptance(s)
        return s

    def _acceptance(self, s: GenerationStats) -> None:
        if s.n_drafted:
            s.acceptance_rate = s.n_accepted / s.n_drafted
            s.alpha = s.n_accepted / (s.n_accepted + self._rejections) if s.n_accepted + self._rejections else None
            s.mean_accepted = s.n_accepted / self._draft_rounds
            s.mean_drafted = s.n_drafted / self._draft_rounds
            s.mean_written = self._draft_written / self._draft_rounds
            s.position_acceptance = [k / d for k, d in zip(self._kept_at, self._drafted_at)]

    def finish(self, n_tokens: int, t_total_s: float, t_prompt_s: float, ttft_s: float,
               stop_reason: str, costs: CostModel) -> GenerationStats:
        s = self.stats
        s.n_tokens = n_tokens
        s.t_total_s = t_total_s
        s.ttft_s = ttft_s
        decode_s = t_total_s - t_prompt_s
        s.tokens_per_s = n_tokens / decode_s if decode_s > 0 else 0.0
        s.stop_reason = stop_reason
        s.verify_s_by_batch = dict(sorted(costs.verify_s.items()))    # measured sizes only
        s.n_plain_rounds = self._plain_rounds
        s.t_plain_s = self._plain_round_s
        self._acceptance(s)
        if self._draft_steps:
            s.t_draft_step_s = s.t_draft_s / self._draft_steps
        if self._plain_rounds:
            s.t_target_step_s = self._plain_verify_s / self._plain_rounds
        elif 1 in costs.verify_s:
            s.t_target_step_s = costs.verify_s[1]          # measured earlier with this pair
        s.t_plain_pass_s = self.plain_pass.seconds() or s.t_target_step_s
        if s.t_draft_step_s is not None and s.t_plain_pass_s:
            s.c = s.t_draft_step_s / s.t_plain_pass_s        # (a step over the reply, against a pass over it)
        elif s.n_drafted and not self._draft_steps:
            s.c = 0.0                                       # copied drafts cost no model pass
        if s.n_drafted and s.t_plain_pass_s:
            s.predicted_speedup, s.predicted_speedup_measured = self._predicted(s.t_plain_pass_s, costs)
        return s

    def _predicted(self, single_s: float, costs: CostModel) -> tuple[float | None, float | None]:
        """The speed-up over plain decoding predicted for this reply's rounds as they were
        (costs.reply_speedup): each round that drafted γ tokens with a drafter yields E(α, γ) tokens at
        that drafter's α and costs γ times its drafting time per drafted token in this reply (a copy's
        is next to nothing) plus a verify pass; each plain round yields one token for one single-token
        pass plus its own drafting time (a draft that was dropped, a lookup that found nothing).
        Priced two ways: with the paper's flat verify cost (one single-token pass), and with the
        measured cost of each verify batch size at this reply's pace (costs.at_pace: a user's try, on a
        swamped machine, had the "measured" prediction above the flat one, as if a 3-token check cost
        less than one token's pass). With every round drafting the same γ this is the
        paper's E(α, γ) / (1 + γc); a reply of mixed rounds (auto mode, or copies only where there was a
        match) is predicted as it ran, not as if every round had drafted the mean γ."""
        n_plain = self._plain_rounds
        plain_draft_s = (self._plain_round_s - self._plain_verify_s) / n_plain if n_plain else 0.0
        plain = [(n_plain, 0.0, 0, 0.0, single_s + plain_draft_s)]
        drafted_by: Counter[str] = Counter()
        for (name, gamma), n in self._drafting.items():
            drafted_by[name] += n * gamma
        drafting = []
        for (name, gamma), n in self._drafting.items():
            kept, rejected = self._kept_by[name], self._rejected_by[name]
            alpha = kept / (kept + rejected) if kept + rejected else 0.0
            drafting.append((n, alpha, gamma, self._draft_s_by[name] / drafted_by[name], gamma + 1))
        flat = reply_speedup(plain + [(n, a, g, st, single_s) for n, a, g, st, _ in drafting], single_s)
        priced = CostModel(verify_s=at_pace(costs.verify_s, single_s))
        measured = reply_speedup(plain + [(n, a, g, st, priced.verify_cost(b)) for n, a, g, st, b in drafting],
                                 single_s)
        return flat, measured


def from_rounds(rounds: Sequence[RoundEvent]) -> GenerationStats:
    """What a reply's rounds alone say of it, for one stored without its statistics (the engine died
    while it was written): counts, acceptance, draft and verify seconds, and its speed as the live
    panel counts it, its rounds' tokens over their seconds (the panel read "–" once such a reply was
    opened again, where it had shown 21.0 tok/s and 147 tokens as the engine died: a new user's try)."""
    recorder = StatsRecorder(0, 0)
    for r in rounds:
        recorder.add_round(r, r.gamma)
    s = recorder.so_far()
    s.n_tokens = sum(r.n_reply_tokens for r in rounds)
    s.n_plain_rounds, s.t_plain_s = recorder._plain_rounds, recorder._plain_round_s
    s.t_total_s = seconds = sum(r.t_round_s for r in rounds)      # (its prompt's time not known: none counted)
    s.tokens_per_s = s.n_tokens / seconds if seconds > 0 else 0.0
    return s


class PlainPass:
    """Plain decoding's single-token pass, per token of a reply (GenerationStats.t_plain_pass_s), from its
    rounds: the mean of its plain steps' own passes, times how much dearer the engine's price of a pass
    (RoundEvent.plain_step_s) was over all its tokens than at those steps. Every pass slows as the
    context grows: at the plain steps' mean alone, a 1024-token reply of the test model whose plain steps
    all came in its first 150 tokens, copies after that, read "1.00× plain" where plain decoding of the
    same reply ran at 0.70 of its speed (a pass 14 ms at its start, 26 at its end, on a 2-core AMD EPYC).
    The engine's price is used for that ratio only: its level rests on the ratios between check sizes
    timed at load, and with those off it priced a fixed draft model's reply at "0.50× plain" for 0.65.
    A reply with no plain step (a fixed draft model's), or `own_steps` False, is priced at the engine's
    price alone. Rounds that came without a price (none: a llama-server's) are left out of both means."""

    def __init__(self, own_steps: bool = True):
        self.own_steps = own_steps
        self.steps_s = 0.0        # the plain steps' own passes
        self.steps = 0
        self.steps_price = 0.0    # the engine's price of a pass at those of them it priced
        self.steps_priced = 0
        self.price = 0.0          # ... and at every token it priced, a pass each
        self.passes = 0

    def add(self, r: RoundEvent) -> None:
        n = 1 if not r.gamma else r.n_reply_tokens
        if not r.gamma and r.t_verify_s > 0 and self.own_steps:
            self.steps_s += r.t_verify_s
            self.steps += 1
            if r.plain_step_s > 0:
                self.steps_price += r.plain_step_s
                self.steps_priced += 1
        if r.plain_step_s > 0:
            self.price += n * r.plain_step_s
            self.passes += n

    def seconds(self) -> float | None:
        """The pass, in seconds (None: no plain step, and no price)."""
        mean_price = self.price / self.passes if self.passes else None
        if self.steps:
            mean = self.steps_s / self.steps
            if mean_price is None or not self.steps_priced:
                return mean
            return mean * mean_price / (self.steps_price / self.steps_priced)
        return mean_price


def plain_rate_so_far(rounds: Sequence[RoundEvent], own_steps: bool = True) -> float | None:
    """Plain decoding's rate as the reply's end will price it (GenerationStats.plain_tokens_per_s), from
    its rounds so far: a single-token pass per token (PlainPass; at the engine's price alone where
    `own_steps` is False), and the loop's own time per round as these rounds spent it. Priced apart, a
    live "plain ≈ 5.84 tok/s, earlier" (the last reply's) became "plain 8.63 tok/s, earlier" at the end
    (the engine's price since): a new user's try."""
    n = sum(r.n_reply_tokens for r in rounds)
    seconds = sum(r.t_round_s for r in rounds)
    plain = PlainPass(own_steps)
    for r in rounds:
        plain.add(r)
    step_s = plain.seconds() or 0.0
    if not n or seconds <= 0 or step_s <= 0:
        return None
    return GenerationStats(n_tokens=n, n_rounds=len(rounds), tokens_per_s=n / seconds, t_plain_pass_s=step_s,
                           t_draft_s=sum(r.t_draft_s for r in rounds), t_verify_s=sum(r.t_verify_s for r in rounds),
                           t_catch_up_s=sum(r.t_catch_up_s for r in rounds)).plain_tokens_per_s


REPEAT_RUN = 8       # a reply's token "repeats" it where the REPEAT_RUN tokens ending there were written before


def repeated_share(reply: Sequence[int], n: int = REPEAT_RUN) -> float:
    """The share of a reply's tokens that end a run of `n` tokens it had already written (its own n-gram
    repetition rate): near 1 in a reply caught in a loop, near 0 in most others, a copy of the prompt
    included (the prompt is not counted as written)."""
    seen: set[tuple[int, ...]] = set()
    repeated = 0
    for end in range(n, len(reply) + 1):
        run = tuple(reply[end - n:end])
        repeated += run in seen
        seen.add(run)
    return repeated / len(reply) if reply else 0.0


_ADDED_UP = ("n_tokens", "t_total_s", "n_rounds", "n_plain_rounds", "t_plain_s", "n_drafted", "n_accepted",
             "t_draft_s", "t_verify_s", "t_other_s", "t_catch_up_s", "n_copies_passed", "n_copies_passed_right",
             "n_copies_passed_kept")


def continued(first: GenerationStats, second: GenerationStats, rounds: Sequence[RoundEvent],
              tokens: Sequence[int] | None = None) -> GenerationStats:
    """The statistics of a reply written in two runs (Continue): `first` of the reply as it was, `second`
    of the run that wrote on, `rounds` both runs' rounds in order, `tokens` the whole reply's (None: not
    kept). Counts and seconds add up; each ratio is taken over the sums (the speed: all its tokens over
    both runs' decoding time, prompts left out; a draft step over both runs' steps; α and the kept
    share by position from all its rounds, as the strip shows them); the prompt and the time to first
    token are the first run's, how it ended and the machine's costs the second's."""
    s = replace(second)
    for name in _ADDED_UP:
        setattr(s, name, getattr(first, name) + getattr(second, name))
    s.n_prompt_tokens, s.n_prompt_evaluated = first.n_prompt_tokens, first.n_prompt_evaluated
    s.n_prompt_unread, s.ttft_s = first.n_prompt_unread, first.ttft_s
    decode_s = sum(x.n_tokens / x.tokens_per_s for x in (first, second) if x.tokens_per_s)
    s.tokens_per_s = s.n_tokens / decode_s if decode_s > 0 else 0.0
    recorder = StatsRecorder(0, 0)
    for r in rounds:
        recorder.add_round(r, 0)
    by_rounds = recorder.so_far()
    if (by_rounds.n_drafted, by_rounds.n_accepted) == (s.n_drafted, s.n_accepted):
        for name in ("acceptance_rate", "alpha", "mean_accepted", "mean_drafted", "mean_written",
                     "position_acceptance"):
            setattr(s, name, getattr(by_rounds, name))
    else:                                       # (rounds missing: what the counts alone say)
        s.acceptance_rate = s.n_accepted / s.n_drafted if s.n_drafted else None
        s.alpha = s.mean_accepted = s.mean_drafted = s.mean_written = None
        s.position_acceptance = []
    steps = [(x.t_draft_s / x.t_draft_step_s, x.t_draft_step_s) for x in (first, second) if x.t_draft_step_s]
    s.t_draft_step_s = _weighted(steps)
    s.t_target_step_s = _weighted([(max(1, x.n_plain_rounds), x.t_target_step_s) for x in (first, second)
                                   if x.t_target_step_s])   # (a run with no plain step: the engine's price)
    s.t_plain_pass_s = _weighted([(x.n_tokens, x.t_plain_pass_s) for x in (first, second) if x.t_plain_pass_s])
    plain = s.plain_pass_s
    s.c = s.t_draft_step_s / plain if s.t_draft_step_s and plain else (0.0 if s.n_drafted else None)
    s.unused_draft_c = None if steps else (second.unused_draft_c or first.unused_draft_c)
    for name in ("predicted_speedup", "predicted_speedup_measured"):
        setattr(s, name, _speedup_over(first, second, name))
    s.repeated_share = (repeated_share(tokens) if tokens is not None
                        else _weighted([(x.n_tokens, x.repeated_share) for x in (first, second)]) or 0.0)
    counts = [x.threads for x in (first, second) if x.threads]
    s.threads = min(counts, default=0)
    s.threads_most = max(first.threads_most, second.threads_most)
    s.threads_mixed = first.threads_mixed or second.threads_mixed or len(set(counts)) > 1
    cpus = [x.others_cpus for x in (first, second) if x.others_cpus is not None]
    s.others_cpus = max(cpus) if cpus else None
    return s


def _weighted(pairs: Sequence[tuple[float, float]]) -> float | None:
    """The mean of the values of (weight, value) pairs, by weight (None: no weight)."""
    total = sum(w for w, _ in pairs)
    return sum(w * v for w, v in pairs) / total if total > 0 else None


def _speedup_over(first: GenerationStats, second: GenerationStats, name: str) -> float | None:
    """A predicted speed-up (`name`) over both runs: plain decoding's time of each over the predicted
    time of each (a run that drafted nothing is predicted at plain's speed); None where neither has one."""
    if getattr(first, name) is None and getattr(second, name) is None:
        return None
    plain_s = [x.n_tokens * (x.plain_pass_s or 0.0) for x in (first, second)]
    predicted_s = sum(p / (getattr(x, name) or 1.0) for p, x in zip(plain_s, (first, second)))
    return sum(plain_s) / predicted_s if predicted_s > 0 else None
