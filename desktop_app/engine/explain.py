"""Why speculation paid or not, in a sentence or two a user can act on, from a reply's statistics."""
from __future__ import annotations

from desktop_app.engine.costs import speedup
from desktop_app.engine.events import GenerationStats


def explain(stats: GenerationStats) -> str:
    if not stats.n_drafted:
        if stats.t_target_step_s:
            return (f"Plain decoding: one target pass per token, {1000 * stats.t_target_step_s:.0f} ms each "
                    f"(≈{1 / stats.t_target_step_s:.0f} tok/s).")
        return "Plain decoding: nothing was drafted."
    alpha = stats.alpha if stats.alpha is not None else 0.0
    rounds = stats.n_drafted / stats.mean_drafted if stats.mean_drafted else 0
    # Only the rounds that drafted: auto mode mixes them with plain steps.
    per_round_ms = 1000 * (stats.t_draft_s + stats.t_verify_s - stats.t_plain_s) / rounds if rounds else 0.0
    parts = [f"{100 * (stats.acceptance_rate or 0):.0f} % of drafted tokens were kept (α ≈ {alpha:.2f}); "
             f"a round drafted {stats.mean_drafted:.1f} and kept {stats.mean_accepted:.1f}, "
             f"giving {stats.mean_accepted + 1:.1f} tokens in {per_round_ms:.0f} ms."]
    if stats.n_plain_rounds:
        parts.append(f"{round(rounds)} of {stats.n_rounds} rounds drafted; the others were plain steps.")
    if stats.t_target_step_s:
        plain_rate = 1 / stats.t_target_step_s
        measured_rate = (stats.mean_accepted + 1) / (per_round_ms / 1000) if per_round_ms else 0.0
        ratio = speedup(measured_rate, stats.t_target_step_s)
        if ratio >= 1.05:
            parts.append(f"That beats plain decoding ({plain_rate:.0f} tok/s) by {ratio:.2f}×.")
        else:
            why = []
            if stats.c is not None and stats.c > 0.3:
                why.append(f"a draft step costs {stats.c:.2f} of a target pass")
            if stats.t_verify_s and rounds:
                verify_ms = 1000 * stats.t_verify_s / rounds
                why.append(f"checking {stats.mean_drafted + 1:.0f} tokens takes {verify_ms:.0f} ms, "
                           f"{verify_ms / (1000 * stats.t_target_step_s):.1f}× a single-token pass")
            if alpha < 0.6:
                why.append("the draft is often wrong")
            parts.append(f"Plain decoding would give ≈{plain_rate:.0f} tok/s ({ratio:.2f}× of that here): "
                         + ("; ".join(why) or "the rounds cost more than they save") + ".")
    return " ".join(parts)
