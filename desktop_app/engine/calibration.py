"""Timing the passes every prediction rests on, once, after loading a pair."""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import numpy as np

from desktop_app.engine import backend
from desktop_app.engine.costs import CostModel

VERIFY_SIZES = (2, 3, 4, 5, 8, 9, 16, 17, 33)
PREFILL_TOKENS = 64
REMEMBERED_ENOUGH = 3       # remembered loads (calibration_store) from which verify batches are not timed again


def calibrate(costs: CostModel, target_ctx: backend.Context, draft_ctx: backend.Context | None = None,
              steps: int = 5, verify_sizes: tuple[int, ...] = VERIFY_SIZES,
              remembered: Sequence[Mapping[int, float]] = ()) -> dict[int, float]:
    """Single-token passes of the target and the draft (the median of `steps` warm passes) and one
    target pass over each verify batch size, logits read at every position as a verify pass reads
    them, and a prompt pass of PREFILL_TOKENS through each (what auto's lazy catch-up will cost).
    Sizes on both sides of powers of two are timed, not interpolated: kernels work in tiles, and a
    batch of 16 can cost less than one of 15.
    `remembered`: earlier loads' verify costs on this machine, each {batch size: seconds ÷ that
    load's single-token pass} (calibration_store). Each size is priced at the median ratio over them
    and this load's timing, times this load's single-token pass: one warm timing scatters by 10-40 %
    on a shared machine. With REMEMBERED_ENOUGH of them the batches are not timed at all.
    These are the yardsticks for c, for predicted speed-ups and for auto mode; real rounds refine
    them as they run. Both caches are left empty. Returns this load's ratios ({} where none were
    timed), for calibration_store to keep."""
    timed: dict[int, float] = {}
    contexts = [("target", target_ctx)]
    if draft_ctx is not None:
        contexts.append(("model", draft_ctx))
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
        _time_prefill(costs, name, ctx, start)
        if name == "target":
            costs.verify_s[1] = median
            if len(remembered) < REMEMBERED_ENOUGH and median > 0:
                timed = {k: s / median for k, s in _time_verify_batches(ctx, start, verify_sizes).items()}
            loads = [*remembered, timed] if timed else list(remembered)
            for k in sorted({k for load in loads for k in load} - {1}):
                costs.verify_s[k] = median * float(np.median([load[k] for load in loads if k in load]))
        else:
            costs.draft_step_s[name] = median
        ctx.clear()
    return timed


def _time_verify_batches(ctx: backend.Context, token: int, sizes: tuple[int, ...]) -> dict[int, float]:
    """{batch size: seconds of its faster of two passes} for the sizes that fit in the context."""
    out = {}
    base = len(ctx.tokens)
    for k in sizes:
        if base + k > ctx.n_ctx:
            break
        passes = []
        for _ in range(2):                # the first pass of a new batch shape sets up buffers
            t0 = time.perf_counter()
            ctx.eval([token] * k, logits="all")
            [int(np.argmax(ctx.logits(i))) for i in range(k)]
            passes.append(time.perf_counter() - t0)
            ctx.truncate(base)
        out[k] = min(passes)
    return out


def _time_prefill(costs: CostModel, name: str, ctx: backend.Context, token: int) -> None:
    base = len(ctx.tokens)
    n = min(PREFILL_TOKENS, ctx.n_ctx - base)
    if n < 8:
        return
    t0 = time.perf_counter()
    ctx.eval([token] * n, logits="none")
    costs.record_prefill(name, n, time.perf_counter() - t0)
    ctx.truncate(base)
