"""Replay: run a setting over a recorded trace (trace.py) under a cost profile (cost_profiles.py).

The same text, the same copies and the same draft-model guesses as the recorded run (for a sampled
reply, the draft model's tokens kept by one seeded draw per reply position: trace.py); only the
costs are the profile's. Fixed settings draft as the app's fixed modes do; "auto" drives the very
AutoPolicy the decoder uses, which learns the profile's costs from the rounds it sees, after a
calibration at load as the app's. So policies are compared on the same work, on machines we do not
have, in milliseconds.

A round that drafts γ tokens with the draft model costs γ draft steps plus a verify pass of γ+1
tokens; a copied draft costs only its verify pass; a plain step is a verify pass of 1. A draft model
that has not read the text first reads it as the app prices a read (CostModel.prefill_cost: the
profile's prompt cost per token, and a step besides where it is a pass of its own), in fixed mode and
auto alike: auto's lazy prefill, the tokens of rounds it did not draft, and, after a round that kept
every draft, its last draft, which no draft pass evaluated. Time to first token: the target's prompt
pass (and, where the draft model reads the prompt at once, the draft's), then the first round.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

import numpy as np

from desktop_app.engine.auto_policy import AUTO_GAMMA_MAX, AutoPolicy, Copy, ModelOption
from desktop_app.engine.auto_policy import PLAIN as PLAIN_CHOICE
from desktop_app.engine.calibration import CALIBRATION_STEPS, VERIFY_SIZES, price
from desktop_app.engine.calibration_store import KEEP
from desktop_app.engine.cost_profiles import CostProfile
from desktop_app.engine.costs import CostModel
from desktop_app.engine.drafters import PromptLookupDrafter
from desktop_app.engine.trace import Trace

FIXED_LOOKUP = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
FIXED_MODEL = (1, 2, 3, 4, 6, 8, 12, 16)


@dataclass(frozen=True)
class Setting:
    drafter: str             # "none" (plain), "lookup", "model", "auto" (model and lookup when the trace
                             # has the draft's guesses), or "ngram-simple" (llama.cpp's: n = ngram_n, γ = m)
    gamma: int = 0
    ngram_n: int = 0

    @property
    def name(self) -> str:
        if self.drafter == "none":
            return "plain"
        if self.drafter == "auto":
            return self.drafter
        if self.drafter == "ngram-simple":
            return f"ngram-simple n={self.ngram_n} m={self.gamma}"
        return f"{self.drafter} γ={self.gamma}"


PLAIN = Setting("none")
AUTO = Setting("auto")


def fixed_settings(has_draft: bool) -> list[Setting]:
    """Every fixed setting a user could pick: plain, lookup and (with a draft model) model at each γ."""
    out = [PLAIN] + [Setting("lookup", g) for g in FIXED_LOOKUP]
    if has_draft:
        out += [Setting("model", g) for g in FIXED_MODEL]
    return out


@dataclass
class ReplayResult:
    setting: str
    n_tokens: int
    decode_s: float          # after the prompt pass(es): what tokens per second divides by
    ttft_s: float
    rounds: dict[str, int] = field(default_factory=dict)     # rounds per drafter ("none" = plain)
    drafted: int = 0
    kept: int = 0
    trail: list[tuple[str, int, int]] = field(default_factory=list)   # every round: (drafter, drafted, kept)

    @property
    def tokens_per_s(self) -> float:
        return self.n_tokens / self.decode_s if self.decode_s > 0 else 0.0


def ngram_simple_copy(context, n: int, m: int) -> list[int]:
    """llama.cpp's ngram-simple draft (common/ngram-map.cpp, common_ngram_simple_draft): the m tokens
    after the most recent earlier occurrence of the last n tokens; nothing when fewer than n follow."""
    cur = len(context)
    if cur <= n + m + 1:
        return []
    pattern = list(context[cur - n:])
    for j in range(cur - n - 1, 0, -1):
        if list(context[j:j + n]) == pattern:
            copy_max = min(m, cur - (j + n))
            return [] if copy_max < n else [int(t) for t in context[j + n:j + n + copy_max]]
    return []


_VERIFY, _STEPS, _PREFILL = 1, 2, 3       # the kinds of pass, each with its own noise (numpy pads a seed
                                          # with zeros: [seed, 0] would be the calibration's own stream)
_KEEP = 4                                 # ... and a sampled trace's draws for the draft model's tokens
_WIDEST = max(AUTO_GAMMA_MAX, *FIXED_LOOKUP, *FIXED_MODEL) + 2


@functools.lru_cache(maxsize=256)
def _normals(seed: int, kind: int, positions: int) -> np.ndarray:
    """Standard normal draws, [reply position, batch size or step count], for one seed and kind."""
    return np.random.default_rng([seed, kind]).standard_normal((positions, _WIDEST))


@functools.lru_cache(maxsize=256)
def _keep_draws(seed: int, positions: int) -> np.ndarray:
    """One uniform draw per reply position ([positions]), against which a sampled trace's draft-model
    token there is kept (Trace.model_run): the same for every setting replayed with `seed`."""
    return np.random.default_rng([seed, _KEEP]).random(positions)


class _Clock:
    """The profile's costs, with seeded multiplicative noise (a shared machine is not a metronome).

    A pass given `at` (its reply position) draws the noise of where it falls, not the next in turn:
    with one seed, every setting pays the same for the same pass at the same place (a plain step at
    position 40 costs plain decoding and auto alike), so two settings compared on one seed differ
    only by the noise of the rounds in which they differ (common random numbers). Passes without
    `at` (calibration's) draw in turn from the seed's own stream."""

    def __init__(self, profile: CostProfile, noise: float, seed: int, positions: int = 0):
        self.profile = profile
        self.noise = noise
        self.seed = seed
        self.positions = positions
        self.rng = np.random.default_rng(seed)

    def _jitter(self, seconds: float, kind: int = 0, at: int | None = None, size: int = 0) -> float:
        if not self.noise:
            return seconds
        if at is None:
            z = self.rng.normal()
        else:
            z = _normals(self.seed, kind, self.positions)[at, min(int(size), _WIDEST - 1)]
        return seconds * float(np.exp(self.noise * z))

    def verify(self, batch: int, at: int | None = None) -> float:
        return self._jitter(self.profile.verify_s(batch), _VERIFY, at, batch)

    def steps(self, n: int, at: int | None = None) -> float:
        return self._jitter(n * self.profile.draft_step_ms / 1000, _STEPS, at, n)

    def prefill(self, model: str, n: int, at: int | None = None) -> float:
        """A prompt pass (or a catch-up) of n tokens, priced as the app prices it (CostModel.prefill_cost:
        a single pass besides where it is a pass of its own): its noise is keyed by the model, not by n."""
        return self._jitter(self.profile.read_s(model, n), _PREFILL, at, model == "model")


def calibrated(clock: _Clock, loads: int = 1) -> CostModel:
    """What the app's calibration would measure on this profile (calibration.py) at the `loads`-th
    load on the machine: each size priced at the median of its last calibration_store.KEEP timings,
    each a ratio to its load's single-token pass. (Which load timed which size is not modelled: from
    the KEEP-th load on, every size is priced as at the KEEP-th. The app divides each size by single
    passes timed beside it, against drift; this clock jitters each pass on its own and never drifts,
    so one single pass per load stands for them.) The draft's step is priced as the app prices it, a
    ratio of its fastest step to the fastest single pass timed in turn with it, times the single pass;
    its price per token read, from one prompt pass of its own (the app's is the faster of two, as a
    ratio too: on this clock, which never drifts, much the same)."""
    earlier = [_timed_ratios(clock) for _ in range(min(loads, KEEP) - 1)]
    costs = CostModel()
    costs.verify_s[1] = clock.verify(1)
    for k in VERIFY_SIZES:
        costs.verify_s[k] = clock.verify(k)
    if earlier:
        now = {k: costs.verify_s[k] / costs.verify_s[1] for k in VERIFY_SIZES}
        for k in VERIFY_SIZES:
            costs.verify_s[k] = price(costs.verify_s[1], [r[k] for r in [*earlier, now]])
    reads = {model: clock.prefill(model, 64) for model in ("target", "model")}
    # the draft's step as the app prices it (calibration._draft_ratios): the fastest of its steps over the
    # fastest of the target's single passes timed in turn with them (two more beside its prompt passes)
    singles = [clock.verify(1) for _ in range(CALIBRATION_STEPS + 2)]
    steps = [clock.steps(1) for _ in range(CALIBRATION_STEPS)]
    costs.draft_step_s["model"] = min(steps) / min(singles) * costs.verify_s[1]
    for model, seconds in reads.items():
        costs.record_prefill(model, 64, seconds)
    return costs


def _timed_ratios(clock: _Clock) -> dict[int, float]:
    single = clock.verify(1)
    return {k: clock.verify(k) / single for k in VERIFY_SIZES}


def replay(trace: Trace, profile: CostProfile, setting: Setting, noise: float = 0.0, seed: int = 0,
           policy: AutoPolicy | None = None, loads: int = 1) -> ReplayResult:
    """Run `setting` over `trace` under `profile`. For auto, `policy` (default: a fresh one, as after
    the `loads`-th load on the machine: calibrated()) carries what earlier replies taught it."""
    clock = _Clock(profile, noise, seed, len(trace.reply) + 1)
    draws = _keep_draws(seed, len(trace.reply))
    text = trace.prompt + trace.reply
    n_prompt, n = len(trace.prompt), len(trace.reply)
    lookup = PromptLookupDrafter(ends=trace.ends.__contains__ if trace.ends else None)   # (as decoding.py's)
    auto = setting.drafter == "auto"
    if auto and policy is None:
        policy = AutoPolicy(calibrated(clock, loads))
    use_model = auto and trace.has_draft
    prompt_s = clock.prefill("target", n_prompt - 1, at=0)
    draft_read = 0                                  # tokens of the text the draft model has read
    if setting.drafter == "model":
        prompt_s += clock.prefill("model", n_prompt - 1, at=0)    # fixed mode reads the prompt at once
        draft_read = n_prompt - 1
    if auto:
        policy.begin()
    result = ReplayResult(setting.name, n, 0.0, 0.0)
    t = 0.0
    j = 0
    while j < n:
        context = text[:n_prompt + j]
        left = n - j
        drafter, drafted, kept, cost = "none", 0, 0, 0.0
        choice = PLAIN_CHOICE
        behind = max(0, len(context) - 1 - draft_read)   # (fixed mode: 1 after a round that kept every draft)
        if setting.drafter in ("lookup", "model", "ngram-simple"):
            g = min(setting.gamma, left - 1)
            if g > 0 and setting.drafter == "lookup":
                copy, _ = lookup.copy(context, g)
                drafter, drafted, kept = "lookup", len(copy), trace.copy_run(j, copy)
            elif g > 0 and setting.drafter == "ngram-simple":
                copy = ngram_simple_copy(context, setting.ngram_n, g)
                drafter, drafted, kept = "lookup", len(copy), trace.copy_run(j, copy)
            elif g > 0:
                drafter, drafted, kept = "model", g, trace.model_run(j, g, draws)
                cost += clock.prefill("model", behind, at=j) + clock.steps(g, at=j)   # (auto's reading, alike)
        elif auto and left > 1:                          # (the decoder asks nothing when no draft fits)
            g_max = min(AUTO_GAMMA_MAX, left - 1)
            option = ModelOption(behind) if use_model else None
            copy = Copy.find(lookup, context, g_max, j)
            choice = policy.choose(context, g_max, copy, option, trace.max_tokens - j, j)   # not the end: max_tokens
            if choice.drafter == "lookup":
                drafter, drafted = "lookup", choice.gamma
                kept = trace.copy_run(j, copy.tokens[:drafted])
            elif choice.drafter == "model":
                if behind:
                    catch_up = clock.prefill("model", behind, at=j)
                    policy.costs.record_prefill("model", behind, catch_up)
                    cost += catch_up
                drafter, drafted = "model", choice.gamma
                kept = trace.model_run(j, drafted, draws)
                steps = clock.steps(drafted, at=j)
                policy.costs.record_draft("model", drafted, steps)
                cost += steps
        if not drafted:
            drafter = "none"                          # (a copy with nothing to copy is a plain step)
        verify = clock.verify(drafted + 1, at=j)
        cost += verify
        if auto:
            policy.costs.record_verify(drafted + 1, verify)
            at = min(j + kept, n - 1)
            policy.observe(choice, drafted, kept, cost, trace.confidence[at] if trace.confidence else None)
        if drafter == "model":                        # the draft evaluated its drafts but the last
            draft_read = len(context) + min(kept, drafted - 1)
        t += cost
        if j == 0:
            result.ttft_s = prompt_s + cost
        result.rounds[drafter] = result.rounds.get(drafter, 0) + 1
        result.trail.append((drafter, drafted, kept))
        result.drafted += drafted
        result.kept += kept
        j += kept + 1
    result.decode_s = t
    return result


BAR_OF_BEST = 0.95          # issue #14: auto at this share of the best fixed setting at least, and at plain's speed


@dataclass(frozen=True)
class Verdict:
    """Auto against every fixed setting on one trace under one profile (means over noise seeds)."""

    profile: str
    prompt: str
    auto_tokens_per_s: float
    plain_tokens_per_s: float
    best_fixed: str
    best_fixed_tokens_per_s: float
    auto_ttft_s: float
    plain_ttft_s: float
    auto_rounds: dict

    @property
    def vs_best(self) -> float:
        return self.auto_tokens_per_s / self.best_fixed_tokens_per_s

    @property
    def vs_plain(self) -> float:
        return self.auto_tokens_per_s / self.plain_tokens_per_s

    @property
    def ttft_vs_plain(self) -> float:
        return self.auto_ttft_s / self.plain_ttft_s if self.plain_ttft_s else 1.0

    @property
    def short(self) -> bool:
        """Short of issue #14's bar: below BAR_OF_BEST of the best fixed setting, or below plain's speed."""
        return self.vs_best < BAR_OF_BEST or self.vs_plain < 1.0


def _mean(runs: list[ReplayResult]) -> tuple[float, float, dict]:
    """(mean tokens per second, mean TTFT, rounds of the first) of replays of one setting."""
    return (sum(r.tokens_per_s for r in runs) / len(runs), sum(r.ttft_s for r in runs) / len(runs), runs[0].rounds)


def _fixed_rates(trace: Trace, profile: CostProfile, has_draft: bool, noise: float, seeds: int) -> dict[str, tuple]:
    """Every fixed setting's _mean over `seeds` noise seeds on `trace`."""
    return {s.name: _mean([replay(trace, profile, s, noise=noise, seed=k) for k in range(seeds)])
            for s in fixed_settings(has_draft and trace.has_draft)}


def _verdict(trace: Trace, profile: CostProfile, fixed: dict, auto: tuple) -> Verdict:
    best = max(fixed, key=lambda name: fixed[name][0])
    plain = fixed[PLAIN.name]
    return Verdict(profile.name, trace.name, auto[0], plain[0], best, fixed[best][0], auto[1], plain[1], auto[2])


def judge(trace: Trace, profile: CostProfile, has_draft: bool, noise: float = 0.05, seeds: int = 3) -> Verdict:
    """Replay auto, fresh as after loading, and every fixed setting (fixed_settings) on `trace` under
    `profile`, each with the same `seeds` noise seeds, and compare their mean tokens per second."""
    auto = _mean([replay(trace, profile, AUTO, noise=noise, seed=k) for k in range(seeds)])
    return _verdict(trace, profile, _fixed_rates(trace, profile, has_draft, noise, seeds), auto)


def judge_warm(traces: list[Trace], profile: CostProfile, has_draft: bool, noise: float = 0.05,
               seeds: int = 3) -> list[Verdict]:
    """Auto as the app runs it: one policy, calibrated once, carried from reply to reply. For every
    order that rotates `traces`, each of `seeds` noise seeds (the fixed settings' own, so that each
    reply meets the noise they met on its trace) replays the order twice round with one policy; every
    reply but the first (judge() has that) gets a Verdict, its tokens per second the mean over the
    seeds against the fixed settings' on its trace (as judge()), with `prompt` naming it and the reply
    before it ("summary after edit")."""
    fixed = {t.name: _fixed_rates(t, profile, has_draft, noise, seeds) for t in traces}
    verdicts = []
    for rot in range(len(traces)):
        order = (traces[rot:] + traces[:rot]) * 2
        runs = _carried(order, profile, noise, seeds)
        for i in range(1, len(order)):
            v = _verdict(order[i], profile, fixed[order[i].name], _mean(runs[i]))
            verdicts.append(dataclasses.replace(v, prompt=f"{order[i].name} after {order[i - 1].name}"))
    return verdicts


def judge_conversation(turns: list[Trace], profile: CostProfile, has_draft: bool, noise: float = 0.05,
                       seeds: int = 3) -> list[Verdict]:
    """Auto through one conversation's turns in order (each turn's prompt holds the turns before it:
    scripts/record_traces.py --conversations), one policy carried from turn to turn as in the window,
    against every fixed setting on each turn. (Each replay starts with the draft model behind by the
    whole prompt: in the window it has already read the earlier turns where it drafted in them.)"""
    runs = _carried(turns, profile, noise, seeds)
    return [_verdict(t, profile, _fixed_rates(t, profile, has_draft, noise, seeds), _mean(r))
            for t, r in zip(turns, runs)]


def _carried(order: list[Trace], profile: CostProfile, noise: float, seeds: int) -> list[list[ReplayResult]]:
    """Auto's replays of `order`, one policy (calibrated once) carried from reply to reply, for each of
    `seeds` noise seeds: [reply][seed]."""
    runs: list[list[ReplayResult]] = [[] for _ in order]
    for k in range(seeds):
        clock = _Clock(profile, noise, 1000 + k)
        policy = AutoPolicy(calibrated(clock))
        for i, trace in enumerate(order):
            runs[i].append(replay(trace, profile, AUTO, noise=noise, seed=k, policy=policy))
    return runs
