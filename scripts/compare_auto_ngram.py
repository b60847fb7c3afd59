#!/usr/bin/env python3
"""Tandem's auto mode (default settings, draft model loaded) beside llama.cpp's ngram-simple at its
best settings, on the copy-heavy edit prompt, interleaved in one run, with the lookup ceiling.

Build llama.cpp's tools as scripts/compare_llama_cpp.py's docstring says, then:

    python scripts/compare_auto_ngram.py --bin /tmp/lcbuild/bin --repeat 6

Each repeat runs Tandem plain, then every ngram-simple setting asked for (--ngram N:M,...; N the
lookup n-gram, M the most tokens drafted), Tandem auto (default settings, the draft model loaded) and
Tandem auto with prompt lookup only, in the order of a row of a Williams Latin square, then Tandem
plain again. A --repeat that is a multiple of the number of those runs (twice it, when that number is
odd) gives every run every place, and every run before it, equally often; the script says when it is
not. (A fixed order once had auto behind auto with lookup only in every repeat, by 0.5-12 %, a gap
that clean A/B runs of the two did not show.)
Each is compared with the mean of the two Tandem plain runs of its repeat. Then the lookup ceiling
(desktop_app/engine/lookup_ceiling.py) on Tandem's plain reply, at verify costs timed in the run.

--tandem-ngram N:M adds a run of Tandem's own loop drafting as ngram-simple does (the same copies,
so the same rounds as llama.cpp's, drafted and kept token for token, which the script checks): beside
llama.cpp's run of that setting it says how much of a gap is the engine, per pass, and beside auto how
much is auto's choosing.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from compare_llama_cpp import chatml, llama_spec, ours, plain_reply, verify_cost_table  # noqa: E402

from desktop_app import models  # noqa: E402
from desktop_app.bench.prompts import BUILTIN  # noqa: E402
from desktop_app.bench.runner import williams_row  # noqa: E402
from desktop_app.engine import LoadOptions, ModelPair, SpecSettings  # noqa: E402
from desktop_app.engine.drafters import PromptLookupDrafter, Proposal  # noqa: E402
from desktop_app.engine.events import FinishEvent  # noqa: E402
from desktop_app.engine.lookup_ceiling import lookup_ceiling  # noqa: E402
from desktop_app.engine.replay import ngram_simple_copy  # noqa: E402
from desktop_app.engine.sampling import GREEDY  # noqa: E402
from desktop_app.engine.settings import Controls  # noqa: E402


TANDEM_NGRAM = "Tandem's loop, ngram-simple n={} m={}"


class NgramSimpleDrafter(PromptLookupDrafter):
    """Copies as llama.cpp's ngram-simple does (replay.ngram_simple_copy): m tokens after the most recent
    earlier occurrence of the last n, nothing when fewer than n follow it."""

    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def draft(self, context, gamma_max, params, rng, p_min=0.0) -> Proposal:
        t0 = time.perf_counter()
        out = Proposal.copied(ngram_simple_copy(context, self.n, gamma_max))
        out.t_s = time.perf_counter() - t0
        return out


def tandem_ngram(pair: ModelPair, tokens, n: int, m: int, max_tokens: int) -> tuple[float, int, int]:
    """Tandem's loop in fixed mode at γ = m, its lookup replaced by NgramSimpleDrafter(n) for the run:
    (tokens per second, drafted, kept)."""
    lookup = pair.decoder.drafters["lookup"]
    pair.decoder.drafters["lookup"] = NgramSimpleDrafter(n)
    pair.target_ctx.clear()
    finish = None
    try:
        for ev in pair.generate(tokens, GREEDY, Controls(SpecSettings(drafter="lookup", draft_max=m)), max_tokens):
            if isinstance(ev, FinishEvent):
                finish = ev
    finally:
        pair.decoder.drafters["lookup"] = lookup
    return finish.stats.tokens_per_s, finish.stats.n_drafted, finish.stats.n_accepted


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("-m", "--target", default="qwen2.5-coder-1.5b")
    ap.add_argument("-md", "--draft", default="qwen2.5-coder-0.5b")
    ap.add_argument("--ngram", default="3:4,3:8,3:16,4:16,12:16", help="ngram-simple settings N:M, comma-separated")
    ap.add_argument("--prompt", default="edit", help="a built-in prompt's name")
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("-c", "--ctx", type=int, default=4096)
    ap.add_argument("--tandem-ngram", metavar="N:M", help="also run Tandem's loop drafting as ngram-simple N:M does")
    a = ap.parse_args()
    settings = list(dict.fromkeys(tuple(int(x) for x in s.split(":")) for s in a.ngram.split(",")))
    ours_ngram = tuple(int(x) for x in a.tandem_ngram.split(":")) if a.tandem_ngram else None
    n_runs = len(settings) + 2 + (ours_ngram is not None)
    balanced = n_runs if n_runs % 2 == 0 else 2 * n_runs
    if a.repeat % balanced:
        print(f"note: {n_runs} runs per repeat are balanced over a multiple of {balanced} repeats; "
              f"{a.repeat} leaves the order partly unbalanced", flush=True)
    target, draft = models.path_for(a.target), models.path_for(a.draft)
    opts = LoadOptions(n_threads=a.threads, n_ctx=a.ctx)
    pair = ModelPair.load(target, draft, opts, opts)
    text = chatml(next(p.text for p in BUILTIN if p.name == a.prompt))
    tokens = pair.target.tokenize(text, add_special=True, parse_special=True)
    auto = SpecSettings(drafter="model", auto=True)             # auto with default settings
    auto_lookup = SpecSettings(drafter="lookup", auto=True)     # auto's prompt lookup alone (no draft model)
    plain = SpecSettings(enabled=False)
    rows: dict[str, list[float]] = {}
    kept_share: dict[tuple, set] = {}     # each ngram-simple setting's kept ÷ drafted, llama.cpp's and Tandem's

    def llama(n, m):
        tps, accept = llama_spec(a.bin, ["-m", target, "--spec-type", "ngram-simple", "--spec-ngram-simple-size-n",
                                         str(n), "--spec-ngram-simple-size-m", str(m)], text, a.threads, a.n, a.ctx)
        kept_share.setdefault((n, m), set()).add(None if accept is None else round(accept, 4))
        return tps

    def ours_as_ngram():
        tps, drafted, kept = tandem_ngram(pair, tokens, *ours_ngram, a.n)
        kept_share.setdefault(("Tandem",), set()).add(round(kept / drafted, 4) if drafted else None)
        return tps

    for r in range(a.repeat):
        runs = [(f"ngram-simple n={n} m={m}", lambda n=n, m=m: llama(n, m)) for n, m in settings]
        runs.append(("Tandem auto", lambda: ours(pair, tokens, auto, a.n)[0]))
        if ours_ngram is not None:
            runs.append((TANDEM_NGRAM.format(*ours_ngram), ours_as_ngram))
        runs.append(("Tandem auto, lookup only", lambda: ours(pair, tokens, auto_lookup, a.n)[0]))
        for name, _ in runs:
            rows.setdefault(name, [])                               # (the table keeps this order)
        runs = [runs[k] for k in williams_row(len(runs), r)]
        before = ours(pair, tokens, plain, a.n)[0]
        measured = [(name, run()) for name, run in runs]
        after = ours(pair, tokens, plain, a.n)[0]
        base = (before + after) / 2
        line = [f"[{r + 1}] plain {base:6.2f} t/s"]
        for name, tps in measured:
            rows[name].append(tps / base)
            line.append(f"{name} {tps:6.2f} ({tps / base:.3f}× plain)")
        print("  ".join(line), flush=True)
    table = verify_cost_table(pair, tokens, 17)
    ceiling = lookup_ceiling(tokens, plain_reply(pair, tokens, a.n), table.get, 16)
    pair.close()
    med = statistics.median
    best_ngram = max((k for k in rows if k.startswith("ngram")), key=lambda k: med(rows[k]))
    print(f"\n| setting ({a.repeat} interleaved repeats, {a.n} tokens, {a.prompt} prompt) | × Tandem plain, median (min–max) |")
    print("|---|---|")
    for name, ratios in rows.items():
        print(f"| {name} | {med(ratios):.3f} ({min(ratios):.3f}–{max(ratios):.3f}) |")
    print(f"\n{best_ngram} reached {med(rows[best_ngram]) / ceiling:.2f} of the lookup ceiling.")
    for name in ("Tandem auto", "Tandem auto, lookup only"):
        pairs = [t / n for t, n in zip(rows[name], rows[best_ngram], strict=True)]
        print(f"\n{name} ÷ {best_ngram} (ngram-simple's best here), pair by pair: median {med(pairs):.3f} "
              f"({min(pairs):.3f}–{max(pairs):.3f}); {med(rows[name]) / ceiling:.2f} of the lookup ceiling.")
    if ours_ngram is not None:
        mine, theirs = TANDEM_NGRAM.format(*ours_ngram), "ngram-simple n={} m={}".format(*ours_ngram)
        shares = (kept_share.get(("Tandem",)), kept_share.get(ours_ngram))
        if theirs in rows:
            pairs = [t / n for t, n in zip(rows[mine], rows[theirs], strict=True)]
            print(f"\n{mine} ÷ llama.cpp's {theirs}, pair by pair: median {med(pairs):.3f} "
                  f"({min(pairs):.3f}–{max(pairs):.3f}); drafts kept, Tandem's loop {shares[0]}, llama.cpp's "
                  f"{shares[1]}" + (" (the same rounds)" if shares[0] == shares[1] and len(shares[0]) == 1 else
                                    " (NOT the same rounds: the texts differ)"))
        pairs = [t / n for t, n in zip(rows["Tandem auto, lookup only"], rows[mine], strict=True)]
        print(f"Tandem auto, lookup only ÷ {mine}, pair by pair: median {med(pairs):.3f} "
              f"({min(pairs):.3f}–{max(pairs):.3f}).")
    print(f"Lookup ceiling at up to 16 copied tokens, verify costs timed here (17 tokens = "
          f"{table[17] / table[1]:.2f} single passes): {ceiling:.3f}× plain.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
