"""Timing the passes every prediction rests on, once, after loading a pair."""
from __future__ import annotations

import time

import numpy as np

from desktop_app.engine import backend
from desktop_app.engine.costs import CostModel

VERIFY_SIZES = (2, 3, 4, 5, 8, 9, 16, 17, 33)
PREFILL_TOKENS = 64


def calibrate(costs: CostModel, target_ctx: backend.Context, draft_ctx: backend.Context | None = None,
              steps: int = 5, verify_sizes: tuple[int, ...] = VERIFY_SIZES) -> None:
    """Single-token passes of the target and the draft (the median of `steps` warm passes) and one
    target pass over each verify batch size, logits read at every position as a verify pass reads
    them, and a prompt pass of PREFILL_TOKENS through each (what auto's lazy catch-up will cost).
    Sizes on both sides of powers of two are timed, not interpolated: kernels work in tiles, and a
    batch of 16 can cost less than one of 15.
    These are the yardsticks for c, for predicted speed-ups and for auto mode; real rounds refine
    them as they run. Both caches are left empty."""
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
            _time_verify_batches(costs, ctx, start, verify_sizes)
        else:
            costs.draft_step_s[name] = median
        ctx.clear()


def _time_verify_batches(costs: CostModel, ctx: backend.Context, token: int, sizes: tuple[int, ...]) -> None:
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
        costs.verify_s[k] = min(passes)


def _time_prefill(costs: CostModel, name: str, ctx: backend.Context, token: int) -> None:
    base = len(ctx.tokens)
    n = min(PREFILL_TOKENS, ctx.n_ctx - base)
    if n < 8:
        return
    t0 = time.perf_counter()
    ctx.eval([token] * n, logits="none")
    costs.record_prefill(name, n, time.perf_counter() - t0)
    ctx.truncate(base)
