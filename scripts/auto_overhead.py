"""What auto's choosing costs itself, per round, on this machine's CPU: the recorded traces of the
built-in prompts (tests/data/traces) replayed with auto and with plain decoding, timed, and the
difference per round (the policy's choice and what it learns after the round, the copy search, the
costs' bookkeeping: what the decoder runs each round beside its passes, and plain decoding does not),
then that as a share of each cost profile's single-token pass. Replay itself does not charge it; the
last table charges it (each trace's own time a round, as timed here) and says how many built-in cases
then fall short of issue #14's bar, profile by profile. No model is loaded; it takes about ten
seconds.

    python scripts/auto_overhead.py
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from desktop_app.engine.cost_profiles import BUILTIN
from desktop_app.engine.replay import AUTO, PLAIN, judge, replay
from desktop_app.engine.trace import TraceSet

TRACES = Path(__file__).resolve().parent.parent / "tests" / "data" / "traces"
REPEAT = 5          # the fastest of this many replays counts (a shared machine is not a metronome)


def per_round_ms(trace, profile, setting) -> float:
    best = float("inf")
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        result = replay(trace, profile, setting, noise=0.05, seed=0)
        best = min(best, (time.perf_counter() - t0) / sum(result.rounds.values()))
    return best * 1000


def main() -> None:
    print("| trace | prompt | auto's own time a round (ms) |\n|---|---|---|")
    worst = 0.0
    own: dict[tuple[str, str], float] = {}
    sets = {name: TraceSet.load(str(TRACES / f"{name}.json")) for name in ("smollm2", "demo")}
    for name, traces in sets.items():
        for trace in traces.traces:
            ms = per_round_ms(trace, traces.here, AUTO) - per_round_ms(trace, traces.here, PLAIN)
            own[name, trace.name] = ms
            worst = max(worst, ms)
            print(f"| {name} | {trace.name} | {ms:.3f} |")
    print(f"\nAt the most, {worst:.3f} ms a round, against a single-token pass of each profile:\n")
    print("| profile | single pass (ms) | auto's own time, share of it |\n|---|---|---|")
    for profile in BUILTIN.values():
        single = profile.verify_s(1) * 1000
        print(f"| {profile.name} | {single:.2f} | {worst / single:.1%} |")
    print("\nBuilt-in cases short of 0.95 of the best fixed setting or 1.0 of plain, as replayed and with "
          "auto's own time charged:\n")
    print("| profile | short | charged: short | charged: worst × plain |\n|---|---|---|---|")
    for profile in BUILTIN.values():
        short = charged_short = 0
        worst_plain = float("inf")
        for name, traces in sets.items():
            for trace in traces.traces:
                v = judge(trace, profile, traces.draft is not None)        # (3 seeds, as every table)
                rates = []
                for seed in range(3):
                    r = replay(trace, profile, AUTO, noise=0.05, seed=seed)
                    rates.append(r.n_tokens / (r.decode_s + sum(r.rounds.values()) * own[name, trace.name] / 1000))
                charged = dataclasses.replace(v, auto_tokens_per_s=sum(rates) / len(rates))
                short += v.short
                charged_short += charged.short
                worst_plain = min(worst_plain, charged.vs_plain)
        print(f"| {profile.name} | {short} of 8 | {charged_short} of 8 | {worst_plain:.3f} |")


if __name__ == "__main__":
    main()
