"""The decoding loop: draft γ tokens, verify them in one target batch, accept by the exact rule,
roll back what was rejected, and yield what happened.

Invariant at the start of every round: the target's KV cache holds every token but the last one;
the verify batch is [last token, x_1, ..., x_γ], with logits read at all γ+1 positions and nowhere
else. Logit i is the target's distribution p_i for the token after x_i (x_0 = the last token), so
p_0..p_{γ-1} judge the drafts and p_γ gives the bonus token.
"""
from __future__ import annotations

import time
from typing import Iterator, Sequence

import numpy as np

from desktop_app.engine import backend, rejection
from desktop_app.engine.costs import CostModel, round_rate
from desktop_app.engine.drafters import ModelDrafter, NoDrafter, PromptLookupDrafter, Proposal
from desktop_app.engine.events import FinishEvent, RoundEvent, StopReason, TokenEvent, TokenKind
from desktop_app.engine.metrics import StatsRecorder
from desktop_app.engine.sampling import SamplingParams, process, softmax_prob
from desktop_app.engine.settings import Controls
from desktop_app.engine.text import TextStream

Event = RoundEvent | TokenEvent | FinishEvent


class SpeculativeDecoder:
    """Runs generations on a loaded target context and optional draft context."""

    def __init__(self, target_ctx: backend.Context, draft_ctx: backend.Context | None = None):
        self.target_ctx = target_ctx
        self.model = target_ctx.model
        self.costs = CostModel()
        self.drafters = {"none": NoDrafter(), "lookup": PromptLookupDrafter(self.costs)}
        if draft_ctx is not None:
            self.drafters["model"] = ModelDrafter(draft_ctx)

    def calibrate(self, steps: int = 5, verify_sizes: tuple[int, ...] = (2, 3, 4, 5, 8, 9, 16, 17)) -> None:
        """Time the passes every prediction rests on, once, after loading: single-token passes of the
        target and the draft (the median of `steps` warm passes) and one target pass over each verify
        batch size, logits read at every position as a verify pass reads them. Batches of 4, 8 and 16
        cost less than their neighbours on this project's x86 machine, so they are measured too, not
        interpolated.
        These are the yardsticks for c, for predicted speed-ups, for auto mode and for prompt lookup's
        draft length; real rounds refine them as they run."""
        contexts = [("target", self.target_ctx)]
        if "model" in self.drafters:
            contexts.append(("model", self.drafters["model"].ctx))
        for name, ctx in contexts:
            ctx.clear()
            start = ctx.model.bos if ctx.model.bos >= 0 else 0
            ctx.eval([start], logits="last")                    # warm-up, not timed
            times = []
            for _ in range(min(steps, ctx.n_ctx - 1)):
                token = int(np.argmax(ctx.logits(-1)))
                t0 = time.perf_counter()
                ctx.eval([token], logits="last")
                int(np.argmax(ctx.logits(-1)))
                times.append(time.perf_counter() - t0)
            median = float(np.median(times)) if times else 0.0
            if name == "target":
                self.costs.verify_s[1] = median
                base = len(ctx.tokens)
                for k in verify_sizes:
                    if base + k > ctx.n_ctx:
                        break
                    passes = []
                    for _ in range(2):                # the first pass of a new batch shape sets up buffers
                        t0 = time.perf_counter()
                        ctx.eval([start] * k, logits="all")
                        [int(np.argmax(ctx.logits(i))) for i in range(k)]
                        passes.append(time.perf_counter() - t0)
                        ctx.truncate(base)
                    self.costs.verify_s[k] = min(passes)
            else:
                self.costs.draft_step_s["model"] = median
            ctx.clear()

    def _auto_choice(self, drafter, tokens, gamma_max, sampling, rng):
        """Auto mode: (drafter, γ, proposal or None) for the next round, the one with the best predicted
        tokens per second; γ = 0 decodes plainly when nothing is predicted to beat it. Prompt lookup
        sizes its own drafts from its per-match-length acceptance and the verify costs. With a draft
        model, a lookup copy competes each round too: copying costs nothing, so when the text repeats
        earlier text a lookup draft can pay where the model's cannot."""
        costs = self.costs
        lookup = self.drafters["lookup"]
        copied = lookup.draft(tokens, gamma_max, sampling, rng)
        if drafter is lookup:
            return lookup, len(copied.tokens), copied
        gamma = costs.choose_gamma(drafter.name, gamma_max)
        if not copied.tokens:
            return drafter, gamma, None
        n_copied = len(copied.tokens)
        rate_lookup = round_rate(lookup.alpha, n_copied, 0.0, costs.verify_cost(n_copied + 1))
        rate_model = 0.0
        if gamma > 0:
            rate_model = round_rate(costs.alpha(drafter.name), gamma, costs.draft_step_s.get(drafter.name, 0.0),
                                    costs.verify_cost(gamma + 1))
        if rate_lookup >= rate_model:
            return lookup, len(copied.tokens), copied
        return drafter, gamma, None

    @property
    def has_draft_model(self) -> bool:
        return "model" in self.drafters

    def _drafter(self, controls: Controls):
        s = controls.settings
        if not s.speculating:
            return self.drafters["none"]
        return self.drafters.get(s.drafter, self.drafters["none"])

    def generate(self, prompt: Sequence[int], sampling: SamplingParams, controls: Controls | None = None,
                 max_tokens: int = 256, stop: Sequence[str] = ()) -> Iterator[Event]:
        """Continue `prompt` (token ids, template already applied). Yields RoundEvent, then the round's
        TokenEvents, ..., and one FinishEvent last, whatever the reason for stopping."""
        controls = controls or Controls()
        t_start = time.perf_counter()
        ctx = self.target_ctx
        model = self.model
        tokens = list(prompt)
        reply: list[int] = []
        stream = TextStream(stop)
        rng = np.random.default_rng(sampling.seed)
        if not tokens:
            raise ValueError("the prompt is empty")

        def finish(reason: StopReason, message: str = "") -> FinishEvent:
            tail = stream.finish()
            t_end = time.perf_counter()
            stats = recorder.finish(len(reply), t_end - t_start, t_prompt, (t_first or t_end) - t_start,
                                    reason.value, self.costs)
            return FinishEvent(stream.text, tuple(reply), stats, reason, message, tail)

        # Prompt: evaluate all but the last token, reusing whatever prefix the cache already holds.
        t_first = None
        if len(tokens) > ctx.n_ctx:
            recorder = StatsRecorder(len(tokens), 0)
            t_prompt = time.perf_counter() - t_start
            yield finish(StopReason.CONTEXT_FULL, f"the prompt has {len(tokens)} tokens but the context holds "
                                                  f"{ctx.n_ctx}; shorten the conversation or raise the context size")
            return
        evaluated = ctx.sync(tokens[:-1], logits="none")
        if not controls.cancelled:                    # (a cancel during a long prompt stops here, below)
            self._drafter(controls).begin(tokens)    # a draft model reads the prompt now, as the target did
        recorder = StatsRecorder(len(tokens), evaluated + 1)
        t_prompt = time.perf_counter() - t_start

        n_round = 0
        while True:
            if controls.cancelled:
                yield finish(StopReason.CANCELLED)
                return
            t_round = time.perf_counter()
            settings = controls.settings
            drafter = self._drafter(controls)
            room = ctx.n_ctx - len(tokens)             # the verify batch needs 1 + γ slots after n-1 tokens
            if room < 0:
                yield finish(StopReason.CONTEXT_FULL, f"the context of {ctx.n_ctx} tokens is full")
                return
            gamma_max = min(settings.draft_max, room, max_tokens - len(reply) - 1)
            proposal = None
            if drafter.name == "none" or gamma_max <= 0:
                gamma = 0
            elif settings.auto:
                drafter, gamma, proposal = self._auto_choice(drafter, tokens, gamma_max, sampling, rng)
            else:
                gamma = gamma_max

            # Draft.
            if proposal is None:                        # (auto mode may have copied a lookup draft already)
                proposal = Proposal()
                if gamma > 0:
                    try:
                        proposal = drafter.draft(tokens, gamma, sampling, rng, settings.draft_p_min)
                    except backend.ContextFullError:  # a draft context smaller than the target's
                        pass
            if proposal.tokens and len(proposal.tokens) < settings.draft_min:
                proposal = Proposal(n_steps=proposal.n_steps, t_s=proposal.t_s)
            drafted = proposal.tokens
            t_draft = time.perf_counter() - t_round

            # Verify all drafts in one target pass.
            t_v = time.perf_counter()
            ctx.truncate(len(tokens) - 1)
            try:
                ctx.eval([tokens[-1], *drafted], logits="all")
            except backend.ContextFullError as exc:
                yield finish(StopReason.CONTEXT_FULL, str(exc))
                return
            k = len(drafted)
            views = [ctx.logits(i) for i in range(k + 1)]
            target_top = [int(np.argmax(v)) for v in views]
            if sampling.greedy:
                verdict = rejection.accept_greedy(drafted, target_top)
                p_shown = [softmax_prob(views[i], x)[0] for i, x in enumerate(drafted)]
            else:
                p = [process(v, sampling) for v in views]
                verdict = rejection.accept_sampled(drafted, proposal.q, p, rng)
                p_shown = [p[i].prob(x) for i, x in enumerate(drafted)]
            n_acc = verdict.n_accepted
            # Roll back what was rejected: the target keeps the last token and the accepted drafts.
            ctx.truncate(len(tokens) + n_acc)
            drafter.rollback(len(tokens) + n_acc)
            drafter.observe(k, n_acc)
            t_verify = time.perf_counter() - t_v

            emitted = [*drafted[:n_acc], verdict.next_token]
            last_kind = TokenKind.CORRECTION if verdict.corrected else (TokenKind.BONUS if k else TokenKind.PLAIN)
            kinds = [TokenKind.ACCEPTED] * n_acc + [last_kind]
            self.costs.record_verify(k + 1, t_verify)
            self.costs.record_draft(drafter.name, k, t_draft)
            self.costs.record_round(drafter.name, k, n_acc)

            drafted_text = tuple(model.special_piece(x).decode("utf-8", errors="replace") for x in drafted)
            event = RoundEvent(
                index=n_round, drafter=drafter.name if k else "none", drafted=tuple(drafted),
                drafted_text=drafted_text, q=tuple(proposal.q_token), p=tuple(p_shown), accepted=n_acc,
                emitted=tuple(emitted),
                emitted_text=drafted_text[:n_acc] + (model.special_piece(emitted[-1]).decode("utf-8", "replace"),),
                kinds=tuple(kinds), target_top=tuple(target_top), t_draft_s=t_draft, t_verify_s=t_verify,
                t_round_s=time.perf_counter() - t_round, n_past=len(tokens))
            recorder.add_round(event, proposal.n_steps)
            n_round += 1
            yield event

            for token, kind in zip(emitted, kinds):
                if model.is_eog(token):
                    yield finish(StopReason.EOS)
                    return
                tokens.append(token)
                reply.append(token)
                text = stream.push(model.piece(token))
                if t_first is None:
                    t_first = time.perf_counter()
                yield TokenEvent(token, text, kind, len(reply) - 1)
                if stream.stopped:
                    yield finish(StopReason.STOP_STRING)
                    return
                if len(reply) >= max_tokens:
                    yield finish(StopReason.MAX_TOKENS)
                    return
