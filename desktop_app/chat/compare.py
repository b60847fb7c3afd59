"""Compare: the last user message answered again with speculation off, then on, side by side.

Both runs continue the same prompt (the conversation as stored up to and including its last user
message) with the same sampling and the same seed; nothing is written to the history. The target's
cache keeps the conversation's prefix, so the next turn reuses it as before.

With greedy decoding both texts are the target's argmax at every step, so they agree unless the
target's two best tokens are nearly tied somewhere: speculation evaluates a position inside a verify
batch, plain decoding one token at a time, and the two round their sums differently. The first
difference is explained with the target's top two logits there (`top_logits`). Sampled texts follow
the random draws, which the two runs spend differently: they differ by chance.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, replace
from typing import Callable

from desktop_app.chat.history import ConversationInfo
from desktop_app.chat.rules import user_positions
from desktop_app.chat.session import ChatSession, ContextOverflow, GenerationOptions
from desktop_app.engine.events import FinishEvent, GenerationStats, RoundEvent, StopReason, TokenEvent
from desktop_app.engine.explain import threads_text
from desktop_app.engine.sampling import SamplingParams
from desktop_app.engine.settings import Controls, SpecSettings

CONTEXT_CHARS = 40              # text shown either side of the first difference
TICK_S = 1.0                    # how often a run says how far it has got
NEAR_TIE = 0.05                 # a top-two logit gap batching can plausibly swap (it moves logits by ~1e-3)


@dataclass
class CompareRun:
    """One of the two runs: its settings, what it wrote and what it cost."""

    label: str                                  # "off" or "on"
    spec: SpecSettings
    text: str = ""
    tokens: tuple[int, ...] = ()
    offsets: list[int] = field(default_factory=list)   # characters of text before each token
    stats: GenerationStats = field(default_factory=GenerationStats)
    stop_reason: str = ""
    rounds: int = 0
    finished: bool = False
    first_gamma: int = 0                        # what its first round drafted (its first token came after)
    clock: list[tuple[int, float]] = field(default_factory=list)   # (tokens, seconds) at each round's end:
                                                # the rounds' own times, added up

    def seconds_to(self, n: int) -> float | None:
        """The rounds' time until the run had written n tokens (a round that went past n, the share of it
        that n reached); None where it did not, or its rounds were not timed."""
        before = (0, 0.0)
        for tokens, seconds in self.clock:
            if tokens >= n:
                t = before[1] + (seconds - before[1]) * (n - before[0]) / (tokens - before[0])
                return t if t > 0 else None
            before = (tokens, seconds)
        return None

    def text_before(self, position: int) -> int:
        """Characters of the text before token `position` (the whole text past the last token)."""
        return self.offsets[position] if position < len(self.offsets) else len(self.text)


@dataclass(frozen=True)
class Difference:
    """Where the two texts first part, and why."""

    position: int                               # token index in the reply
    off_token: int | None                       # None: that reply ended here
    on_token: int | None
    off_piece: str
    on_piece: str
    before: str                                 # the common text just before the difference
    off_after: str                              # each run's text from the difference on
    on_after: str
    reason: str                                 # a few sentences for the user
    top: tuple[tuple[int, float, str], ...] = ()  # greedy: the target's two best (token, logit, piece) there
    gap: float | None = None                    # greedy: their logit gap


NOISE = 1.05          # a speed-up beyond which a compare with no draft kept is the machine's noise
SHORT_RUN = 32        # replies shorter than this (tokens) give a speed-up only within that noise


@dataclass
class CompareResult:
    conversation_id: int
    n_prompt: int
    sampling: SamplingParams                    # with the seed both runs used
    max_tokens: int
    off: CompareRun
    on: CompareRun
    identical: bool = False
    first_difference: Difference | None = None
    cancelled: bool = False

    @property
    def common(self) -> int | None:
        """Where the replies differ in length, the tokens they share (the shorter one's length), the
        speed-up's span; None where they are of one length, or their rounds were not timed."""
        n_off, n_on = self.off.stats.n_tokens, self.on.stats.n_tokens
        n = min(n_off, n_on)
        if n_off == n_on or not n or self.off.seconds_to(n) is None or self.on.seconds_to(n) is None:
            return None
        return n

    @property
    def speedup(self) -> float | None:
        """Tokens per second with speculation on over off, both measured in this compare: over the tokens
        they share, where the replies differ in length. A pass slows as the reply grows: a sampled reply of
        362 tokens at 37.5 tok/s against one of 1024 at 27.3 read 1.37×, where over the first 362 tokens
        of each plain decoding was about 1.2× as fast as over 1024 (a new user's try)."""
        if not (self.off.finished and self.on.finished and self.off.stats.tokens_per_s):
            return None
        n = self.common
        if n is not None:
            return self.off.seconds_to(n) / self.on.seconds_to(n)
        return self.on.stats.tokens_per_s / self.off.stats.tokens_per_s

    @property
    def caveat(self) -> str:
        """What the one speed-up cannot say, or "": with no draft kept, speculation cannot have made the
        reply faster (4.33x with 0 of 3 drafts kept, the plain run slowed by other work, read as a
        gain: a new user's try); runs on fewer threads (automatic threads, engine/threads.py) compare
        unlike runs; one short run each is within the machine's noise."""
        s = self.speedup
        if s is None:
            return ""
        on = self.on.stats
        if on.n_drafted and not on.n_accepted and s > NOISE:
            return ("No draft was kept, so speculation cannot have made this reply faster: the difference is "
                    "other work on the machine during one run. `tandem bench` repeats runs.")
        off = self.off.stats
        if on.threads != off.threads or on.threads_mixed or off.threads_mixed:
            return ("Other work kept the CPUs busy, so llama.cpp ran on fewer threads for some of this compare "
                    f"(without speculation {threads_text(off)}, with it {threads_text(on)}): the two runs are not like "
                    "for like. `tandem bench` holds the thread count.")
        n_off, n_on = len(self.off.tokens), len(self.on.tokens)
        if min(n_off, n_on) < SHORT_RUN and abs(s - 1) > NOISE - 1:
            # (both lengths where they differ: "20 tokens" was said of runs of 20 and 25, a new user's try)
            lengths = f"{n_on} tokens" if n_on == n_off else f"{n_off} tokens without speculation, {n_on} with"
            return (f"One short run each ({lengths}): other work on the machine can move a difference "
                    "this size. `tandem bench` repeats runs.")
        return ""

    @property
    def time_ratio(self) -> float | None:
        """Total time off over on (a reply's prompt evaluation included)."""
        if not (self.off.finished and self.on.finished and self.on.stats.t_total_s):
            return None
        return self.off.stats.t_total_s / self.on.stats.t_total_s


def compare_prompt(session: ChatSession, conversation: ConversationInfo) -> list[int]:
    """The prompt for the last user message: the conversation as stored up to and including it."""
    users = user_positions(conversation.messages)
    if not users:
        raise ValueError("this conversation has no message to answer")
    trimmed = replace(conversation, messages=conversation.messages[:users[-1] + 1],
                      first_turn=min(conversation.first_turn, users[-1]))
    return session.prompt_tokens(trimmed)


def spec_on(spec: SpecSettings, has_draft_model: bool) -> SpecSettings:
    """The user's speculation settings, switched on (with a drafter, if they named none)."""
    drafter = spec.drafter
    if drafter == "none" or (drafter == "model" and not has_draft_model):
        drafter = "model" if has_draft_model else "lookup"
    return replace(spec, enabled=True, drafter=drafter)


def compare(session: ChatSession, conversation_id: int, options: GenerationOptions,
            progress: Callable[[str], None] | None = None,
            run_done: Callable[[CompareRun], None] | None = None) -> CompareResult:
    """Answer the conversation's last user message twice, speculation off then on, with one seed; store
    nothing. `session.controls.cancel()` stops it within a round (the result says `cancelled`).
    `run_done` gets each run as it ends. Both runs find the prompt read by the models they use (a
    one-token pass with the second run's settings first, not counted): the first would otherwise read
    it and the second reuse it, and their times to first token would compare a prompt pass with none.
    Raises ContextOverflow when the prompt and the reply do not fit, ValueError without a user message."""
    conversation = session.store.conversation(conversation_id)
    prompt = compare_prompt(session, conversation)
    reserve = session._reserve(options)
    if len(prompt) + reserve > session.n_ctx:
        raise ContextOverflow(len(prompt), session.n_ctx, reserve, False)
    seed = options.sampling.seed if options.sampling.seed is not None else random.randrange(2**31)
    sampling = replace(options.sampling, seed=seed)
    pair = session.pair
    runs = (CompareRun("off", SpecSettings(enabled=False)),
            CompareRun("on", spec_on(options.spec, pair.draft is not None)))
    result = CompareResult(conversation_id, len(prompt), sampling, options.max_tokens, *runs)

    session.controls.reset_cancel()
    if progress:
        progress("Reading the conversation…")
    _run(session, CompareRun("read", runs[1].spec), prompt, sampling, replace(options, max_tokens=1))
    for run, words in zip(runs, ("without speculation", "with speculation")):
        if session.controls.cancelled:
            break
        if progress:
            progress(f"Running {words} ({run.label})…")
        _run(session, run, prompt, sampling, options, _ticker(progress, f"Running {words} ({run.label})", options))
        if run_done and run.finished:
            run_done(run)
    result.cancelled = not all(r.finished for r in runs)
    if result.cancelled:
        return result
    result.identical = result.off.tokens == result.on.tokens and result.off.text == result.on.text
    if not result.identical:
        if progress:
            progress("Looking at where the texts part…")
        result.first_difference = first_difference(pair, prompt, result.off, result.on, sampling)
    return result


def _ticker(progress: Callable[[str], None] | None, doing: str,
            options: GenerationOptions) -> Callable[[int], None] | None:
    """A run's progress, told at most every TICK_S from its token count: "Running with speculation (on):
    57 of at most 512 tokens, 12 s …". (A bare "Running …" over empty panes for minutes read as hung: a
    new user's try.)"""
    if progress is None:
        return None
    start = last = time.monotonic()

    def tick(n: int) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= TICK_S:
            last = now
            progress(f"{doing}: {n} of at most {options.max_tokens} tokens, {now - start:.0f} s (its text is "
                     "shown when it ends)…")
    return tick


def _run(session: ChatSession, run: CompareRun, prompt: list[int], sampling: SamplingParams,
         options: GenerationOptions, tick: Callable[[int], None] | None = None) -> None:
    """One run, on controls of its own (speculation settings changed meanwhile do not reach it) that
    follow the session's cancel; `tick` gets its token count as each token comes."""
    controls = Controls(run.spec)

    def follow(c: Controls) -> None:
        if c.cancelled and not controls.cancelled:
            controls.cancel()

    unsubscribe = session.controls.subscribe(follow)
    try:
        if session.controls.cancelled:
            controls.cancel()
        text, tokens = "", []
        for event in session.pair.generate(prompt, sampling, controls, options.max_tokens,
                                           session.template.stops(options.stop)):
            if isinstance(event, TokenEvent):
                run.offsets.append(len(text))
                text += event.text
                tokens.append(event.token)
                if tick:
                    tick(len(tokens))
            elif isinstance(event, RoundEvent):
                if not run.rounds:
                    run.first_gamma = event.gamma
                run.rounds += 1
                written, seconds = run.clock[-1] if run.clock else (0, 0.0)
                run.clock.append((written + event.n_reply_tokens, seconds + event.t_round_s))
            elif isinstance(event, FinishEvent):
                run.text, run.tokens, run.stats = event.text, tuple(event.tokens), event.stats
                run.stop_reason = event.stop_reason.value
                run.finished = event.stop_reason != StopReason.CANCELLED
    finally:
        unsubscribe()


def first_difference(pair, prompt: list[int], off: CompareRun, on: CompareRun,
                     sampling: SamplingParams) -> Difference:
    """Where two replies to `prompt` first part, with the reason: for greedy decoding, the target's top
    two logits at that position (asked of `pair.top_logits`)."""
    a, b = off.tokens, on.tokens
    n = min(len(a), len(b))
    position = next((i for i in range(n) if a[i] != b[i]), n)
    off_token = a[position] if position < len(a) else None
    on_token = b[position] if position < len(b) else None
    start = off.text_before(position)
    before = off.text[max(0, start - CONTEXT_CHARS):start]
    off_after = off.text[start:start + CONTEXT_CHARS]
    on_after = on.text[on.text_before(position):on.text_before(position) + CONTEXT_CHARS]
    off_piece, on_piece = _piece(pair, off_token, off), _piece(pair, on_token, on)
    if off_token is None and on_token is None:        # the same tokens: only the text's end differs
        reason = ("Both runs chose the same tokens; only the text released at the end differs (where a stop "
                  "string cut it, or an unfinished character).")
        return Difference(position, None, None, off_piece, on_piece, before, off_after, on_after, reason)
    if not sampling.greedy:
        reason = (f"Sampled texts (temperature {sampling.temperature:g}): both runs used seed {sampling.seed}, "
                  f"but they do not make the same random draws. Speculation spends draws on drafting and on "
                  f"the accept/reject test of every drafted token, plain decoding one per token, so after the "
                  f"first round the two follow different draws and differ by chance. Each text is a fair "
                  f"sample of the same distribution (the exact rule guarantees that), not the same sample. "
                  f"At temperature 0 the texts agree up to the first place where the target's top two tokens "
                  f"are nearly tied (its batched and single-token passes round differently).")
        return Difference(position, off_token, on_token, off_piece, on_piece, before, off_after, on_after, reason)
    top = tuple((t, logit, _piece(pair, t)) for t, logit in pair.top_logits(list(prompt) + list(a[:position]), 2))
    gap = top[0][1] - top[1][1] if len(top) > 1 else None
    reason = greedy_reason(top, gap, off_token, on_token, off_piece, on_piece)
    return Difference(position, off_token, on_token, off_piece, on_piece, before, off_after, on_after, reason,
                      top, gap)


def greedy_reason(top, gap, off_token, on_token, off_piece, on_piece) -> str:
    """Why two greedy texts part where the target's two best were `top` ((token, logit, piece) each)."""
    (t1, l1, p1), (t2, l2, p2) = top[0], top[1]
    said = (f"Here the target's two best tokens were {shown(p1)} (logit {l1:.4f}) and {shown(p2)} ({l2:.4f}): a gap "
            f"of {gap:.4f}. ")
    swapped = {off_token, on_token} <= {t1, t2, None}
    if gap is not None and gap <= NEAR_TIE and swapped:
        return said + ("That is a near-tie. Speculation evaluates this position inside a batch with the drafted "
                       "tokens, plain decoding one token at a time; the two add up the same numbers in a "
                       "different order and round differently, enough to swap a near-tie. Each text is the "
                       "target's greedy choice as it was evaluated; from here on they continue different texts.")
    return said + ("That gap is too wide for rounding to swap, and greedy decoding with and without speculation "
                   f"should agree here (without: {shown(off_piece)}, with: {shown(on_piece)}); this is unexpected, "
                   "worth reporting.")


END_OF_REPLY, MAX_TOKENS_REACHED = "(end of reply)", "(max tokens reached)"   # where a run has no token


def marked(text: str) -> str:
    """`text` on one line, a line break as ⏎ and a tab as ⇥: a quote from code, broken over four lines by
    its own line breaks, read as several (a new user's try)."""
    return text.replace("\n", "⏎").replace("\t", "⇥")


def shown(piece: str) -> str:
    """A token's text as the compare quotes it: in quotation marks, marked (Python's repr showed
    "':\\n\\n'", a new user's try); a note such as "(end of reply)" as it is."""
    if piece in (END_OF_REPLY, MAX_TOKENS_REACHED):
        return piece
    return f"“{marked(piece)}”"


def _piece(pair, token: int | None, run: CompareRun | None = None) -> str:
    if token is None:
        return END_OF_REPLY if run is None or run.stop_reason != StopReason.MAX_TOKENS.value else MAX_TOKENS_REACHED
    return pair.target.special_piece(token).decode("utf-8", errors="replace")
