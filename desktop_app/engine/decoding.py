"""The decoding loop: draft γ tokens, verify them in one target batch, accept by the exact rule,
roll back what was rejected, and yield what happened.

A reply is a prefill, then rounds until it stops. Every round runs the same named steps:

- propose: the drafter the settings name (in auto mode, the drafter and γ auto_policy.py predicts
  to be fastest) proposes x_1..x_γ, with the draft distribution q_i each was drawn from; γ = 0 is a
  plain step;
- verify: the target evaluates [last token, x_1, ..., x_γ] in one batch, with logits read at all γ+1
  positions and nowhere else. Logit i is the target's distribution p_i for the token after x_i
  (x_0 = the last token), so p_0..p_{γ-1} judge the drafts and p_γ gives the bonus token;
- accept: the exact rule (rejection.py) keeps a prefix of the drafts and draws the next token; both
  KV caches then forget what was rejected;
- commit: the round's costs are recorded, its RoundEvent is yielded, then its tokens join the text as
  TokenEvents until an end-of-generation token, a stop string or max_tokens ends the reply.

Invariant at the start of every round: the target's KV cache holds every token but the last one.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable, Generator, Iterator, NamedTuple, Sequence

import numpy as np

from desktop_app.engine import backend, rejection
from desktop_app.engine.auto_policy import AUTO_GAMMA_MAX, PLAIN, AutoPolicy, Choice, Copy, ModelOption
from desktop_app.engine.calibration import VERIFY_SIZES, calibrate
from desktop_app.engine.calibration_store import Remembered
from desktop_app.engine.costs import CostModel
from desktop_app.engine.drafters import Drafter, ModelDrafter, NoDrafter, PromptLookupDrafter, Proposal
from desktop_app.engine.events import FinishEvent, PromptEvent, RoundEvent, StopReason, TokenEvent, TokenKind
from desktop_app.engine.metrics import StatsRecorder, repeated_share
from desktop_app.engine.sampling import SamplingParams, process, softmax_prob
from desktop_app.engine.settings import Controls, SpecSettings
from desktop_app.engine.text import TextStream
from desktop_app.engine.threads import ThreadCount

Event = RoundEvent | TokenEvent | FinishEvent | PromptEvent
PROMPT_PIECE_S = 1.0        # a long prompt pass says how far it is about this often (_prompt_piece) ...
PROMPT_PIECE_MIN = 128      # ... in pieces of at least this many tokens
PRIMER = 32                 # a continued reply's last tokens read into the text stream first (generate)


@dataclass
class Reply:
    """One generation in progress."""

    tokens: list[int]                    # prompt + reply so far: the context every draft follows
    stream: TextStream
    rng: np.random.Generator
    t_start: float
    reply: list[int] = field(default_factory=list)
    recorder: StatsRecorder | None = None
    t_prompt: float = 0.0                # seconds until the prompt was read
    t_first: float | None = None         # when the first token was emitted
    n_round: int = 0
    choice: Choice = PLAIN               # auto mode's choice for the round in progress
    catch_up_s: float = 0.0              # the draft model's catch-up in this round (not drafting time)
    looked: bool = False                 # this round looked for a draft (a drafter, or auto choosing)
    t_catch_up_s: float = 0.0            # ... and in the whole reply
    stop: Callable[[], bool] = lambda: False   # whether the reply was cancelled (checked inside long passes)
    model_offered: bool = False          # auto mode weighed the draft model in some round
    model_drafted: bool = False          # ... and chose it in some round
    passed: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)   # auto's plain steps with a copy
                                         # on offer: (reply position, the copy)
    threads: int = 0                     # the fewest threads it ran on (threads.py), ...
    threads_last: int = 0                # ... the count of its last round ...
    threads_mixed: bool = False          # ... and whether the count changed during it
    threads_suggested: int = 0           # the fewest automatic threads would have run (a set count's replies)
    others_cpus: float | None = None     # the most CPUs other work used at a look during it
    t_recorded: float = 0.0              # when the last round was recorded (at first: the prompt read): the
                                         # next round's time runs from there, so the rounds' times add up to the
                                         # reply's (a round's token events and the bookkeeping between rounds are
                                         # its time too: left out, a plain reply's chart ran 12 % above its speed)


@dataclass(frozen=True)
class Judgement:
    """The target's verdict on one proposal, with what a RoundEvent shows of it."""

    verdict: rejection.Verdict
    target_top: list[int]                # [γ+1]: the target's argmax at each verified position
    p_shown: list[float]                 # [γ]: p_i(x_i)
    confidence: float = 1.0              # the target's top probability where it chose its own token
                                         # (auto mode's prior for the draft model's acceptance)


class RoundTimes(NamedTuple):
    start: float                         # perf_counter() when the round began (the last one was recorded)
    draft_s: float                       # choosing and drafting
    verify_s: float                      # the verify pass, the verdict and the rollback


def judge(proposal: Proposal, views: Sequence[np.ndarray], sampling: SamplingParams,
          rng: np.random.Generator) -> Judgement:
    """The exact rule on the target's logits `views` ([γ+1] rows of [n_vocab_target]): greedy keeps
    drafts while they are the target's argmax; sampling keeps x_i with probability min(1, p_i/q_i)."""
    drafted = proposal.tokens
    target_top = [int(np.argmax(v)) for v in views]
    if sampling.greedy:
        verdict = rejection.accept_greedy(drafted, target_top)
        p_shown = [softmax_prob(views[i], x)[0] for i, x in enumerate(drafted)]
    else:
        p = [process(v, sampling) for v in views]          # p_0..p_γ, each over [n_vocab_target]
        verdict = rejection.accept_sampled(drafted, proposal.q, p, rng)
        p_shown = [p[i].prob(x) for i, x in enumerate(drafted)]
    confidence = softmax_prob(views[verdict.n_accepted], target_top[verdict.n_accepted])[1]
    return Judgement(verdict, target_top, p_shown, confidence)


class SpeculativeDecoder:
    """Runs generations on a loaded target context and optional draft context."""

    def __init__(self, target_ctx: backend.Context, draft_ctx: backend.Context | None = None,
                 threads: ThreadCount | None = None):
        self.target_ctx = target_ctx
        self.threads = threads or ThreadCount([target_ctx, draft_ctx], target_ctx.n_threads)
        self.model = target_ctx.model
        self.costs = CostModel()
        self.policy = AutoPolicy(self.costs)
        self._costs_by_count = {self.threads.current: self.costs}   # (what a pass costs depends on the count:
                                                                    # each count's own, see _follow_threads)
        self.drafters: dict[str, Drafter] = {"none": NoDrafter(), "lookup": PromptLookupDrafter(ends=self.model.is_eog)}
        if draft_ctx is not None:
            self.drafters["model"] = ModelDrafter(draft_ctx, target_ctx.n_vocab, ends=self.model.is_eog)

    def calibrate(self, steps: int = 5, verify_sizes: tuple[int, ...] = VERIFY_SIZES,
                  remembered: Remembered | None = None) -> dict[int, float]:
        """Time the passes every prediction rests on, once, after loading (see calibration.calibrate:
        `remembered` are earlier loads' verify timings; returns this load's)."""
        draft = self.drafters.get("model")
        return calibrate(self.costs, self.target_ctx, draft.ctx if draft else None, steps, verify_sizes, remembered)

    @property
    def has_draft_model(self) -> bool:
        return "model" in self.drafters

    def _drafter(self, settings: SpecSettings) -> Drafter:
        if not settings.speculating:
            return self.drafters["none"]
        return self.drafters.get(settings.drafter, self.drafters["none"])

    def generate(self, prompt: Sequence[int], sampling: SamplingParams, controls: Controls | None = None,
                 max_tokens: int = 256, stop: Sequence[str] = (), primed: int = 0) -> Iterator[Event]:
        """Continue `prompt` (token ids, template already applied). Yields PromptEvents while a long
        prompt is read, then RoundEvent, the round's TokenEvents, ..., and one FinishEvent last,
        whatever the reason for stopping. `primed`: the prompt's last tokens are this many of a reply
        that this one writes on (Continue): its text begins with theirs (TextStream.prime, from the
        last PRIMER of them)."""
        controls = controls or Controls()
        stream = TextStream(stop)
        if primed > 0:
            stream.prime([self.model.piece(t) for t in prompt[-min(primed, PRIMER):]])
        reply = Reply(list(prompt), stream, np.random.default_rng(sampling.seed), time.perf_counter(),
                      stop=lambda: controls.cancelled)
        if not reply.tokens:
            raise ValueError("the prompt is empty")
        self._follow_threads(None, force=True)       # (the prompt's pass runs on it; the reply counts its rounds')
        refused = yield from self._prefill(reply, controls)
        if refused is not None:
            yield refused
            return
        ctx = self.target_ctx
        while True:
            if controls.cancelled:
                yield self._finish(reply, StopReason.CANCELLED)
                return
            self._follow_threads(reply)
            t_round = time.perf_counter()
            if len(reply.tokens) > ctx.n_ctx:        # the verify batch needs 1 + γ slots after n-1 tokens
                yield self._finish(reply, StopReason.CONTEXT_FULL, f"the context of {ctx.n_ctx} tokens is full")
                return
            reply.catch_up_s = 0.0
            drafter, proposal = self._propose(reply, controls.settings, sampling, max_tokens)
            t_draft = time.perf_counter() - t_round - reply.catch_up_s   # (a catch-up is a prompt pass: "other" time)
            if not reply.looked:      # (the loop's own time, as plain decoding's: counted as drafting, a moment
                t_draft = 0.0         # the process waited for a core made a plain reply read 0.99x plain)
            t_verify = time.perf_counter()
            try:
                views = self._verify(reply.tokens, proposal.tokens)
            except backend.ContextFullError as exc:
                yield self._finish(reply, StopReason.CONTEXT_FULL, str(exc))
                return
            judgement = self._accept(reply, drafter, proposal, views, sampling)
            times = RoundTimes(reply.t_recorded, t_draft, time.perf_counter() - t_verify)
            if (yield from self._commit(reply, drafter, proposal, judgement, times, max_tokens)):
                return

    def _follow_threads(self, reply: Reply | None, force: bool = False) -> None:
        """The thread count the machine's load calls for (threads.py), with the costs measured at it: a
        single-token pass is memory-bound and a batch is not, so one thread fewer changes their ratios,
        on which auto's choices rest. A count met for the first time starts from the costs in use, which
        its own rounds then correct; a count met again has its own back."""
        threads = self.threads
        n = threads.adjust(force)
        if reply is not None:                          # (what a reply's rounds ran on)
            reply.threads_mixed |= bool(reply.threads) and n != reply.threads_last
            reply.threads, reply.threads_last = min(reply.threads or n, n), n
            reply.threads_suggested = min(reply.threads_suggested or threads.suggested, threads.suggested)
            if threads.others is not None:
                reply.others_cpus = max(reply.others_cpus or 0.0, threads.others)
        if self.costs is not self._costs_by_count.get(n):
            self.costs = self._costs_by_count.setdefault(n, self.costs.for_another_count())
            self.policy.costs = self.costs

    # -- the steps of a reply, in order

    def _prefill(self, reply: Reply, controls: Controls) -> Generator[PromptEvent, None, FinishEvent | None]:
        """Prefill: the target evaluates the prompt but its last token, reusing whatever prefix its
        cache already holds, a piece at a time (_prompt_piece), yielding a PromptEvent after each but
        the last (a 1,100-token conversation read again after a restart left "reading the prompt…"
        unchanged for 13 s on a busy 2-core machine: a new user's try). In fixed mode the drafter
        reads the prompt too, so that the first round drafts at once; in auto mode a draft model
        reads it only when auto first drafts with it (lazily: a reply auto decodes plainly or with
        copies never waits for it). Returns the FinishEvent of a prompt the context cannot hold, or
        of a cancel that stopped the target's pass, else None."""
        ctx = self.target_ctx
        tokens = reply.tokens
        if len(tokens) > ctx.n_ctx:
            reply.recorder = StatsRecorder(len(tokens), 0)
            reply.t_prompt = time.perf_counter() - reply.t_start
            return self._finish(reply, StopReason.CONTEXT_FULL, f"the prompt has {len(tokens)} tokens but the "
                                f"context holds {ctx.n_ctx}; shorten the conversation or raise the context size")
        settings = controls.settings
        t0 = time.perf_counter()
        cached = backend.common_prefix(ctx.tokens, tokens[:-1])
        try:                                          # (a cancel stops a long prompt pass mid-way)
            for done, total in ctx.sync_in_pieces(tokens[:-1], self._prompt_piece(), stop=reply.stop):
                yield PromptEvent(done, total + 1)    # (+ the last, which the first round reads)
        except backend.Stopped:
            read = max(0, len(ctx.tokens) - cached)
            reply.recorder = StatsRecorder(len(tokens), read)
            reply.recorder.stats.n_prompt_unread = max(0, len(tokens) - cached - read)   # (the last among them)
            reply.t_prompt = time.perf_counter() - reply.t_start
            return self._finish(reply, StopReason.CANCELLED)
        evaluated = len(tokens) - 1 - cached
        self.costs.record_prefill("target", evaluated, time.perf_counter() - t0)
        if settings.auto:
            self.policy.begin()
        else:
            self.policy.drop_copies(new_reply=True)   # (a switch to auto mid-reply must not judge old copies,
                                                      # nor price copies by the last reply's tokens)
            drafter = self._drafter(settings)
            if isinstance(drafter, ModelDrafter) and not controls.cancelled:   # (a cancel stops at the first round)
                t0 = time.perf_counter()
                behind = drafter.behind(tokens)
                if behind > self._prompt_piece():     # (a long read of its own: said, not counted)
                    yield PromptEvent(0, behind, "draft")
                try:
                    drafter.begin(tokens, stop=reply.stop)   # the draft model reads the
                    self.costs.record_prefill(drafter.name, behind, time.perf_counter() - t0)   # prompt now
                except backend.Stopped:               # (its first round, or the next reply, reads on)
                    pass
        reply.recorder = StatsRecorder(len(tokens), evaluated + 1)
        reply.t_recorded = time.perf_counter()
        reply.t_prompt = reply.t_recorded - reply.t_start
        return None

    def _prompt_piece(self) -> int:
        """Tokens a prompt pass reads between its PromptEvents: about PROMPT_PIECE_S of reading at the
        target's measured rate, from PROMPT_PIECE_MIN (on a 2-core CPU, pieces of 128, 256 and 512 tokens
        read a 1,024-token prompt of the demo target in the same 10.6 s) to a whole batch (where the
        target reads thousands of tokens a second, as on a GPU, its own batch size suits it best)."""
        per_token = self.costs.prefill_s.get("target")
        fits = PROMPT_PIECE_S / per_token if per_token else PROMPT_PIECE_MIN
        return int(min(self.target_ctx.n_batch, max(PROMPT_PIECE_MIN, fits)))

    def _propose(self, reply: Reply, settings: SpecSettings, sampling: SamplingParams,
                 max_tokens: int) -> tuple[Drafter, Proposal]:
        """Propose: the chosen drafter drafts up to γ_max tokens, as many as the settings (in auto
        mode, auto's own ceiling), the context and max_tokens allow; a draft shorter than draft_min
        (unless it ends with an end-of-generation token: it stops there, and may end the reply)
        is dropped (a plain step instead)."""
        drafter = self._drafter(settings)
        room = self.target_ctx.n_ctx - len(reply.tokens)
        left = max_tokens - len(reply.reply)
        gamma_max = min(AUTO_GAMMA_MAX if settings.auto else settings.draft_max, room, left - 1)
        reply.looked = drafter.name != "none" and gamma_max > 0
        if not reply.looked:
            reply.choice = PLAIN
            return self.drafters["none"], Proposal()
        if settings.auto:
            return self._auto_propose(reply, settings, sampling, gamma_max, left)
        try:
            proposal = drafter.draft(reply.tokens, gamma_max, sampling, reply.rng, settings.draft_p_min)
        except backend.ContextFullError:              # a draft context smaller than the target's
            proposal = Proposal()
        if (proposal.tokens and len(proposal.tokens) < settings.draft_min
                and not self.model.is_eog(proposal.tokens[-1])):    # (one that ends the reply is kept)
            proposal = Proposal(n_steps=proposal.n_steps, t_s=proposal.t_s)
        reply.choice = Choice(drafter.name, len(proposal.tokens), 0.0)   # (auto learns from fixed rounds too)
        reply.model_drafted |= drafter.name == "model"     # (fixed mode, chosen mid-reply after auto)
        return drafter, proposal

    def _auto_propose(self, reply: Reply, settings: SpecSettings, sampling: SamplingParams, gamma_max: int,
                      left: int) -> tuple[Drafter, Proposal]:
        """Auto mode: offer the policy this round's lookup copy and (when the settings name it) the
        draft model, then draft as it chooses. A draft model that has not read the text yet catches
        up first, in one batched pass, timed as a prompt pass; a few tokens behind (ModelDrafter.
        catch_up) are read in its first draft pass, whose share beyond a step is catch-up time too."""
        lookup: PromptLookupDrafter = self.drafters["lookup"]
        copy = Copy.find(lookup, reply.tokens, gamma_max, len(reply.reply))
        model = self.drafters.get("model") if settings.drafter == "model" else None
        option = ModelOption(model.behind(reply.tokens)) if model and model.can_draft(reply.tokens) else None
        choice = reply.choice = self.policy.choose(reply.tokens, gamma_max, copy, option, left, len(reply.reply))
        reply.model_offered |= option is not None
        reply.model_drafted |= choice.drafter == "model"
        if choice.drafter == "none" and copy is not None and copy.tokens and self.costs.verify_cost(1):
            reply.passed.append((len(reply.reply), copy.tokens))   # (weighed and passed over, not unpriced)
        if choice.drafter == "lookup":
            return lookup, Proposal.copied(copy.tokens[:choice.gamma])
        if choice.drafter == "model":
            t0 = time.perf_counter()
            try:
                n = model.catch_up(reply.tokens, stop=reply.stop)
            except backend.Stopped:                   # cancelled: a plain step, then the loop ends the reply
                return self.drafters["none"], Proposal()
            read_s = time.perf_counter() - t0
            self.costs.record_prefill("model", n, read_s)
            try:
                proposal = model.draft(reply.tokens, choice.gamma, sampling, reply.rng, settings.draft_p_min)
            except backend.ContextFullError:
                proposal = Proposal()
            reply.catch_up_s = read_s + proposal.t_read_s   # (and the few tokens its first pass read)
            reply.t_catch_up_s += reply.catch_up_s
            return model, proposal
        return self.drafters["none"], Proposal()

    def _verify(self, tokens: Sequence[int], drafted: Sequence[int]) -> list[np.ndarray]:
        """Verify: one target pass over [last token, x_1..x_γ] after the rest of the context. Returns the
        logits at its γ+1 positions ([γ+1] views of [n_vocab_target], valid until the next pass)."""
        ctx = self.target_ctx
        ctx.truncate(len(tokens) - 1)
        ctx.eval([tokens[-1], *drafted], logits="all")
        return [ctx.logits(i) for i in range(len(drafted) + 1)]

    def _accept(self, reply: Reply, drafter: Drafter, proposal: Proposal, views: Sequence[np.ndarray],
                sampling: SamplingParams) -> Judgement:
        """Accept: judge the drafts, then roll back what was rejected: the target keeps the last token
        and the accepted drafts, and the drafter forgets the rest and learns the verdict."""
        judgement = judge(proposal, views, sampling, reply.rng)
        n_accepted = judgement.verdict.n_accepted
        self.target_ctx.truncate(len(reply.tokens) + n_accepted)
        drafter.rollback(len(reply.tokens) + n_accepted)
        drafter.observe(len(proposal.tokens), n_accepted)
        return judgement

    def _commit(self, reply: Reply, drafter: Drafter, proposal: Proposal, judgement: Judgement,
                times: RoundTimes, max_tokens: int) -> Generator[Event, None, bool]:
        """Commit: record the round's costs, yield its RoundEvent, then add its tokens to the text, one
        TokenEvent each. Returns True when the reply ended here (its FinishEvent yielded). The round is
        cut where the reply ends (_record_round), so only its last token can end it."""
        event, texts = self._record_round(reply, drafter, proposal, judgement, times, max_tokens)
        yield event
        for token, kind, text in zip(event.emitted, event.kinds, texts):
            reply.tokens.append(token)
            reply.reply.append(token)
            if reply.t_first is None:
                reply.t_first = time.perf_counter()
            yield TokenEvent(token, text, kind, len(reply.reply) - 1)
        for ended, reason in ((event.end == "eos", StopReason.EOS), (reply.stream.stopped, StopReason.STOP_STRING),
                              (len(reply.reply) >= max_tokens, StopReason.MAX_TOKENS)):
            if ended:
                yield self._finish(reply, reason)
                return True
        return False

    def _record_round(self, reply: Reply, drafter: Drafter, proposal: Proposal, judgement: Judgement,
                      times: RoundTimes, max_tokens: int) -> tuple[RoundEvent, list[str]]:
        """The round's event, cut where the reply ends, and the text each of its tokens releases (pushed
        into the reply's text stream, which finds a stop string where one completes)."""
        drafted = proposal.tokens
        k = len(drafted)
        verdict = judgement.verdict
        n_acc = verdict.n_accepted
        emitted = [*drafted[:n_acc], verdict.next_token]
        last_kind = TokenKind.CORRECTION if verdict.corrected else (TokenKind.BONUS if k else TokenKind.PLAIN)
        kinds = [TokenKind.ACCEPTED] * n_acc + [last_kind]
        self.costs.record_verify(k + 1, times.verify_s)
        self.costs.record_draft(drafter.name, k, proposal.t_s - proposal.t_read_s)   # (a step's price)
        self.policy.observe(reply.choice, k, n_acc, times.draft_s + times.verify_s, judgement.confidence)

        model = self.model
        drafted_text = tuple(model.special_piece(x).decode("utf-8", errors="replace") for x in drafted)
        now = reply.t_recorded = time.perf_counter()
        event = RoundEvent(
            index=reply.n_round, drafter=drafter.name if k else "none", drafted=tuple(drafted),
            drafted_text=drafted_text, q=tuple(proposal.q_token), p=tuple(judgement.p_shown), accepted=n_acc,
            emitted=tuple(emitted),
            emitted_text=drafted_text[:n_acc] + (model.special_piece(emitted[-1]).decode("utf-8", "replace"),),
            kinds=tuple(kinds), target_top=tuple(judgement.target_top), t_draft_s=times.draft_s,
            t_verify_s=times.verify_s, t_round_s=now - times.start, n_past=len(reply.tokens),
            plain_step_s=self.costs.verify_s.get(1, 0.0), t_catch_up_s=reply.catch_up_s)
        room, texts = max_tokens - len(reply.reply), []
        for token in emitted:
            if model.is_eog(token) or len(texts) >= room or reply.stream.stopped:
                break
            texts.append(reply.stream.push(model.piece(token)))
        event = _cut_at_end(event, model.is_eog, room, len(texts) if reply.stream.stopped else None)
        reply.recorder.add_round(event, proposal.n_steps)
        reply.n_round += 1
        return event, texts

    def _finish(self, reply: Reply, reason: StopReason, message: str = "") -> FinishEvent:
        tail = reply.stream.finish()
        t_end = time.perf_counter()
        stats = reply.recorder.finish(len(reply.reply), t_end - reply.t_start, reply.t_prompt,
                                      (reply.t_first or t_end) - reply.t_start, reason.value, self.costs)
        stats.t_catch_up_s = reply.t_catch_up_s
        stats.threads, stats.threads_most, stats.others_cpus = reply.threads, self.threads.most, reply.others_cpus
        stats.threads_mixed, stats.threads_suggested = reply.threads_mixed, reply.threads_suggested
        step, single = self.costs.draft_step_s.get("model"), self.costs.verify_cost(1)
        if reply.model_offered and not reply.model_drafted and step and single:
            stats.unused_draft_c = step / single
        runs = [backend.common_prefix(tokens, reply.reply[at:at + len(tokens)]) for at, tokens in reply.passed]
        stats.n_copies_passed, stats.n_copies_passed_right = len(runs), sum(run > 0 for run in runs)
        stats.n_copies_passed_kept = sum(runs)
        stats.repeated_share = repeated_share(reply.reply)
        return FinishEvent(reply.stream.text, tuple(reply.reply), stats, reason, message, tail)


def _cut_at_end(event: RoundEvent, is_eog, room: int, stop: int | None = None) -> RoundEvent:
    """The round as far as the reply goes: up to the token that completes a stop string (its first
    `stop`), or up to and including an end-of-generation token, and no more tokens than max_tokens leaves
    `room` for, whichever comes first (a tie as _commit checks them: the stop string first). Drafts past
    that point are dropped with it (they were proposals for text that will never exist); the statistics
    count the round as cut. (Past a stop string the strip showed a token of the target's that the reply
    never had: a new user's try.)"""
    n = len(event.emitted)
    eos = next((i + 1 for i, token in enumerate(event.emitted) if is_eog(token)), None)
    cuts = [(at, rank, end) for at, rank, end in ((stop, 0, "stop_string"), (eos, 1, "eos"), (room, 2, "max_tokens"))
            if at is not None and at <= n]
    if not cuts:
        return event
    n, _, end = min(cuts)
    accepted = min(event.accepted, n)
    keep_drafts = min(event.gamma, n)
    return replace(event, drafted=event.drafted[:keep_drafts], drafted_text=event.drafted_text[:keep_drafts],
                   q=event.q[:keep_drafts], p=event.p[:keep_drafts], accepted=accepted,
                   emitted=event.emitted[:n], emitted_text=event.emitted_text[:n], kinds=event.kinds[:n],
                   target_top=event.target_top[:keep_drafts + 1], end=end)
