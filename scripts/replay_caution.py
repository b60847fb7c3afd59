"""Print docs/auto-mode.md's caution table: how issue #14's two replay bars (0.95 of the best fixed
setting, 1.0 of plain) trade against each other as auto is made more or less cautious about copies.
Caution is swept two ways: every prompt-lookup prior moved by `shift` on the log-odds scale
(negative: copies are expected to fail more often), and the margin by which an option must be
predicted to beat the best other (costs.WIN_MARGIN). Every built-in case, fresh, as
scripts/replay_tables.py judges it (3 noise seeds, σ = 0.05). No model is loaded; about 10 minutes.

    python scripts/replay_caution.py [--shifts -3,-2,-1,-0.5,0,0.5,1] [--margins 1.02,1.1,1.2]
"""
from __future__ import annotations

import argparse
import statistics

from replay_tables import TRACES, shifted

from desktop_app.engine import auto_policy
from desktop_app.engine.cost_profiles import BUILTIN
from desktop_app.engine.replay import AUTO, _fixed_rates, _mean, _verdict, replay
from desktop_app.engine.trace import TraceSet

SEEDS = 3
NOISE = 0.05


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shifts", default="-3,-2,-1,-0.5,0,0.5,1")
    ap.add_argument("--margins", default="1.02,1.1,1.2")
    args = ap.parse_args()
    cases = []
    for name in ("smollm2", "demo"):
        traces = TraceSet.load(str(TRACES / f"{name}.json"))
        for profile in [*BUILTIN.values(), traces.here]:
            for trace in traces.traces:
                has_draft = traces.draft is not None
                cases.append((trace, profile, _fixed_rates(trace, profile, has_draft, NOISE, SEEDS)))
    prior, margin_now = auto_policy.LOOKUP_PRIOR, auto_policy.WIN_MARGIN
    print("| prior shift (log-odds) | win margin | short of 0.95 of best | short of 1.0 of plain | short of either "
          "| mean ÷ best | worst ÷ best | worst ÷ plain |")
    print("|---|---|---|---|---|---|---|---|")
    try:
        for shift in map(float, args.shifts.split(",")):
            for margin in map(float, args.margins.split(",")):
                auto_policy.LOOKUP_PRIOR = shifted(prior, shift)      # read by every new AutoPolicy
                auto_policy.WIN_MARGIN = margin                        # read by AutoPolicy.choose
                vs = [_verdict(trace, profile, fixed,
                               _mean([replay(trace, profile, AUTO, noise=NOISE, seed=k) for k in range(SEEDS)]))
                      for trace, profile, fixed in cases]
                print(f"| {shift:+.1f} | {margin:.2f} | {sum(v.vs_best < 0.95 for v in vs)} | "
                      f"{sum(v.vs_plain < 1.0 for v in vs)} | {sum(v.short for v in vs)} "
                      f"of {len(vs)} | {statistics.fmean(v.vs_best for v in vs):.3f} | "
                      f"{min(v.vs_best for v in vs):.3f} | {min(v.vs_plain for v in vs):.3f} |", flush=True)
    finally:
        auto_policy.LOOKUP_PRIOR, auto_policy.WIN_MARGIN = prior, margin_now


if __name__ == "__main__":
    main()
