"""Why speculation paid or not, in a sentence or two a user can act on, from a reply's statistics.

The verdict rests on the one measured comparison, `GenerationStats.measured_speedup` (this reply's
rate over `plain_tokens_per_s`), the same number the panel's grid and the CLI show; predictions from
the cost model are only ever shown labelled "predicted". The sentences and rows here are written
for every view (the panel, the reply's footer, Compare, the CLI), with the numbers number_text.py
writes, so that they agree.
"""
from __future__ import annotations

from desktop_app.counts import count
from desktop_app.engine.auto_policy import FIRST_PROBE
from desktop_app.engine.costs import CostModel, at_pace
from desktop_app.engine.events import GenerationStats, StopReason
from desktop_app.engine.metrics import REPEAT_RUN
from desktop_app.engine.number_text import alpha_text, duration_text, rate_text, rates_finer, share_text

PAYS, COSTS = 1.05, 0.95     # measured speed-ups at or beyond which speculation pays / costs time
SET_COUNT_BUSY = 0.9          # CPUs of other work past which a set thread count's reply says what automatic would
                             # run (near the edge, two threads were as fast as one: docs/performance.md)
BUSY_CHECK = 1.25            # a check of k tokens never costs k single passes on a steady machine (the cost
                             # model caps it there, costs.verify_cost): past this many times that, other
                             # work slowed the checks (a user's try: 133× a single pass for 9.6 tokens)


def threads_text(stats: GenerationStats) -> str:
    """A reply's thread count as its footer and Compare say it: "2 threads", "1 thread of 2", "1 thread of 2
    for part of it" (threads.py: fewer while other work kept the CPUs busy)."""
    text = count(stats.threads, "thread") + (f" of {stats.threads_most}" if stats.threads < stats.threads_most else "")
    return text + (" for part of it" if stats.threads_mixed else "")


def measured_text(stats: GenerationStats) -> str:
    """"1.23× (plain 45 tok/s)": the measured comparison with plain decoding, or "–". ", earlier" after
    the rate when the reply had no plain step of its own to time it by (metrics.py then takes the
    single-token pass last timed, at load or in an earlier reply)."""
    m = stats.measured_speedup
    if m is None:
        return "–"
    plain = rate_text(stats.plain_tokens_per_s, rates_finer(stats))
    return f"{m:.2f}× (plain {plain}{'' if stats.n_plain_rounds else ', earlier'})"


def predicted_text(stats: GenerationStats, compact: bool = False) -> str:
    """The cost model's predicted speed-up (the panel's row says "predicted"), with the flat-cost
    formula's beside it, said in words ("flat-cost formula" was jargon to a new user: a check of γ + 1
    tokens priced as one pass, as on a GPU); "" when nothing was drafted. A pair that kept no draft
    gets no predicted gain: a formula at α = 0 says nothing about this pair. `compact`: fewer words, for
    a narrow panel (whole, the flat-cost figure was "(…)" at 1280 px, a new user's try)."""
    if not stats.n_drafted:
        return ""
    if not stats.n_accepted:
        return f"none (0/{stats.n_drafted} drafts kept)"
    if stats.predicted_speedup_measured is None:
        return "–"
    text = f"{stats.predicted_speedup_measured:.2f}×"
    if stats.predicted_speedup is not None:
        text += (f" (one-pass check: {stats.predicted_speedup:.2f}×)" if compact else
                 f" ({stats.predicted_speedup:.2f}× if a check cost one pass)")
    return text


ALPHA_TIP = ("α counts each round's drafts only up to its first rejection: the drafts after a rejected one are "
             "discarded, never judged, so they count in \"drafts kept\" (kept / drafted) but not in α "
             "(kept / (kept + rejections)). With long drafts α is therefore higher than the kept share.")


def verdict(stats: GenerationStats) -> str:
    """"pays", "costs", "even", or "" when there is no measured comparison."""
    m = stats.measured_speedup
    if m is None:
        return ""
    return "pays" if m >= PAYS else "costs" if m <= COSTS else "even"


def explain(stats: GenerationStats) -> str:
    """The panel's sentence on one reply: what was kept, and why it paid or did not."""
    return " ".join(part for part in (_explain(stats), repeats(stats), passed_copies(stats), unused_draft(stats),
                                      fewer_threads(stats), slow_start(stats)) if part)


def brief(stats: GenerationStats) -> str:
    """explain() folded to its point, which the panel shows until "more" is clicked: whether this reply
    beat plain decoding and why, in one sentence, or a reply decoded plainly in its own (at 1024×700
    the whole ran to 20 lines and pushed the rounds and charts out of sight, a new user's try). Where
    nothing was measured against plain decoding, explain()'s own first sentences. A speed-up that came from
    a reply repeating itself says so here too: it changes what the number means."""
    if not (stats.n_tokens and stats.n_drafted) or stats.remote or stats.measured_speedup is None:
        return _explain(stats)
    return " ".join(part for part in (_against_plain(stats, "This reply"), repeats(stats)) if part)


LOOPING = 0.5        # a reply this much of which repeats its own earlier text is caught in a loop


def repeats(stats: GenerationStats) -> str:
    """Where a speed-up came from a reply caught in a loop: a model repeating its own lines is easy to
    draft for (the test model, asked for a short poem, wrote one line over and over at 1.77× plain, and
    nothing said why: a new user's try). "" where the reply did not pay or does not repeat itself."""
    m = stats.measured_speedup
    if stats.repeated_share < LOOPING or not stats.n_accepted or m is None or m < PAYS:
        return ""
    return (f"{share_text(stats.repeated_share)} of this reply repeats its own earlier text (each of those tokens ends "
            f"a run of {REPEAT_RUN} it had written before): a reply caught in a loop is easy to draft for, so this "
            "speed-up says little of other replies.")


def passed_copies(stats: GenerationStats) -> str:
    """Why auto copied earlier text so seldom, where it weighed a copy and took a plain step instead: how
    much of those copies the target then wrote itself, and what a copy is weighed against ("" where it
    passed over none). A reply that copied its prompt in 4 of 143 rounds, every copy kept, said nothing of
    the rounds it did not copy (a new user's try). One sentence, which `tandem generate` quotes as a
    clause. (Not the copies' lengths: a copy runs to 32 tokens, where auto drafts a few of them.)"""
    n, right, kept = stats.n_copies_passed, stats.n_copies_passed_right, stats.n_copies_passed_kept
    if not n or not stats.n_tokens:
        return ""
    steps = f" of its {stats.n_plain_rounds} plain steps" if stats.n_plain_rounds else ""
    if n == 1:
        text = (f"In one{steps or ' plain step'} auto passed over a copy of earlier text: the target then wrote "
                + (f"{count(kept, 'token')} of it" if kept else "none of it"))
    else:
        text = (f"In {n}{steps or ' plain steps'} auto passed over a copy of earlier text: the target then wrote "
                f"the copy's first token in {right} of them, and on average {kept / n:.1f} tokens of each copy")
    return text + _copy_costs(stats) + "."


def _copy_costs(stats: GenerationStats) -> str:
    """passed_copies' last clause: what auto weighs a copy against, at this machine's check costs."""
    two = check_passes(stats, 2)
    if two is None:
        return ""
    # a copy of k - 1 tokens kept whole writes k tokens (the target's own after them) for a check of k
    if all((check_passes(stats, k) or k) >= k for k in range(2, max(stats.verify_s_by_batch, default=2) + 1)):
        return ", and no copy can pay here: every check costs a single-token pass or more per token it checks"
    return (", and auto drafts a copy only where the copies kept so far in the reply make it likely to pay (a copy "
            f"of one token is checked in a 2-token pass, here {two:.1f} single-token passes)")


SLOW_START_S, SLOW_START_TOKENS = 2.0, 128   # a first token this late, after a read of this many tokens: said why


def slow_start(stats: GenerationStats) -> str:
    """What reading the conversation did to the first token: why it came late, where the reply read much
    of its conversation first ("first 11.55 s" stood unexplained after a reload, or after a Compare,
    whose replies took the chat's place in the cache: a new user's try); or how far the read had got
    where Stop cut it ("The first token came after 4.01 s" had stood beside "Stopped before the first
    token": another's try). "" otherwise."""
    read, after = stats.n_prompt_evaluated, duration_text(stats.ttft_s)
    if not stats.n_tokens:
        if stats.stop_reason != StopReason.CANCELLED.value or not stats.n_prompt_unread:
            return ""
        total = read + stats.n_prompt_unread
        cached = stats.n_prompt_tokens - total
        return (f"It was stopped {after} into reading the conversation: {read:,} of {total:,} tokens read"
                + (f"; the other {cached:,} had been read before" if cached > 0 else "") + ".")
    if stats.ttft_s < SLOW_START_S or read < SLOW_START_TOKENS:
        return ""
    cached = stats.n_prompt_tokens - read
    return (f"The first token came after {after}: {read:,} tokens of the conversation had to be read first"
            + (f" (the other {cached:,} had been read before)" if cached > 0 else "") + ".")


def fewer_threads(stats: GenerationStats) -> str:
    """What other work on the CPUs did to the reply (threads.py): automatic threads ran it on fewer, for
    all of it or, mixing two counts in its comparison with plain decoding, for part; or a count the
    user set ran it on more than automatic would have (beside one busy CPU, two threads crawled at 1.2
    tok/s in the window, a new user's try). "" where other work did neither."""
    if not stats.n_tokens or stats.others_cpus is None or not stats.threads:
        return ""
    busy = f"Other work was using about {stats.others_cpus:.1f} of this machine's CPUs"
    wait = "llama.cpp's threads wait for each other at every step, and one sharing a CPU holds up the rest"
    if stats.threads < stats.threads_most:
        if stats.threads_mixed:
            part = (f"{busy}, so llama.cpp ran part of this reply on {count(stats.threads, 'thread')} of "
                    f"{stats.threads_most}")
            if not stats.n_drafted:    # (decoded plainly, it is compared with its own steps: a new user's try)
                return f"{part}: {wait}."
            return (f"{part} ({wait}): its comparison with plain decoding mixes steps on more than one thread "
                    "count, not like for like.")
        return f"{busy}, so llama.cpp ran this reply on {count(stats.threads, 'thread')} of {stats.threads_most}: {wait}."
    if 0 < stats.threads_suggested < stats.threads and stats.others_cpus >= SET_COUNT_BUSY:
        return (f"{busy} while llama.cpp ran this reply on {count(stats.threads, 'thread')}, the number set "
                f"(Settings ▸ Threads, or -t): {wait}. Automatic threads would have run "
                f"{stats.threads_suggested}.")
    return ""


def unused_draft(stats: GenerationStats) -> str:
    """Why auto left a loaded draft model unused in this reply ("" where it used it, or none was
    loaded): the panel's sentence ends with it, and `tandem generate --auto` prints it."""
    c = stats.unused_draft_c
    if c is None or not stats.n_tokens:
        return ""
    if stats.n_rounds <= FIRST_PROBE:            # (AutoPolicy.begin: first weighed in round FIRST_PROBE + 1)
        return (f"Auto did not draft with the draft model: it tries it only after a reply's first "
                f"{FIRST_PROBE} rounds, and this one had {stats.n_rounds}.")
    return (f"Auto did not draft with the draft model: a step of it would cost {c:.2f} of a target pass "
            "here, and with that and the cost of catching it up on the text, no round with it was "
            "predicted to beat " + ("plain decoding." if not stats.n_drafted
                                    else "plain steps and copies of earlier text."))


LOOKED = 0.001       # a reply decoded plainly that spent this share of its time or more looking for drafts
                     # (auto's 0.06-0.17 ms a round; plain decoding's own few µs never reach it) says so


def _explain(stats: GenerationStats) -> str:
    m, plain = stats.measured_speedup, stats.plain_tokens_per_s
    if not stats.n_tokens:          # (whatever the mode: no token, so nothing says how drafting would have gone)
        return {StopReason.CANCELLED.value: "Stopped before the first token: nothing was written or drafted.",
                StopReason.CONTEXT_FULL.value: "The context was full: nothing was written."}.get(
                    stats.stop_reason, "The model ended its turn at once: nothing was written.")
    if not stats.n_drafted:
        if stats.plain_pass_s and plain:                # (the rate every other view quotes as plain's)
            eos = " and the pass that ended the reply" if stats.stop_reason == StopReason.EOS.value else ""
            finer = rates_finer(stats)
            text = (f"Plain decoding: {count(stats.n_tokens, 'token')} at {1000 * stats.plain_pass_s:.0f} ms "
                    f"per target pass; counting the time between passes{eos}, {rate_text(plain, finer)}.")
            extra = stats.t_draft_s + stats.t_catch_up_s
            if m is not None and m < 1 and extra >= LOOKED * stats.n_tokens / stats.tokens_per_s \
                    and rate_text(stats.tokens_per_s, finer) != rate_text(plain, finer):
                # (auto's choosing, or a lookup that found nothing, took time plain decoding does not:
                # the reply's own rate, which the panel's Speed shows, then reads lower than plain's;
                # at 1.00× too, "Speed 31.3 tok/s" beside plain's 31.4 went unexplained, a new user's try)
                text += (f" Looking for drafts took {duration_text(extra)} more, so this reply ran at "
                         f"{rate_text(stats.tokens_per_s, finer)}, {m:.2f}× plain.")
            return text
        return "Plain decoding: nothing was drafted."
    alpha, rounds, per_round_ms = _round_figures(stats)
    parts = [f"{share_text(stats.acceptance_rate or 0)} of drafted tokens were kept (α ≈ {alpha_text(alpha)}: the chance "
             "that a token was kept when those before it were; after a rejection the rest go unchecked); "
             f"a round drafted {stats.mean_drafted:.2f} and kept {stats.mean_accepted:.2f}, "   # (as the panel's row)
             f"giving {_written(stats)} tokens" + ("" if stats.remote else f" in {per_round_ms:.0f} ms")
             + (" (the reply ended on a kept draft, its end: nothing came after it)." if _ended_on_a_draft(stats)
                else ".")]
    if stats.n_plain_rounds:
        parts.append(f"{round(rounds)} of {stats.n_rounds} rounds drafted; the others were plain steps.")
    if stats.remote:
        parts.append(f"The {stats.remote} sends neither how long drafting and checking took nor its plain-decoding "
                     "speed, so whether speculation pays there cannot be measured from here: compare with the "
                     "server started without a draft model.")
        return " ".join(parts)
    if m is None:
        parts.append("There is no measured plain-decoding rate to compare with yet.")
        return " ".join(parts)
    parts.append(_against_plain(stats, "That"))
    return " ".join(parts)


def _round_figures(stats: GenerationStats) -> tuple[float, float, float]:
    """(α, the rounds that drafted, the milliseconds each of them took) of a reply that drafted: only
    the rounds that drafted, since auto mode mixes them with plain steps."""
    rounds = _drafted_rounds(stats)
    per_round_ms = 1000 * (stats.t_draft_s + stats.t_verify_s - stats.t_plain_s) / rounds if rounds else 0.0
    return (stats.alpha if stats.alpha is not None else 0.0), rounds, per_round_ms


def _against_plain(stats: GenerationStats, subject: str) -> str:
    """The sentence that says whether a reply that drafted beat plain decoding, measured, and why not
    where it did not; `subject`: "That" after the sentence on what was kept, "This reply" alone."""
    m, plain = stats.measured_speedup, stats.plain_tokens_per_s
    when = "" if stats.n_plain_rounds else " before this reply"
    plain_part = f"plain decoding ({rate_text(plain, rates_finer(stats))}, measured{when})"
    if m >= PAYS:
        return f"{subject} beats {plain_part} by {m:.2f}×."
    catch_up, without = _catch_up(stats, plain)
    why = [catch_up] if catch_up else []
    if without is None or without < COSTS:           # (where the catch-up alone lost the time, the rest is by the way)
        why += _round_reasons(stats, *_round_figures(stats))
    reasons = "; ".join(why) or "the rounds cost about what they save"
    if m <= COSTS:
        return f"{subject} loses to {plain_part}: {m:.2f}× its speed, because {reasons}."
    return f"{subject} is about even with {plain_part}, at {m:.2f}× its speed: {reasons}."


def _round_reasons(stats: GenerationStats, alpha: float, rounds: float, per_round_ms: float) -> list[str]:
    """Why the rounds that drafted lost time: the drafts' keep rate, the draft step's cost, what checking
    a round cost."""
    why = []
    if stats.n_accepted == 0:
        why.append("no draft was kept")
    elif alpha < 0.6 and stats.c == 0.0:              # copies only (metrics.py): prompt lookup's, not a model's
        n = round(rounds)
        why.append(f"{'the one copy' if n == 1 else f'the {n} copies'} of earlier text kept "
                   f"{stats.n_accepted} of {count(stats.n_drafted, 'token')}")
    elif alpha < 0.6:
        why.append("the draft is often wrong")
    if stats.c is not None and stats.c > 0.3:
        why.append(f"a draft step costs {stats.c:.2f} of a target pass")
    checks = reply_checks(stats)
    if checks:
        verify_s, ratio = checks
        share = (f"all of the round's {per_round_ms:.0f} ms" if round(1000 * verify_s) >= round(per_round_ms)
                 else f"{1000 * verify_s:.0f} of the round's {per_round_ms:.0f} ms")
        why.append(f"in this reply, checking a round's {_plus_one(stats.mean_drafted)} tokens took {share}, "
                   f"{ratio:.1f}× a single-token pass "
                   f"({1000 * stats.plain_pass_s:.0f} ms, without the time between passes)")
        if ratio > BUSY_CHECK * (stats.mean_drafted + 1):
            why.append("that is more than passing those tokens one at a time would take, which a machine does "
                       "only while other work slows it: this comparison with plain decoding is not like for "
                       "like; run it again when the machine is quiet")
        # ("of the round's": a part of the round time the first sentence states; quoted alone, "102 ms" there
        # and "101 ms" here read as one number twice, and copies, drafted for nothing, read "102 of those
        # 102 ms"; not "of those", which the folded sentence left pointing at nothing, a review found; the
        # single pass's own ms, as plain decoding's rate beside it counts the time between
        # passes too: 1.9× of 32 ms read as 61 ms beside plain's 37 ms a token, new users' tries)
    return why


def _drafted_rounds(stats: GenerationStats) -> float:
    """The reply's rounds that drafted (auto mode mixes them with plain steps), from its means."""
    return stats.n_drafted / stats.mean_drafted if stats.mean_drafted else 0


def reply_checks(stats: GenerationStats) -> tuple[float, float] | None:
    """(seconds, single-token passes) a check of a round's drafts took in this reply, on the mean of
    its rounds that drafted; None where none did, or nothing was timed. The panel's sentence quotes it,
    and "Does it pay?" beside the cost model's price of a size, so the two say one number for it.

    This reply's own checks, a part of its round time (not the cost model's price of a size: a mean of
    rounds of several sizes is not the price of their mean size), less the plain steps' (t_target_step_s
    is their mean; t_plain_s holds their drafting too), against the single pass plain decoding is priced
    at (plain_pass_s: a pass slows as the context grows, and plain steps that came early in a long reply
    made a check look 26.6× of one, for about 18×)."""
    rounds = _drafted_rounds(stats)
    if not (stats.t_verify_s and rounds and stats.plain_pass_s) or stats.remote:
        return None
    verify_s = max(0.0, stats.t_verify_s - stats.n_plain_rounds * (stats.t_target_step_s or 0.0)) / rounds
    return verify_s, verify_s / stats.plain_pass_s


def reply_checks_text(stats: GenerationStats) -> str:
    """This reply's own checks as "Does it pay?" sets them beside the cost model's price, in the panel
    sentence's words and digits: "in this reply, checking a round's 5.00 tokens took 3.3× a single
    pass" ("" where reply_checks has none)."""
    checks = reply_checks(stats)
    if not checks:
        return ""
    return (f"in this reply, checking a round's {_plus_one(stats.mean_drafted)} tokens took {checks[1]:.1f}× a "
            "single pass")


def _catch_up(stats: GenerationStats, plain: float) -> tuple[str, float | None]:
    """(the reason, the reply's speed over plain's without it) where the draft model's catch-up on text
    it had not read (auto: it reads the text only once auto first drafts with it) lost at least half the
    time this reply lost to plain decoding; ("", None) where not. A new user's one-line answer: one round
    drafted, 0.35 s of catch-up in a 1.1 s reply, 0.64× plain, and the sentence blamed the draft step's
    cost (0.04 s of drafting)."""
    decode_s = stats.n_tokens / stats.tokens_per_s if stats.tokens_per_s else 0.0
    lost_s = decode_s - stats.n_tokens / plain
    if not stats.t_catch_up_s or lost_s <= 0 or stats.t_catch_up_s < lost_s / 2 or decode_s <= stats.t_catch_up_s:
        return "", None
    without = stats.n_tokens / (decode_s - stats.t_catch_up_s) / plain
    return (f"catching the draft model up on text it had not read took {duration_text(stats.t_catch_up_s)} of "
            f"the {duration_text(decode_s)} spent writing this reply (auto has it read the text only once it drafts "
            f"with it, and this reply did not repay that; without it, {without:.2f}× plain's speed)", without)


def stopped_by(reason: str, limit: str, stop: str) -> str:
    """What ended a reply, in words ("eos" was jargon, a new user's try): `limit` names the token limit
    and `stop` the way to stop a reply where it is read (the window's, or the command line's)."""
    return {StopReason.EOS.value: "its end (the model's end token)", StopReason.STOP_STRING.value: "a stop string",
            StopReason.MAX_TOKENS.value: limit, StopReason.CANCELLED.value: stop,
            StopReason.CONTEXT_FULL.value: "a full context"}.get(reason, reason.replace("_", " "))


def end_text(stats: GenerationStats) -> str:
    """" + end" after the reply's token count where its rounds wrote its end-of-generation token too
    (counted in no token count, yet in the rounds' sums: 5 rounds "giving 2.80 tokens" made 14 beside
    "13 in 5 rounds", a new user's sums); "" otherwise. Not for a llama-server, whose "stop" may be a
    stop string."""
    return " + end" if stats.n_rounds and stats.stop_reason == StopReason.EOS.value and not stats.remote else ""


def _ended_on_a_draft(stats: GenerationStats) -> bool:
    """Whether a round that drafted gave no token of the target's own: the reply ended on one of its kept
    drafts, the end-of-turn token (so "kept 2.14, giving 3.14 tokens" in 7 rounds beside 5 plain steps
    came to 27 tokens where the reply had 25 and its end: a new user's sums). Not said of a llama-server's
    rounds, rebuilt from the tokens that arrived (metrics count them as they come)."""
    return (stats.mean_written is not None and not stats.remote and stats.mean_accepted is not None
            and stats.mean_written < stats.mean_accepted + 1 - 1e-9)


def _written(stats: GenerationStats) -> str:
    """The tokens a round that drafted gave, as the sentence says it: its drafts kept plus the target's own,
    the kept mean as shown plus one (_plus_one), unless the reply ended on a kept draft (_ended_on_a_draft,
    stored stats from before mean_written were kept count as not)."""
    return f"{stats.mean_written:.2f}" if _ended_on_a_draft(stats) else _plus_one(stats.mean_accepted)


def _plus_one(mean: float) -> str:
    """A mean per round as the sentence shows it, plus the target's own token: what the reader gets
    adding one to the number shown (0.665 shows 0.67, so 1.67)."""
    return f"{float(f'{mean:.2f}') + 1:.2f}"


def check_passes(stats: GenerationStats, batch: int) -> float | None:
    """A verify pass over `batch` tokens on this machine, in single-token passes, from the cost model the
    reply ended with (its verify_s_by_batch, interpolated, each over its single pass: the ratio the "Does
    it pay?" curve rests on, costs.at_pace); None where it holds none. (Seconds over the reply's plain
    steps' mean instead: a check priced at the end of a 1024-token reply, over passes timed in its first
    150 tokens, read 42 single passes where the curve rested on 20.)"""
    if not stats.verify_s_by_batch:
        return None
    if stats.verify_s_by_batch.get(1):
        return CostModel(verify_s=at_pace(stats.verify_s_by_batch, 1.0)).verify_cost(batch)
    seconds = CostModel(verify_s=dict(stats.verify_s_by_batch)).verify_cost(batch)   # (none timed alone)
    return seconds / stats.plain_pass_s if seconds is not None and stats.plain_pass_s else None
