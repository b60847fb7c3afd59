"""Print docs/auto-mode.md's replay tables: auto against every fixed setting on the recorded traces
(tests/data/traces), fresh (greedy, and sampled as the window samples) and reply after reply, under
every cost profile (the measured H200's among them), on one-line code rewritten, against llama.cpp's ngram-simple on the copy-heavy replies, and with a target
alone (lookup at γ 4 against auto). No model is loaded; it takes about a minute and a half. `--prior-shift X`
first moves every prompt-lookup prior by X on the log-odds scale (as scripts/replay_caution.py
sweeps it).

    python scripts/replay_tables.py > /tmp/tables.md
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
from pathlib import Path

from desktop_app.engine import auto_policy
from desktop_app.engine.cost_profiles import BUILTIN
from desktop_app.engine.replay import AUTO, PLAIN, Setting, Verdict, judge, judge_conversation, judge_warm, replay
from desktop_app.engine.trace import Trace, TraceSet, conversations

TRACES = Path(__file__).resolve().parent.parent / "tests" / "data" / "traces"
BUILT_IN = ("smollm2", "demo")
HELD_OUT = ("demo-heldout",)
SAMPLED = ("smollm2-sampled", "demo-sampled")       # the built-in prompts sampled as the window samples
CONVERSATIONS = ("demo-conversations",)            # tests/data/traces/conversations.json, turn after turn
ONE_LINE = ("demo-oneline", "demo-oneline-sampled")  # tests/data/traces/oneline_prompts.json: one-line code rewritten
COPY_HEAVY = (("demo", "edit"), ("smollm2", "edit"), ("demo-heldout", "rename"))   # (trace set, prompt)
NGRAM = ((3, 4), (4, 16), (12, 16), (12, 32))       # ngram-simple (n, m) as scripts/compare_auto_ngram.py runs it
SEEDS = 3


def _sets(names):
    """(name, trace set, profile) for every named trace set under every profile, its own "here" included."""
    for name in names:
        traces = TraceSet.load(str(TRACES / f"{name}.json"))
        for profile in [*BUILTIN.values(), traces.here]:
            yield name, traces, profile


def _fresh(names) -> list[tuple[str, Verdict]]:
    return [(name, judge(t, profile, traces.draft is not None))
            for name, traces, profile in _sets(names) for t in traces.traces]


def _fresh_table(cases: list[tuple[str, Verdict]]) -> list[str]:
    lines = ["| trace | profile | prompt | best fixed (× plain) | auto × plain | auto ÷ best | auto TTFT ÷ plain's | auto's rounds |",
             "|---|---|---|---|---|---|---|---|"]
    for name, v in cases:
        rounds = ", ".join(f"{k} {n}" for k, n in sorted(v.auto_rounds.items()))
        best = v.best_fixed_tokens_per_s / v.plain_tokens_per_s
        lines.append(f"| {name} | {v.profile} | {v.prompt} | {v.best_fixed} {best:.2f}× | {v.vs_plain:.2f}× | "
                     f"{v.vs_best:.2f} | {v.ttft_vs_plain:.2f} | {rounds} |")
    return lines


def _summary(verdicts: list[Verdict]) -> str:
    best = [v.vs_best for v in verdicts]
    return (f"mean {statistics.fmean(best):.3f} of the best fixed setting, worst {min(best):.3f}, worst against "
            f"plain {min(v.vs_plain for v in verdicts):.3f}, {sum(v.short for v in verdicts)} of {len(verdicts)} short "
            f"of the bar, time to first token at most {max(v.ttft_vs_plain for v in verdicts):.2f}× plain's")


def _warm(names) -> tuple[list[str], list[Verdict], list[Verdict]]:
    lines = ["| trace | profile | mean ÷ best | worst ÷ best | worst ÷ plain | replies short of 0.95 of best or 1.0 of plain |",
             "|---|---|---|---|---|---|"]
    built_in, held_out = [], []
    for name, traces, profile in _sets(names):
        vs = judge_warm(traces.traces, profile, traces.draft is not None)
        (held_out if name in HELD_OUT else built_in).extend(vs)
        lines.append(f"| {name} | {profile.name} | {_group_cells(vs, 2)} |")
    return lines, built_in, held_out


def _conversations(names) -> tuple[list[str], list[Verdict]]:
    """Every conversation's turns in order, auto carried from turn to turn (judge_conversation)."""
    lines = ["| trace | profile | turn | best fixed (× plain) | auto × plain | auto ÷ best | auto's rounds |",
             "|---|---|---|---|---|---|---|"]
    verdicts = []
    for name, traces, profile in _sets(names):
        for turns in conversations(traces.traces).values():
            for v in judge_conversation(turns, profile, traces.draft is not None):
                verdicts.append(v)
                rounds = ", ".join(f"{k} {n}" for k, n in sorted(v.auto_rounds.items()))
                best = v.best_fixed_tokens_per_s / v.plain_tokens_per_s
                lines.append(f"| {name} | {v.profile} | {v.prompt} | {v.best_fixed} {best:.2f}× | {v.vs_plain:.2f}× | "
                             f"{v.vs_best:.2f} | {rounds} |")
    return lines, verdicts


def _one_line_table(cases: list[tuple[str, Verdict]]) -> tuple[list[str], list[Verdict]]:
    """The one-line code verdicts by trace set and profile, beside auto's with the target alone (the
    draft's guesses dropped from the traces, as for a user without a draft model); and those."""
    lines = ["| traces | profile | auto × plain: mean (worst) | auto ÷ best fixed: mean (worst) | "
             "target alone, auto × plain: mean (worst) |", "|---|---|---|---|---|"]
    alone_all = []
    for name, traces, profile in _sets(ONE_LINE):
        paired = [v for n, v in cases if n == name and v.profile == profile.name]
        alone = [judge(dataclasses.replace(t, draft_next=[], draft_keep=[], confidence=[]), profile, False)
                 for t in traces.traces]
        alone_all += alone

        def cell(vs, key):
            values = [getattr(v, key) for v in vs]
            return f"{statistics.fmean(values):.2f} ({min(values):.2f})"
        lines.append(f"| {name} | {profile.name} | {cell(paired, 'vs_plain')} | {cell(paired, 'vs_best')} | "
                     f"{cell(alone, 'vs_plain')} |")
    return lines, alone_all


def _rate(trace: Trace, profile, setting: Setting) -> float:
    return statistics.fmean(replay(trace, profile, setting, noise=0.05, seed=k).tokens_per_s for k in range(SEEDS))


def _ngram_table() -> list[str]:
    """Auto against ngram-simple n=12 m=16 and against the best of NGRAM, on each copy-heavy reply
    whole and cut to its first 128 tokens (as the live comparisons run), per profile."""
    ratios: dict[str, list[tuple[float, float]]] = {}
    prompts = dict(COPY_HEAVY)
    for name, traces, profile in _sets(prompts):
        whole = next(t for t in traces.traces if t.name == prompts[name])
        cut = dataclasses.replace(whole, reply=whole.reply[:128], draft_next=whole.draft_next[:128],
                                  draft_keep=whole.draft_keep[:128], confidence=whole.confidence[:128], max_tokens=128)
        for trace in (whole, cut):
            auto = _rate(trace, profile, AUTO)
            ngram = {(n, m): _rate(trace, profile, Setting("ngram-simple", m, n)) for n, m in NGRAM}
            key = "steep, here" if profile.name in ("steep", "here") else profile.name
            ratios.setdefault(key, []).append((auto / ngram[12, 16], auto / max(ngram.values())))
    lines = ["| profiles | cases | auto ÷ ngram-simple n=12 m=16, median (min–max) | auto ÷ the best of its four settings |",
             "|---|---|---|---|"]
    for key, rs in ratios.items():
        a, b = [r[0] for r in rs], [r[1] for r in rs]
        lines.append(f"| {key} | {len(rs)} | {statistics.median(a):.2f} ({min(a):.2f}–{max(a):.2f}) | "
                     f"{statistics.median(b):.2f} ({min(b):.2f}–{max(b):.2f}) |")
    return lines


def _alone_table() -> list[str]:
    """A target loaded alone (the draft's guesses dropped from the demo traces): prompt lookup at the
    fixed γ 4 the window used to fall back to, and auto, each × plain, per prompt and CPU profile."""
    sets = [TraceSet.load(str(TRACES / f"{name}.json")) for name in ("demo", "demo-heldout")]
    lines = ["| profile | " + " | ".join(f"{t.name}: lookup γ=4 / auto" for ts in sets for t in ts.traces) + " |"]
    lines.append("|---" * (lines[0].count("|") - 1) + "|")
    for profile_name in ("steep", "xeon", "avx2", "gpu", "h200", "here"):
        cells = []
        for traces in sets:
            profile = traces.here if profile_name == "here" else BUILTIN[profile_name]
            for t in traces.traces:
                alone = dataclasses.replace(t, draft_next=[], draft_keep=[], confidence=[])
                plain = _rate(alone, profile, PLAIN)
                cells.append(f"{_rate(alone, profile, Setting('lookup', 4)) / plain:.2f} / {_rate(alone, profile, AUTO) / plain:.2f}")
        lines.append(f"| {profile_name} | " + " | ".join(cells) + " |")
    return lines


def _default_table(names=BUILT_IN + HELD_OUT) -> tuple[list[str], str]:
    """The window's old default, the draft model at γ 4, against auto (its default since 2026-12-02),
    each × plain, on every trace of the trace sets `names` with the draft's guesses under every
    profile, and a summary line."""
    lines = []
    wins = cases = 0
    ratios: dict[str, list[float]] = {"model": [], "auto": []}
    for name, traces, profile in _sets(names):
        if traces.draft is None:
            continue
        cells = []
        for t in traces.traces:
            plain = _rate(t, profile, PLAIN)
            model, auto = _rate(t, profile, Setting("model", 4)) / plain, _rate(t, profile, AUTO) / plain
            wins += auto > model
            cases += 1
            ratios["model"].append(model)
            ratios["auto"].append(auto)
            cells.append(f"{t.name} {model:.2f} / {auto:.2f}")
        lines.append(f"| {name} | {profile.name} | " + " | ".join(cells) + " |")
    width = max((line.count("|") - 3 for line in lines), default=0)
    lines[:0] = ["| trace | profile | " + " | ".join(f"reply {k}: model γ=4 / auto" for k in range(1, width + 1)) + " |",
                 "|---|---|" + "---|" * width]
    slower = {k: [r for r in rs if r < 0.99] for k, rs in ratios.items()}     # cases below 0.99 of plain
    return lines, (f"Auto faster in {wins} of {cases} cases; below 0.99 of plain: the draft model at γ 4 in "
                   f"{len(slower['model'])} (down to {min(ratios['model'], default=1):.2f}×), auto in "
                   f"{len(slower['auto'])} ({min(ratios['auto'], default=1):.2f}× at worst).")


def _by_set_table(cases: list[tuple[str, Verdict]]) -> list[str]:
    """Fresh verdicts summed up per trace set and profile: mean and worst against the best fixed
    setting, worst against plain, and how many cases fall short of the bar."""
    groups: dict[tuple[str, str], list[Verdict]] = {}
    for name, v in cases:
        groups.setdefault((name, v.profile), []).append(v)
    lines = ["| trace | profile | mean ÷ best | worst ÷ best | worst ÷ plain | short of 0.95 of best or 1.0 of plain |",
             "|---|---|---|---|---|---|"]
    for (name, profile), vs in groups.items():
        lines.append(f"| {name} | {profile} | {_group_cells(vs, 2)} |")
    return lines


def _group_cells(vs: list[Verdict], digits: int) -> str:
    """A group of verdicts as table cells: mean ÷ best | worst ÷ best (its prompt) | worst ÷ plain (its
    prompt) | how many fall short of the bar."""
    worst = min(vs, key=lambda v: v.vs_best)
    worst_plain = min(vs, key=lambda v: v.vs_plain)
    return (f"{statistics.fmean(v.vs_best for v in vs):.{digits}f} | {worst.vs_best:.{digits}f} ({worst.prompt}) | "
            f"{worst_plain.vs_plain:.{digits}f} ({worst_plain.prompt}) | {sum(v.short for v in vs)} of {len(vs)}")


def shifted(priors: dict, shift: float) -> dict:
    """Every probability of every source's prior (auto_policy.LOOKUP_PRIOR) moved by `shift` on the
    log-odds scale."""
    return {source: tuple(1 / (1 + math.exp(-(math.log(p / (1 - p)) + shift))) for p in prior)
            for source, prior in priors.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prior-shift", type=float, default=0.0)
    args = ap.parse_args()
    if args.prior_shift:
        auto_policy.LOOKUP_PRIOR = shifted(auto_policy.LOOKUP_PRIOR, args.prior_shift)   # read by every AutoPolicy
    built_in = _fresh(BUILT_IN)
    held_out = _fresh(HELD_OUT)
    sampled = _fresh(SAMPLED)
    warm, warm_built_in, warm_held_out = _warm(BUILT_IN + HELD_OUT)
    print("## Fresh, built-in prompts\n")
    print("\n".join(_fresh_table(built_in)))
    print(f"\nBuilt-in, fresh: {_summary([v for _, v in built_in])}.\n")
    print("## Fresh, held-out prompts\n")
    print("\n".join(_fresh_table(held_out)))
    print(f"\nHeld-out, fresh: {_summary([v for _, v in held_out])}.\n")
    print("## Fresh, built-in prompts sampled as the window samples\n")
    print("\n".join(_fresh_table(sampled)))
    print("\nThe same, by trace set and profile:\n")
    print("\n".join(_by_set_table(sampled)))
    print(f"\nSampled, fresh: {_summary([v for _, v in sampled])}.")
    print(f"Sampled, the draft model at γ 4 against auto: {_default_table(SAMPLED)[1]}\n")
    print("## Reply after reply\n")
    print("\n".join(warm))
    print(f"\nBuilt-in, warm: {_summary(warm_built_in)}.")
    print(f"Held-out, warm: {_summary(warm_held_out)}.")
    lines, verdicts = _conversations(CONVERSATIONS)
    print("\n## Conversations, turn after turn (held out)\n")
    print("\n".join(lines))
    print(f"\nConversations: {_summary(verdicts)}.")
    one_line = _fresh(ONE_LINE)
    print("\n## One-line code rewritten, greedy and sampled\n")
    print("\n".join(_fresh_table(one_line)))
    print(f"\nOne-line code, fresh: {_summary([v for _, v in one_line])}.\n")
    lines, alone = _one_line_table(one_line)
    print("\n".join(lines))
    print(f"\nOne-line code, a target alone: {_summary(alone)}.")
    print("\n## Against llama.cpp's ngram-simple, copy-heavy replies\n")
    print("\n".join(_ngram_table()))
    print("\n## A target alone: lookup at γ 4 against auto, × plain\n")
    print("\n".join(_alone_table()))
    lines, summary = _default_table()
    print("\n## The draft model at γ 4 against auto, × plain\n")
    print("\n".join(lines))
    print(f"\n{summary}")


if __name__ == "__main__":
    main()
