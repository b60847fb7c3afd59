"""Print docs/auto-mode.md's replay tables: auto against every fixed setting on the recorded traces
(tests/data/traces), fresh and reply after reply, under every cost profile. No model is loaded; it
takes about 20 seconds.

    python scripts/replay_tables.py > /tmp/tables.md
"""
from __future__ import annotations

import statistics
from pathlib import Path

from desktop_app.engine.cost_profiles import BUILTIN
from desktop_app.engine.replay import Verdict, judge, judge_warm
from desktop_app.engine.trace import TraceSet

TRACES = Path(__file__).resolve().parent.parent / "tests" / "data" / "traces"
BUILT_IN = ("smollm2", "demo")
HELD_OUT = ("demo-heldout",)


def _short(v: Verdict) -> bool:
    """Short of issue #14's bar: 0.95 of the best fixed setting and 1.0 of plain."""
    return v.vs_best < 0.95 or v.vs_plain < 1.0


def _fresh(names) -> list[tuple[str, Verdict]]:
    out = []
    for name in names:
        traces = TraceSet.load(str(TRACES / f"{name}.json"))
        for profile in [*BUILTIN.values(), traces.here]:
            out += [(name, judge(t, profile, traces.draft is not None)) for t in traces.traces]
    return out


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
            f"plain {min(v.vs_plain for v in verdicts):.3f}, {sum(map(_short, verdicts))} of {len(verdicts)} short "
            f"of the bar, time to first token at most {max(v.ttft_vs_plain for v in verdicts):.2f}× plain's")


def _warm(names) -> tuple[list[str], list[Verdict], list[Verdict]]:
    lines = ["| trace | profile | mean ÷ best | worst ÷ best | worst ÷ plain | replies short of 0.95 of best or 1.0 of plain |",
             "|---|---|---|---|---|---|"]
    built_in, held_out = [], []
    for name in names:
        traces = TraceSet.load(str(TRACES / f"{name}.json"))
        for profile in [*BUILTIN.values(), traces.here]:
            vs = judge_warm(traces.traces, profile, traces.draft is not None)
            (held_out if name in HELD_OUT else built_in).extend(vs)
            worst = min(vs, key=lambda v: v.vs_best)
            worst_plain = min(vs, key=lambda v: v.vs_plain)
            lines.append(f"| {name} | {profile.name} | {statistics.fmean(v.vs_best for v in vs):.2f} | "
                         f"{worst.vs_best:.2f} ({worst.prompt}) | {worst_plain.vs_plain:.2f} ({worst_plain.prompt}) | "
                         f"{sum(map(_short, vs))} of {len(vs)} |")
    return lines, built_in, held_out


def main() -> None:
    built_in = _fresh(BUILT_IN)
    held_out = _fresh(HELD_OUT)
    warm, warm_built_in, warm_held_out = _warm(BUILT_IN + HELD_OUT)
    print("## Fresh, built-in prompts\n")
    print("\n".join(_fresh_table(built_in)))
    print(f"\nBuilt-in, fresh: {_summary([v for _, v in built_in])}.\n")
    print("## Fresh, held-out prompts\n")
    print("\n".join(_fresh_table(held_out)))
    print(f"\nHeld-out, fresh: {_summary([v for _, v in held_out])}.\n")
    print("## Reply after reply\n")
    print("\n".join(warm))
    print(f"\nBuilt-in, warm: {_summary(warm_built_in)}.")
    print(f"Held-out, warm: {_summary(warm_held_out)}.")


if __name__ == "__main__":
    main()
