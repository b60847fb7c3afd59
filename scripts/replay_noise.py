"""Print docs/auto-mode.md's calibration-noise tables: auto on the demo edit trace (12 noise seeds,
mean × plain, worst seed in brackets) at per-pass noise σ, under the avx2 and steep profiles, beside
ngram-simple's best setting; and at the first, second and third load on a machine
(calibration_store's remembered timings); then, over every recorded trace under every built-in
profile at σ = 0.2, auto at the first and the third load against the best fixed setting. No model
is loaded; it takes about a minute.

    python scripts/replay_noise.py
"""
from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np

from desktop_app.engine.cost_profiles import AVX2, BUILTIN, STEEP
from desktop_app.engine.replay import AUTO, PLAIN, Setting, fixed_settings, replay
from desktop_app.engine.trace import TraceSet

TRACES = Path(__file__).resolve().parent.parent / "tests" / "data" / "traces"
SEEDS = 12
NGRAM = ((3, 4), (4, 16), (12, 16), (12, 32))


def _cell(trace, profile, noise: float, setting: Setting, loads: int = 1, worst: bool = True) -> str:
    plain = statistics.fmean(replay(trace, profile, PLAIN, noise=noise, seed=k).tokens_per_s for k in range(SEEDS))
    xs = [replay(trace, profile, setting, noise=noise, seed=k, loads=loads).tokens_per_s / plain for k in range(SEEDS)]
    return f"{statistics.fmean(xs):.3f}" + (f" ({min(xs):.3f})" if worst and noise else "")


def main() -> None:
    trace = next(t for t in TraceSet.load(str(TRACES / "demo.json")).traces if t.name == "edit")
    best = {p.name: max((Setting("ngram-simple", m, n) for n, m in NGRAM),
                        key=lambda s: statistics.fmean(replay(trace, p, s, noise=0.05, seed=k).tokens_per_s
                                                       for k in range(SEEDS)))
            for p in (AVX2, STEEP)}
    print(f"| per-pass noise (σ of its log) | avx2: auto | avx2: {best['avx2'].name} | steep: auto | "
          f"steep: {best['steep'].name} |")
    print("|---|---|---|---|---|")
    for noise in (0.0, 0.05, 0.2, 0.35):
        cells = [c for p in (AVX2, STEEP) for c in (_cell(trace, p, noise, AUTO), _cell(trace, p, noise, best[p.name], worst=False))]
        print(f"| {noise:g} | " + " | ".join(cells) + " |")
    print("\n| profile, noise | first load | second | third and later |\n|---|---|---|---|")
    for p in (AVX2, STEEP):
        for noise in (0.05, 0.2):
            print(f"| {p.name}, σ = {noise:g} | " + " | ".join(_cell(trace, p, noise, AUTO, loads) for loads in (1, 2, 3)) + " |")
    _every_trace(noise=0.2, seeds=8)


def _every_trace(noise: float, seeds: int) -> None:
    """Auto (seeds 100...) against the best fixed setting and plain (seeds 0...), each the mean over `seeds`."""
    def mean(trace, profile, setting, base=0, loads=1):
        return statistics.fmean(replay(trace, profile, setting, noise=noise, seed=base + k, loads=loads).tokens_per_s
                                for k in range(seeds))

    cases = []
    for name in ("smollm2", "demo", "demo-heldout"):
        traces = TraceSet.load(str(TRACES / f"{name}.json"))
        for profile in BUILTIN.values():
            for t in traces.traces:
                fixed = {s.name: mean(t, profile, s) for s in fixed_settings(traces.draft is not None and t.has_draft)}
                cases.append((t, profile, max(fixed.values()), fixed[PLAIN.name]))
    print(f"\nEvery trace under every built-in profile, σ = {noise:g}, {seeds} seeds:")
    for loads in (1, 3):
        auto = [mean(t, profile, AUTO, 100, loads) for t, profile, _, _ in cases]
        vs_best = [a / best for a, (_, _, best, _) in zip(auto, cases)]
        vs_plain = [a / plain for a, (_, _, _, plain) in zip(auto, cases)]
        short = sum(b < 0.95 or p < 1.0 for b, p in zip(vs_best, vs_plain))
        print(f"load {loads}: auto ÷ best fixed, geometric mean {np.exp(np.mean(np.log(vs_best))):.3f}, worst against "
              f"plain {min(vs_plain):.3f}, {short} of {len(cases)} short of the bar")


if __name__ == "__main__":
    main()
