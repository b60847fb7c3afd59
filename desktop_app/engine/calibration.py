"""Timing the passes every prediction rests on, once, after loading a pair."""
from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from desktop_app.engine import backend
from desktop_app.engine.calibration_store import KEEP, Remembered, plausible
from desktop_app.engine.costs import CostModel, per_token

VERIFY_SIZES = (2, 3, 4, 5, 8, 9, 16, 17, 33)
PREFILL_TOKENS = 64
CALIBRATION_STEPS = 5       # single-token passes timed per model at load (and draft steps beside the target's)
RETIME_PER_LOAD = 2         # sizes timed again at each load once every size has KEEP remembered timings,
                            # in turn, so that the remembered timings keep rolling


def calibrate(costs: CostModel, target_ctx: backend.Context, draft_ctx: backend.Context | None = None,
              steps: int = CALIBRATION_STEPS, verify_sizes: tuple[int, ...] = VERIFY_SIZES,
              remembered: Remembered | None = None) -> dict[int, float]:
    """Single-token passes of the target (the median of `steps` warm passes) and of the draft (a ratio to
    the target's: _draft_ratios; the median of its own as a fallback), the
    target's passes over each verify batch size, logits read at every position as a verify pass reads
    them, and a prompt pass of PREFILL_TOKENS through each (what auto's lazy catch-up will cost).
    Sizes on both sides of powers of two are timed, not interpolated: kernels work in tiles, and a
    batch of 16 can cost less than one of 15. Each size is timed as a ratio to a single-token pass
    timed beside it (_time_verify_batches), so that a machine that gets busier or idler during the
    load moves both alike; a draft step and a token of the draft's prompt pass likewise, against target
    passes taken in turn with them (_draft_ratios).
    `remembered`: earlier loads' timings on this machine (calibration_store), each a ratio to the
    single-token passes timed beside it. One warm timing scatters by 10-40 % on a shared machine, so a
    size is priced at the median of its last KEEP timings, times this load's single-token pass, and only the
    sizes with fewer than KEEP are timed, or, once none has, RETIME_PER_LOAD of them in turn
    (verify_batches_due). None: every size is timed and priced at this load's timing alone.
    These are the yardsticks for c, for predicted speed-ups and for auto mode; real rounds refine
    them as they run. Both caches are left empty. Returns this load's timings as ratios, for
    calibration_store to keep."""
    timed: dict[int, float] = {}
    contexts = [("target", target_ctx)]
    if draft_ctx is not None:
        contexts.append(("model", draft_ctx))
    for name, ctx in contexts:
        ctx.clear()
        start = ctx.model.bos if ctx.model.bos >= 0 else 0
        ctx.eval([start], logits="last")                    # warm-up, not timed
        median = _single_pass_s(ctx, steps)
        if name == "target":
            fits = tuple(k for k in verify_sizes if len(ctx.tokens) + k <= ctx.n_ctx) if median > 0 else ()
            if fits:
                due = fits if remembered is None else verify_batches_due(fits, remembered)
                batches = _time_verify_batches(ctx, start, due)
                if batches and min(b for b, _ in batches.values()) < median:   # a batch faster than one
                    median = min(median, _single_pass_s(ctx, steps))   # token: the single passes were disturbed
                timed = {k: plausible(k, b / single) for k, (b, single) in batches.items()}
            costs.verify_s[1] = median
            for k in fits:
                known = remembered.ratios.get(k, []) if remembered is not None else []
                values = [*known, timed[k]] if k in timed else known
                if values:
                    costs.verify_s[k] = price(median, values)
        else:
            costs.draft_step_s[name] = median
        _time_prefill(costs, name, ctx, start)    # (once its single pass is priced: a read's price is beyond it)
        ctx.clear()
    single = costs.verify_s.get(1, 0.0)
    if draft_ctx is not None and single > 0:
        step, per_token = _draft_ratios(target_ctx, draft_ctx, steps)
        if step is not None:
            costs.draft_step_s["model"] = step * single
        if per_token is not None:
            costs.prefill_s["model"] = per_token * single
    return timed


def _draft_ratios(target_ctx: backend.Context, draft_ctx: backend.Context,
                  steps: int) -> tuple[float | None, float | None]:
    """(a draft step, a token's share of the draft's prompt pass beyond a step (auto's catch-up:
    CostModel.prefill_cost)) in single-token target passes: the faster of `steps` draft steps, and of
    two prompt passes of PREFILL_TOKENS, over the faster of the target passes taken in turn with them,
    so that other work on the machine slows both alike. Timed apart (the draft's median after all the
    target's timings), a load beside other work had priced a step of the 0.5B draft at 1.73 passes of
    its 1.5B target, where its real rounds took 0.5-0.7 (a new user's try); auto, seeing no round with
    it pay, never drafted with it to learn better. None: no room in a context for it. Both contexts
    are left empty."""
    for ctx in (target_ctx, draft_ctx):
        ctx.clear()
        ctx.eval([ctx.model.bos if ctx.model.bos >= 0 else 0], logits="last")
    singles, drafts, prefills = [], [], []
    for _ in range(min(steps, target_ctx.n_ctx - 1, draft_ctx.n_ctx - 1)):
        singles.append(_pass_s(target_ctx))
        drafts.append(_pass_s(draft_ctx))
    n = min(PREFILL_TOKENS, draft_ctx.n_ctx - 1)
    if n >= 8 and target_ctx.n_ctx > 1:
        start = draft_ctx.tokens[0]
        for _ in range(2):
            target_ctx.truncate(1)
            singles.append(_pass_s(target_ctx))
            draft_ctx.truncate(1)
            t0 = time.perf_counter()
            draft_ctx.eval([start] * n, logits="none")
            prefills.append(time.perf_counter() - t0)
    for ctx in (target_ctx, draft_ctx):
        ctx.clear()
    single = min(singles, default=0.0)
    if single <= 0:
        return None, None
    step = min(drafts, default=0.0)
    return (step / single if drafts else None), (per_token(min(prefills), n, step) / single if prefills else None)


def _pass_s(ctx: backend.Context) -> float:
    """Seconds of one single-token pass after the context's last token, its logits read (the token stays)."""
    token = int(np.argmax(ctx.logits(-1)))
    t0 = time.perf_counter()
    ctx.eval([token], logits="last")
    int(np.argmax(ctx.logits(-1)))
    return time.perf_counter() - t0


def _single_pass_s(ctx: backend.Context, steps: int) -> float:
    """The median of `steps` single-token passes, each after the context's last token (the tokens stay)."""
    times = [_pass_s(ctx) for _ in range(min(steps, ctx.n_ctx - len(ctx.tokens)))]
    return float(np.median(times)) if times else 0.0


def price(single_s: float, ratios: Sequence[float]) -> float:
    """Seconds of a verify pass: this load's single-token pass times the median of the size's last
    KEEP timings, each a ratio to the single-token passes timed beside it at its own load."""
    return single_s * float(np.median(ratios[-KEEP:]))


def verify_batches_due(sizes: Sequence[int], remembered: Remembered) -> tuple[int, ...]:
    """The sizes a load times: those with fewer than KEEP remembered timings, or, where none has,
    RETIME_PER_LOAD of them, a different few at each load."""
    short = tuple(k for k in sizes if len(remembered.ratios.get(k, ())) < KEEP)
    if short or not sizes:
        return short
    first = remembered.loads * RETIME_PER_LOAD
    return tuple(sorted({sizes[(first + i) % len(sizes)] for i in range(RETIME_PER_LOAD)}))


def _time_verify_batches(ctx: backend.Context, token: int, sizes: Sequence[int]) -> dict[int, tuple[float, float]]:
    """{batch size: (seconds of its faster of two passes, seconds of the faster of two single-token
    passes timed between them)}. A size's ratio is taken against single passes timed beside it, not
    against the load's median alone: timed seconds apart, the two measure different machines whenever
    other work starts or stops between them. (Loads beside other jobs on the 2-core machine left a
    9-token check remembered at 0.88 and 2.9 single passes, where it costs 5.1; auto then copied 8-9
    tokens after three-token matches of the reply, and each such check took about twice its price.)"""
    base = len(ctx.tokens)
    out = {}
    for k in sizes:
        batch, single = [], []
        for _ in range(2):
            single.append(_timed_pass(ctx, token, 1, base))
            batch.append(_timed_pass(ctx, token, k, base))
        out[k] = (min(batch), min(single))
    return out


def _timed_pass(ctx: backend.Context, token: int, k: int, base: int) -> float:
    """Seconds of one pass over `k` tokens after the first `base`, logits read at each (then dropped)."""
    t0 = time.perf_counter()
    ctx.eval([token] * k, logits="all")
    [int(np.argmax(ctx.logits(i))) for i in range(k)]
    seconds = time.perf_counter() - t0
    ctx.truncate(base)
    return seconds


def _time_prefill(costs: CostModel, name: str, ctx: backend.Context, token: int) -> None:
    base = len(ctx.tokens)
    n = min(PREFILL_TOKENS, ctx.n_ctx - base)
    if n < 8:
        return
    t0 = time.perf_counter()
    ctx.eval([token] * n, logits="none")
    costs.record_prefill(name, n, time.perf_counter() - t0)
    ctx.truncate(base)
