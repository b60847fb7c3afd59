"""Numbers as every view writes them (the panel, the reply's footer, the charts, Compare, the CLI): rates,
shares, α and durations, so that the same figure reads the same wherever it is shown."""
from __future__ import annotations

from desktop_app.engine.events import GenerationStats


def rate_number(rate: float, finer: bool = False) -> str:
    """A rate's number as every speed on screen shows it (the panel, the reply's footer, the charts):
    three significant digits from 1 up (12.6, 8.83: enough that the ratios shown beside them can be
    checked from them), whole numbers from 100, two decimals below 1 (0.94), two significant digits
    below 0.1, never 0 for a rate above 0. `finer`: a digit more (rates_finer)."""
    if rate <= 0:
        return "0"
    shown = float(f"{rate:.3g}")             # (9.996 is 10.0, 99.96 is 100: rounded before the format is chosen)
    more = int(finer)
    if shown < 0.0995:
        return f"{rate:.{2 + more}g}"
    if shown >= 100:
        return f"{rate:.{more}f}"
    if shown >= 10:
        return f"{rate:.{1 + more}f}"
    return f"{rate:.{2 + more}f}"


def rates_finer(stats: GenerationStats) -> bool:
    """Whether a reply's speed and plain decoding's rate take a digit more where they stand beside its
    "× plain": at the usual digits their quotient would read otherwise than that ratio does ("Speed
    115 tok/s" beside "0.99× (plain 115 tok/s)", a plain reply in auto mode)."""
    m, plain = stats.measured_speedup, stats.plain_tokens_per_s
    if m is None or not plain or not stats.tokens_per_s:
        return False
    return f"{float(rate_number(stats.tokens_per_s)) / float(rate_number(plain)):.2f}" != f"{m:.2f}"


def share_text(share: float) -> str:
    """A share as a per cent, "37 %": never "100 %" short of all nor "0 %" above none ("220/221 (100 %)"
    and "α 1.00" beside a rejected draft: a new user's try), one decimal there ("99.5 %"), or more."""
    shown = f"{100 * share:.0f}"
    if (shown == "100" and share < 1) or (shown == "0" and share > 0):
        shown = f"{100 * share:.1f}"
        if shown in ("100.0", "0.0"):
            return ">99.9 %" if share > 0.5 else "<0.1 %"
    return f"{shown} %"


def alpha_text(alpha: float) -> str:
    """α to two decimals, "0.93"; to three where two would read 1.00 below 1 (0.995), and ">0.999" past."""
    if alpha < 1 and f"{alpha:.2f}" == "1.00":
        return f"{alpha:.3f}" if f"{alpha:.3f}" != "1.000" else ">0.999"
    return f"{alpha:.2f}"


def rate_text(rate: float | None, finer: bool = False) -> str:
    """A rate in tokens per second ("12.6 tok/s"), or "–". `finer`: as rate_number's."""
    return "–" if rate is None else f"{rate_number(rate, finer)} tok/s"


def duration_text(seconds: float) -> str:
    """A time as the window and the CLI write it: "1.42 s" from a second, "177 ms" below it, "4.2 ms"
    below 10 ms (the panel said "1.42 s" where Compare and the CLI said "1420 ms" for the same reply)."""
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{1000 * seconds:.0f} ms" if seconds >= 0.01 else f"{1000 * seconds:.1f} ms"
