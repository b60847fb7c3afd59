"""What auto's choosing costs itself, per round, on this machine's CPU: the recorded traces of the
built-in prompts (tests/data/traces) replayed with auto and with plain decoding, timed, and the
difference per round (the policy's choice and what it learns after the round, the copy search, the
costs' bookkeeping: what the decoder runs each round beside its passes, and plain decoding does not),
then that as a share of each cost profile's single-token pass. Replay itself does not charge it. No
model is loaded; it takes a few seconds.

    python scripts/auto_overhead.py
"""
from __future__ import annotations

import time
from pathlib import Path

from desktop_app.engine.cost_profiles import BUILTIN
from desktop_app.engine.replay import AUTO, PLAIN, replay
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
    for name in ("smollm2", "demo"):
        traces = TraceSet.load(str(TRACES / f"{name}.json"))
        for trace in traces.traces:
            ms = per_round_ms(trace, traces.here, AUTO) - per_round_ms(trace, traces.here, PLAIN)
            worst = max(worst, ms)
            print(f"| {name} | {trace.name} | {ms:.3f} |")
    print(f"\nAt the most, {worst:.3f} ms a round, against a single-token pass of each profile:\n")
    print("| profile | single pass (ms) | auto's own time, share of it |\n|---|---|---|")
    for profile in BUILTIN.values():
        single = profile.verify_s(1) * 1000
        print(f"| {profile.name} | {single:.2f} | {worst / single:.1%} |")


if __name__ == "__main__":
    main()
