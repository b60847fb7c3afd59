#!/usr/bin/env python3
"""Tandem beside llama.cpp's own tools, interleaved in one run on this machine.

Build the tools once from the llama-cpp-python sdist (never commit them):

    pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d /tmp/sdist
    tar xzf /tmp/sdist/llama_cpp_python-0.3.36.tar.gz -C /tmp/sdist
    cmake -S /tmp/sdist/llama_cpp_python-0.3.36/vendor/llama.cpp -B /tmp/lcbuild -DCMAKE_BUILD_TYPE=Release \\
          -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF
    cmake --build /tmp/lcbuild -j2 --target llama-bench llama-speculative-simple

then: python scripts/compare_llama_cpp.py --bin /tmp/lcbuild/bin

Three comparisons, each repeated and interleaved (theirs, ours, ours, theirs, theirs, ours, ...):
  plain      llama-bench tg (tokens/s from an empty context) vs Tandem's plain loop from BOS
  draft      llama-speculative-simple --spec-type draft-simple vs Tandem's draft model, same γ, greedy
  lookup     llama-speculative-simple --spec-type ngram-simple vs Tandem's prompt lookup, and both
             against Tandem's plain loop (the mean of a plain run just before and one just after),
             on the copy-heavy edit prompt; then the lookup ceiling on that prompt (see
             desktop_app/engine/lookup_ceiling.py) at verify costs timed for every batch size
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from desktop_app import models  # noqa: E402
from desktop_app.bench.prompts import BUILTIN  # noqa: E402
from desktop_app.engine import (GREEDY, Controls, FinishEvent, LoadOptions, ModelPair, RoundEvent,  # noqa: E402
                                SpecSettings)
from desktop_app.engine import repack  # noqa: E402
from desktop_app.engine.lookup_ceiling import lookup_ceiling  # noqa: E402

DECODED = re.compile(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s")
ACCEPT = re.compile(r"accept\s+=\s+([\d.]+)%")


def chatml(text: str) -> str:
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


def llama_bench(bin_dir, model, threads, n) -> float:
    out = subprocess.run(repack.llama_cpp_tool([os.path.join(bin_dir, "llama-bench"), "-m", model, "-t", str(threads),
                                                "-p", "0", "-n", str(n), "-r", "1", "-o", "json"], off=("--repack", "0")),
                         capture_output=True, text=True, check=True)
    return float(json.loads(out.stdout)[0]["avg_ts"])


def llama_spec(bin_dir, args: list[str], prompt: str, threads, n, ctx) -> tuple[float, float | None]:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write(prompt)
    try:
        out = subprocess.run(repack.llama_cpp_tool([os.path.join(bin_dir, "llama-speculative-simple"), *args, "-f",
                                                    fh.name, "-n", str(n), "--temp", "0", "-t", str(threads), "-c",
                                                    str(ctx)]),
                             capture_output=True, text=True, timeout=900)
    finally:
        os.unlink(fh.name)
    text = out.stdout + out.stderr
    m = DECODED.search(text)
    if not m:
        raise RuntimeError("llama-speculative-simple printed no speed:\n" + text[-1500:])
    a = ACCEPT.search(text)
    return float(m.group(3)), (float(a.group(1)) / 100 if a else None)


def ours(pair: ModelPair, prompt_tokens, spec: SpecSettings, n: int) -> tuple[float, float | None]:
    pair.target_ctx.clear()
    if pair.draft_ctx is not None:
        pair.draft_ctx.clear()
    finish = None
    for ev in pair.generate(prompt_tokens, GREEDY, Controls(spec), n):
        if isinstance(ev, FinishEvent):
            finish = ev
    return finish.stats.tokens_per_s, finish.stats.acceptance_rate


def plain_reply(pair: ModelPair, prompt_tokens, n: int) -> list[int]:
    pair.target_ctx.clear()
    for ev in pair.generate(prompt_tokens, GREEDY, Controls(SpecSettings(enabled=False)), n):
        if isinstance(ev, FinishEvent):
            return list(ev.tokens)
    return []


def verify_cost_table(pair: ModelPair, prompt_tokens, max_batch: int, reps: int = 7) -> dict[int, float]:
    """The target's verify pass, logits read at every position, timed for every batch size 1..max_batch
    after the prompt: the median of `reps` passes per size, sizes taken in alternating order."""
    ctx = pair.target_ctx
    ctx.clear()
    ctx.sync(prompt_tokens[:-1], logits="none")
    base = len(prompt_tokens) - 1
    sizes = list(range(1, max_batch + 1))
    times: dict[int, list[float]] = {k: [] for k in sizes}
    for r in range(reps):
        for k in (sizes if r % 2 else sizes[::-1]):
            batch = [prompt_tokens[-1]] + list(prompt_tokens[base - k + 1:base])   # (any k tokens will do)
            t0 = time.perf_counter()
            ctx.eval(batch, logits="all")
            [ctx.logits(i).argmax() for i in range(k)]
            times[k].append(time.perf_counter() - t0)
            ctx.truncate(base)
    return {k: statistics.median(v) for k, v in times.items()}


def draft_round_costs(pair: ModelPair, prompt_tokens, gamma: int, n: int, reps: int = 7) -> dict:
    """What a γ round costs each loop, from passes timed here with the same llama.cpp library.

    Both loops run γ single-token draft passes and one target pass over γ+1 tokens with logits at
    every position. llama-speculative-simple also runs that verify batch through the draft
    (`common_speculative_process`: γ+1 tokens, logits at the last). Tandem's draft instead evaluates
    2 tokens in its first step when the previous round kept every draft (x_γ and the bonus token)."""
    finish, rounds = None, []
    pair.target_ctx.clear()
    pair.draft_ctx.clear()
    for ev in pair.generate(prompt_tokens, GREEDY, Controls(SpecSettings(drafter="model", draft_max=gamma)), n):
        if isinstance(ev, FinishEvent):
            finish = ev
        elif isinstance(ev, RoundEvent):
            rounds.append(ev)
    full = sum(r.accepted == r.gamma == gamma for r in rounds) / max(1, len(rounds))
    text = list(prompt_tokens) + list(finish.tokens)
    base = len(prompt_tokens)
    times: dict[str, list[float]] = {"step": [], "catch_up": [], "process": [], "verify": []}
    for _ in range(reps):
        for key, ctx, size, logits in (("step", pair.draft_ctx, 1, "last"), ("catch_up", pair.draft_ctx, 2, "last"),
                                       ("process", pair.draft_ctx, gamma + 1, "last"),
                                       ("verify", pair.target_ctx, gamma + 1, "all")):
            ctx.sync(text[:base], logits="none")
            t0 = time.perf_counter()
            ctx.eval(text[base:base + size], logits=logits)
            times[key].append(time.perf_counter() - t0)
    t = {k: statistics.median(v) for k, v in times.items()}
    theirs = gamma * t["step"] + t["process"] + t["verify"]
    mine = (gamma - 1) * t["step"] + full * t["catch_up"] + (1 - full) * t["step"] + t["verify"]
    return {**t, "full": full, "theirs": theirs, "mine": mine}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="folder with llama-bench and llama-speculative-simple")
    ap.add_argument("-m", "--target", default="qwen2.5-coder-1.5b")
    ap.add_argument("-md", "--draft", default="qwen2.5-coder-0.5b")
    ap.add_argument("--draft-max", type=int, default=4)
    ap.add_argument("--draft-p-min", type=float, default=0.0,
                    help="both stop drafting below this draft probability (llama.cpp's default: 0)")
    ap.add_argument("--lookup-max", type=int, default=16, help="draft ceiling for both n-gram methods")
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("-c", "--ctx", type=int, default=4096)
    ap.add_argument("--only", choices=["plain", "draft", "lookup"], action="append")
    ap.add_argument("--markdown", help="write the table here too")
    a = ap.parse_args()
    target, draft = models.path_for(a.target), models.path_for(a.draft)
    opts = LoadOptions(n_threads=a.threads, n_ctx=a.ctx)
    pair = ModelPair.load(target, draft, opts, opts)
    code = chatml(next(p.text for p in BUILTIN if p.name == "code"))
    edit = chatml(next(p.text for p in BUILTIN if p.name == "edit"))
    tok = lambda text: pair.target.tokenize(text, add_special=True, parse_special=True)  # noqa: E731
    wanted = a.only or ["plain", "draft", "lookup"]
    rows = {}

    def pair_up(r, run_theirs, run_mine):
        """Both, in an order that alternates by repeat, so that neither always runs second (in one
        run our lookup was slow each time it ran right after llama.cpp's tool, and level before it)."""
        if r % 2:
            mine = run_mine()
            return run_theirs(), mine
        theirs = run_theirs()
        return theirs, run_mine()

    for r in range(a.repeat):
        if "plain" in wanted:
            theirs, mine = pair_up(r, lambda: llama_bench(a.bin, target, a.threads, a.n),
                                   lambda: ours(pair, [pair.target.bos], SpecSettings(enabled=False), a.n)[0])
            rows.setdefault("plain", []).append((theirs, mine, None))
            print(f"[{r + 1}] plain   llama-bench tg{a.n} {theirs:6.2f}  tandem {mine:6.2f}  ratio {mine / theirs:.3f}",
                  flush=True)
        if "draft" in wanted:
            (theirs, acc_t), (mine, acc_m) = pair_up(
                r, lambda: llama_spec(a.bin, ["-m", target, "-md", draft, "--spec-type", "draft-simple",
                                              "--spec-draft-n-max", str(a.draft_max), "--spec-draft-p-min",
                                              str(a.draft_p_min)], code, a.threads, a.n, a.ctx),
                lambda: ours(pair, tok(code), SpecSettings(drafter="model", draft_max=a.draft_max,
                                                           draft_p_min=a.draft_p_min), a.n))
            rows.setdefault("draft", []).append((theirs, mine, (acc_t, acc_m)))
            print(f"[{r + 1}] draft   speculative-simple {theirs:6.2f} (acc {acc_t:.2f})  tandem {mine:6.2f} "
                  f"(acc {acc_m:.2f})  ratio {mine / theirs:.3f}", flush=True)
        if "lookup" in wanted:
            before = ours(pair, tok(edit), SpecSettings(enabled=False), a.n)[0]
            (theirs, _), (mine, _) = pair_up(
                r, lambda: llama_spec(a.bin, ["-m", target, "--spec-type", "ngram-simple",
                                              "--spec-ngram-simple-size-m", str(a.lookup_max)], edit, a.threads,
                                      a.n, a.ctx),
                lambda: ours(pair, tok(edit), SpecSettings(drafter="lookup", draft_max=a.lookup_max), a.n))
            after = ours(pair, tok(edit), SpecSettings(enabled=False), a.n)[0]
            plain = (before + after) / 2               # Tandem plain just before and just after both runs
            rows.setdefault("lookup", []).append((theirs, mine, plain))
            print(f"[{r + 1}] lookup  ngram-simple {theirs:6.2f}  tandem lookup {mine:6.2f}  tandem plain {plain:6.2f}  "
                  f"vs ngram {mine / theirs:.3f}  vs plain {mine / plain:.3f}", flush=True)
    if "draft" in wanted:
        k = draft_round_costs(pair, tok(code), a.draft_max, a.n)
        ceiling = (f"Predicted from pass costs timed here (medians): draft step {1000 * k['step']:.1f} ms, "
                   f"2-token catch-up {1000 * k['catch_up']:.1f} ms ({k['full']:.0%} of rounds), llama.cpp's draft "
                   f"pass over the verify batch {1000 * k['process']:.1f} ms, verify {1000 * k['verify']:.1f} ms; a "
                   f"round costs llama.cpp {1000 * k['theirs']:.0f} ms and Tandem {1000 * k['mine']:.0f} ms, so "
                   f"Tandem ÷ llama-speculative-simple ≈ {k['theirs'] / k['mine']:.3f} at equal acceptance.")
        print(ceiling, flush=True)
    if "lookup" in wanted:
        table = verify_cost_table(pair, tok(edit), a.lookup_max + 1)
        ngram_vs_plain = statistics.median(t / p for t, _, p in rows["lookup"])
        best = lookup_ceiling(tok(edit), plain_reply(pair, tok(edit), a.n), table.get, a.lookup_max)
        ceiling_line = (f"Lookup ceiling: on Tandem's plain reply to the edit prompt, a copier that knew which copies the "
                        f"target keeps (each round copies exactly the run the best earlier occurrence of the last two "
                        f"tokens gets right, at most {a.lookup_max}, or decodes plainly) would reach {best:.3f}× plain "
                        f"at the verify costs timed here for every batch size (1 token {1000 * table[1]:.1f} ms, "
                        f"{a.lookup_max + 1} tokens {1000 * table[a.lookup_max + 1]:.1f} ms, "
                        f"{table[a.lookup_max + 1] / table[1]:.2f} single passes). The targets need 1.4× plain and "
                        f"1.1 × ngram-simple's {ngram_vs_plain:.3f}× = {1.1 * ngram_vs_plain:.3f}× plain.")
        print(ceiling_line, flush=True)
    pair.close()
    med = statistics.median
    lines = [f"| comparison ({a.repeat} interleaved repeats, {a.n} tokens, {a.threads} threads) | llama.cpp t/s | "
             f"Tandem t/s | ratio: median of pairs (min–max) | best ÷ best |", "|---|---|---|---|---|"]
    for key, label in (("plain", f"plain: llama-bench tg{a.n} vs Tandem plain"),
                       ("draft", f"draft model γ={a.draft_max}" + (f", p-min {a.draft_p_min:g}" if a.draft_p_min else "")
                        + ", greedy, code prompt: llama-speculative-simple vs Tandem"),
                       ("lookup", "prompt lookup, edit prompt: ngram-simple vs Tandem lookup")):
        if key not in rows:
            continue
        ratios = [m / t for t, m, _ in rows[key]]
        best = max(m for _, m, _ in rows[key]) / max(t for t, _, _ in rows[key])
        lines.append(f"| {label} | {med(t for t, _, _ in rows[key]):.2f} | {med(m for _, m, _ in rows[key]):.2f} | "
                     f"{med(ratios):.3f} ({min(ratios):.3f}–{max(ratios):.3f}) | {best:.3f} |")
        if key == "lookup":
            vs_plain = [m / p for _, m, p in rows[key]]
            ngram_vs_plain = [t / p for t, _, p in rows[key]]
            best_plain = max(p for _, _, p in rows[key])
            lines.append(f"| prompt lookup vs Tandem plain on the same prompt (plain: mean of the runs either side) | "
                         f"{med(ngram_vs_plain):.3f}× plain | {med(vs_plain):.3f}× plain "
                         f"({min(vs_plain):.3f}–{max(vs_plain):.3f}) | "
                         f"{max(t for t, _, _ in rows[key]) / best_plain:.3f} / {max(m for _, m, _ in rows[key]) / best_plain:.3f} |")
    lines.append("")
    lines.append("Median of pairs: each repeat's Tandem run over the llama.cpp run next to it. Best ÷ best: the "
                 "fastest run of each over all repeats, the least disturbed by other load on a shared machine.")
    if "draft" in wanted:
        lines += ["", ceiling]
    if "lookup" in wanted:
        lines += ["", ceiling_line]
    table = "\n".join(lines)
    print("\n" + table)
    if a.markdown:
        with open(a.markdown, "w") as fh:
            fh.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
