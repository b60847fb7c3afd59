"""Time a target's check (verify pass) at every batch size, in single-token passes: docs/auto-mode.md's
table of this machine's cost shape. Each size is a pass over that many tokens after a context of
--depth tokens, logits read at every position as a verify pass reads them; --repeat passes each, in
alternating order (up, then down) so that drift falls on every size alike; the median is printed.

    python scripts/check_costs.py -m qwen2.5-coder-1.5b [--sizes 1-33] [--depth 400] [--repeat 8]

The weights load as Tandem loads them on this machine (repacked where its CPU probe passed, with AMX
kept out where AMX faults: engine/repack.py). `--repack auto,off` times both, pass by pass in turn,
and prints each table and, per size, how much faster the first is.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from desktop_app import models
from desktop_app.engine.load_options import LoadOptions
from desktop_app.engine.loading import load_model, open_context


def _sizes(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi) + 1)) if hi else [int(k) for k in text.split(",")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True, help="a GGUF path or a catalogue key")
    ap.add_argument("--sizes", default="1-33", help="a range (1-33) or a list (1,4,16)")
    ap.add_argument("--depth", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=8)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--repack", default="auto", help="auto, off or on, or several to compare (auto,off)")
    args = ap.parse_args()
    sizes = sorted(set(_sizes(args.sizes)) | {1})
    path = str(models.path_for(args.model))
    choices = args.repack.split(",")
    tokens = [int(t) for t in np.random.default_rng(0).integers(100, 20000, args.depth + max(sizes))]
    contexts = {}
    for choice in choices:
        options = LoadOptions(n_threads=args.threads, n_ctx=args.depth + max(sizes) + 8,
                              repack={"auto": None, "off": False, "on": True}[choice])
        contexts[choice] = ctx = open_context(load_model(path, options), options)
        ctx.eval(tokens[:args.depth], logits="last")
    base = args.depth
    times: dict[tuple[str, int], list[float]] = {(c, k): [] for c in choices for k in sizes}
    for rep in range(args.repeat):
        for k in sizes if rep % 2 == 0 else sizes[::-1]:
            for choice in choices if (rep + k) % 2 == 0 else choices[::-1]:
                ctx = contexts[choice]
                t0 = time.perf_counter()
                ctx.eval(tokens[args.depth:args.depth + k], logits="all")
                [int(np.argmax(ctx.logits(i))) for i in range(k)]
                times[choice, k].append(time.perf_counter() - t0)
                ctx.truncate(base)
    median = {key: float(np.median(v)) for key, v in times.items()}
    for choice in choices:
        single = median[choice, 1]
        print(f"repack {choice}: single pass {1000 * single:.1f} ms ({args.depth} tokens of context, "
              f"{args.repeat} passes a size)")
        print("| tokens | " + " | ".join(str(k) for k in sizes) + " |")
        print("|---" * (len(sizes) + 1) + "|")
        print("| cost | " + " | ".join(f"{median[choice, k] / single:.2f}" for k in sizes) + " |")
    if len(choices) > 1:
        first, *others = choices
        for other in others:
            print(f"{other} ÷ {first}, time of a pass: " + " | ".join(
                f"{k}: {median[other, k] / median[first, k]:.2f}" for k in sizes))


if __name__ == "__main__":
    main()
