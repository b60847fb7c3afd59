"""Turning benchmark runs into per-setting medians and speed-up ratios, and writing them out."""
from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass

from desktop_app.bench.runner import BenchSetting, RunResult


@dataclass
class Row:
    prompt: str
    setting: str
    drafter: str
    draft_max: int
    auto: bool
    temperature: float
    runs: int
    tokens_per_s: float
    ttft_s: float
    alpha: float | None
    acceptance_rate: float | None
    mean_accepted: float | None
    draft_s: float
    verify_s: float
    c: float | None
    speedup: float | None             # median over repeats of (this run / the plain runs either side of it)
    speedup_min: float | None
    speedup_max: float | None
    predicted_speedup: float | None   # the paper's formula over the runs' rounds, measured α and c, flat
                                      # verify cost (GenerationStats.predicted_speedup)
    predicted_speedup_measured: float | None  # with the measured cost of each verify batch size
    lookup_ceiling: float | None = None       # plain rows: the best any prompt lookup could do (median)
    n_tokens: float | None = None             # the replies' tokens (median): fewer than asked where they ended


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(statistics.median(values)) if values else None


def speedup_ratios(runs: list[RunResult], plain: list[RunResult]) -> list[float]:
    """Each run against its plain baseline of the same repeat: the mean of the plain runs made just
    before and just after it (runs carry their place in the run order), or the repeat's only plain run."""
    out = []
    for run in runs:
        same = [p for p in plain if p.repeat == run.repeat and p.tokens_per_s]
        before = [p for p in same if 0 <= p.index < run.index]
        after = [p for p in same if p.index > run.index]
        if run.index >= 0 and (before or after):
            near = ([max(before, key=lambda p: p.index)] if before else []) + \
                   ([min(after, key=lambda p: p.index)] if after else [])
        else:
            near = same
        if near:
            out.append(run.tokens_per_s / statistics.fmean(p.tokens_per_s for p in near))
    return out


def summarize(results: list[RunResult], settings: list[BenchSetting]) -> list[Row]:
    rows = []
    prompts = list(dict.fromkeys(r.prompt for r in results))
    for prompt in prompts:
        for s in settings:
            runs = [r for r in results if r.prompt == prompt and r.setting == s.name]
            if not runs:
                continue
            plain_name = BenchSetting("none", temperature=s.temperature).name
            plain = [r for r in results if r.prompt == prompt and r.setting == plain_name]
            ratios = [1.0] * len(runs) if s.is_plain else speedup_ratios(runs, plain)
            rows.append(Row(
                prompt, s.name, s.drafter, s.draft_max, s.auto, s.temperature, len(runs),
                _median(r.tokens_per_s for r in runs), _median(r.ttft_s for r in runs),
                _median(r.alpha for r in runs), _median(r.acceptance_rate for r in runs),
                _median(r.mean_accepted for r in runs), _median(r.t_draft_s for r in runs),
                _median(r.t_verify_s for r in runs), _median(r.c for r in runs),
                _median(ratios), min(ratios) if ratios else None, max(ratios) if ratios else None,
                _median(r.predicted_speedup for r in runs), _median(r.predicted_speedup_measured for r in runs),
                _median(r.lookup_ceiling for r in runs), _median(r.n_tokens for r in runs)))
    return rows


def short_replies(rows: list[Row], asked: int | None) -> str:
    """Which prompts' replies ended before the tokens asked for, and at how many: their speeds rest on
    fewer tokens than the header says ("List three fruits." ended at about 6 of 32, and its 0.67× stood
    unexplained: a new user's try). "" where none did."""
    if not asked:
        return ""
    by_prompt: dict[str, list[float]] = {}
    for r in rows:
        if r.n_tokens is not None and r.n_tokens < asked:
            by_prompt.setdefault(r.prompt, []).append(r.n_tokens)
    if not by_prompt:
        return ""
    said = [f"{prompt} {min(n):.0f}" + (f"–{max(n):.0f}" if max(n) != min(n) else "") + " tokens"
            for prompt, n in by_prompt.items()]
    return (f"Replies that ended before the {asked} tokens asked for (median over repeats), whose speeds rest on "
            f"fewer tokens: {', '.join(said)}.")


@dataclass
class AutoVerdict:
    """Auto mode against the best fixed setting (plain included) for one prompt and temperature."""

    prompt: str
    auto: str
    best_fixed: str
    speedup: float | None            # auto's speed-up over plain
    best_speedup: float | None       # the best fixed setting's
    ttft_vs_plain: float | None      # auto's time to first token over plain's

    @property
    def vs_best(self) -> float | None:
        return self.speedup / self.best_speedup if self.speedup and self.best_speedup else None


def auto_verdicts(rows: list[Row]) -> list[AutoVerdict]:
    """For every auto row: the fixed row of the same prompt and temperature with the best speed-up."""
    out = []
    for a in (r for r in rows if r.auto):
        same = [r for r in rows if r.prompt == a.prompt and r.temperature == a.temperature and not r.auto
                and r.drafter != "server"]                  # Tandem's own settings only
        plain = next((r for r in same if r.drafter == "none"), None)
        scored = [(1.0 if r.drafter == "none" else r.speedup, r) for r in same
                  if r.drafter == "none" or r.speedup is not None]
        if not scored or plain is None:
            continue
        best_speedup, best = max(scored, key=lambda x: x[0])
        out.append(AutoVerdict(a.prompt, a.setting, best.setting, a.speedup, best_speedup,
                               a.ttft_s / plain.ttft_s if plain.ttft_s else None))
    return out


def busy_runs(results: list[RunResult]) -> list[int]:
    """[runs beside other work that took CPUs their threads needed, runs]: the table's meta["busy_runs"]."""
    return [sum(r.busy for r in results), len(results)]


def _fmt(v, spec=".2f", none="–") -> str:
    return none if v is None else format(v, spec)


def to_markdown(rows: list[Row], meta: dict) -> str:
    lines = [f"# Tandem bench: {meta.get('target_name', '')}"
             + (f" + {meta['draft_name']}" if meta.get("draft_name") else ""), ""]
    lines.append(f"`{meta.get('command', '')}`")
    lines.append("")
    if meta.get("interrupted") == "runs":
        lines += ["**Interrupted** (Ctrl-C) during the runs: only the runs that finished are here, so a setting "
                  "may have fewer repeats than asked for, or none.", ""]
    elif meta.get("interrupted") == "replay":
        lines += ["**Interrupted** (Ctrl-C) during the replay: every run finished and is here; the replay's "
                  "verdicts are not.", ""]
    busy = meta.get("busy_runs")
    if busy and busy[0]:
        lines += [f"**Not like for like:** other work took CPUs the threads needed during {busy[0]} of the "
                  f"{busy[1]} runs (their progress lines, and `others_cpus` in the JSON, say how many): the "
                  "speed-ups beside them compare a busy machine with a quiet one. Run it again when the machine "
                  "is quiet.", ""]
    repeats = meta.get("repeats")
    lines.append(f"{repeats} repeat{'' if repeats == 1 else 's'} × {meta.get('n_tokens')} tokens, {meta.get('threads')} threads, "
                 f"context {meta.get('n_ctx')}; runs interleaved (plain, A, plain, B, plain, …). "
                 f"Speed-up: median over repeats of each run over the mean of the plain runs just before "
                 f"and after it, with min–max. Other columns are medians over a setting's runs (plain's: all of "
                 f"its runs); c is one draft-model step in single-token target passes (none: copies, no model "
                 f"step); predicted is from α and the costs, flat as if a check cost one single pass (the "
                 f"papers' model), measured at the check costs timed here.")
    mem = meta.get("memory")
    if mem:
        lines.append("")
        files, kv, peak = (round(mem[k]) for k in ("model_files_mb", "kv_caches_mb", "rss_peak_mb"))
        lines.append(f"Memory: resident {mem['rss_loaded_mb']:.0f} MB after loading, peak {peak} MB; "   # (the sums
                     f"model files {files} MB + KV caches {kv} MB = {files + kv} MB "             # of the numbers
                     f"(peak − that = {peak - files - kv:+d} MB).")                           # shown: 1609 + 168
                                                                                              # read "= 1776")
    lines += ["", "| prompt | setting | tok/s | TTFT ms | α | kept/drafted | kept/round | draft s | target s | c | "
                  "speed-up (min–max) | predicted (flat / measured cost) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        speed = "1 (baseline)" if r.drafter == "none" else (
            f"{_fmt(r.speedup)} ({_fmt(r.speedup_min)}–{_fmt(r.speedup_max)})" if r.speedup is not None else "–")
        predicted = ("–" if r.drafter == "none"
                     else f"{_fmt(r.predicted_speedup)} / {_fmt(r.predicted_speedup_measured)}")
        split = "– | –" if r.drafter == "server" else f"{r.draft_s:.2f} | {r.verify_s:.2f}"   # a server sends none
        alpha = "not drafted" if r.alpha is None and r.drafter != "none" else _fmt(r.alpha)  # (a bare "–" read
        # like the "0.00 | 0%" of drafts all rejected: a new user's try)
        lines.append(f"| {r.prompt} | {r.setting} | {r.tokens_per_s:.1f} | {1000 * r.ttft_s:.0f} | {alpha} | "
                     f"{_fmt(r.acceptance_rate, '.0%')} | {_fmt(r.mean_accepted)} | {split} | "
                     f"{'none' if r.c == 0 else _fmt(r.c)} | {speed} | {predicted} |")   # (0: copies, no step)
    short = short_replies(rows, meta.get("n_tokens"))
    if short:
        lines += ["", short]
    if meta.get("server"):
        lines += ["", f"llama-server: {meta['server']}. Its tokens per second are the server's own count (network "
                      "and its first token excluded); its speed-up is that over the local plain runs beside it, so on "
                      "another machine, model or chat template it compares the two setups, not speculation alone. "
                      "Its draft/target split is not sent."]
    ceilings = [(r.setting, r.prompt, r.lookup_ceiling) for r in rows if r.lookup_ceiling is not None]
    if ceilings:
        lines += ["", f"Lookup ceiling, the speed-up over plain that prompt lookup would reach if it knew which "
                      f"copies the target keeps (each round copies exactly the run that the best earlier occurrence "
                      f"of the last two tokens gets right, at most {meta.get('lookup_ceiling_draft_max')} tokens, "
                      f"or decodes plainly), priced at the verify cost per batch size measured in this run: "
                  + ", ".join(f"{prompt} {c:.2f}×" + (f" ({setting})" if setting != "plain" else "")
                              for setting, prompt, c in ceilings) + "."]
    verdicts = auto_verdicts(rows)
    if verdicts:
        lines += ["", "Auto against the best fixed setting of each prompt (speed-ups over plain, as above):", "",
                  "| prompt | auto | best fixed | auto ÷ best fixed | auto TTFT ÷ plain's |", "|---|---|---|---|---|"]
        for v in verdicts:
            lines.append(f"| {v.prompt} | {v.auto} {_fmt(v.speedup)}× | {v.best_fixed} {_fmt(v.best_speedup)}× | "
                         f"{_fmt(v.vs_best)} | {_fmt(v.ttft_vs_plain)} |")
    replay = meta.get("replay")
    if replay:
        lines += ["", "Replay (`--replay`): the built-in prompts' greedy replies, recorded here, replayed under each "
                      "cost profile (desktop_app/engine/cost_profiles.py); auto against every fixed setting, "
                      f"means over {replay['seeds']} noise seeds (±{replay['noise']:.0%} per pass):", "",
                  "| profile | prompt | auto ÷ best fixed (best) | auto ÷ plain | auto TTFT ÷ plain's |",
                  "|---|---|---|---|---|"]
        for v in replay["verdicts"]:
            lines.append(f"| {v['profile']} | {v['prompt']} | {v['vs_best']:.2f} ({v['best_fixed']}) | "
                         f"{v['vs_plain']:.2f} | {v['ttft_vs_plain']:.2f} |")
    return "\n".join(lines) + "\n"


def to_json(rows: list[Row], results: list[RunResult], meta: dict) -> str:
    return json.dumps({"meta": meta, "summary": [asdict(r) for r in rows],
                       "auto": [dict(asdict(v), vs_best=v.vs_best) for v in auto_verdicts(rows)],
                       "runs": [r.to_json() for r in results]}, indent=2)
