"""The line under each assistant reply that says how it was made, from what the history stores with it
(the message's `stats`, GenerationStats.to_json(), and `settings`, written by ChatSession._stream):

    draft model · γ 4 · 46/76 drafted kept · 13.3 tok/s · 1.21× plain (measured)

No Qt here: the chat view shows the text, tests check it.
"""
from __future__ import annotations

from desktop_app.engine.events import GenerationStats, PromptEvent
from desktop_app.counts import count
from desktop_app.engine.explain import threads_text
from desktop_app.engine.number_text import rate_text, rates_finer

DRAFTER_LABELS = {"model": "draft model", "lookup": "prompt lookup", "server": "llama-server",
                  "none": "plain decoding"}
STATUS_NOTES = {"streaming": "writing…", "interrupted": "incomplete: interrupted while writing",
                "cancelled": "stopped", "error": "failed"}
CUT_OFF = {"max_tokens": "cut off: the reply reached Max tokens (Settings)",
           "context_full": "cut off: the conversation filled the context"}
SERVER_CUT_OFF = "cut off: the server stopped it at a length limit (Max tokens, or its context)"
CUT_OFF_SHORT = {"max_tokens": "cut off at Max tokens", "context_full": "cut off: context full"}   # (in the
# footer too: the note beside the name is out of sight under a long reply, which seemed to end mid-word)
SHORT_NOTES = {**{CUT_OFF[k]: v for k, v in CUT_OFF_SHORT.items()},   # a note's shorter form, for a narrow chat
               SERVER_CUT_OFF: "cut off at a length limit"}           # (at 1000 px "…Max tokens (Setti…")
NO_STATS = {"cancelled": "stopped before the end: no statistics were recorded",
            "interrupted": "interrupted: the model engine stopped before this reply's statistics were recorded",
            "error": "failed: no statistics were recorded"}


def drafter_label(settings: dict | None) -> str | None:
    """"draft model", "prompt lookup", "auto", "auto, lookup only" (no draft model to weigh) or "plain
    decoding" from the stored settings (None when they do not say). Auto mode picks γ each round, and
    with a draft model also the drafter."""
    spec = settings.get("spec") if isinstance(settings, dict) else None
    if not isinstance(spec, dict):
        return None
    if not spec.get("enabled", True) or spec.get("drafter") == "none":
        return DRAFTER_LABELS["none"]
    if spec.get("auto"):
        return "auto, lookup only" if spec.get("drafter") == "lookup" else "auto"
    return DRAFTER_LABELS.get(spec.get("drafter", "model"), str(spec.get("drafter")))


def ran_label(settings: dict | None) -> str | None:
    """drafter_label of the settings a reply started with, and of those it ended with where the user
    changed them while it ran ("draft model, then auto"; "draft model, γ 4, then 8"): ChatSession keeps
    those as "spec_end"."""
    label = drafter_label(settings)
    end = settings.get("spec_end") if isinstance(settings, dict) else None
    if label is None or not isinstance(end, dict):
        return label
    last = drafter_label({"spec": end})
    if last != label:
        return f"{label}, then {last}"
    first = settings["spec"].get("draft_max")
    if not end.get("auto") and end.get("draft_max") != first:
        return f"{label}, γ {first}, then {end.get('draft_max')}"
    return label


def reading_note(read: PromptEvent | None) -> str:
    """A streaming reply's note before its first token; `read`: how far a long prompt has been read."""
    if read is not None and read.model == "draft":
        return "the draft model is reading the prompt…"
    return "reading the prompt…" + (f" {read.done:,} of {read.total:,} tokens" if read else "")


def reply_note(status: str, stats: dict | GenerationStats | None) -> str:
    """The word beside a reply's name: how it ended where that was not its own choice ("stopped", "cut
    off: …"), or "" for a reply that ended by itself."""
    if status != "done":
        return STATUS_NOTES.get(status, "")
    s = GenerationStats.from_json(stats)
    if s is None or s.stop_reason not in CUT_OFF:
        return ""
    return SERVER_CUT_OFF if s.remote else CUT_OFF[s.stop_reason]     # (a server says "length" for both)


def ending(status: str, stats: dict | GenerationStats | None) -> str:
    """How a reply stored with `status` ended, in a word, for the panel's header: "finished", "stopped",
    "cut off", "interrupted" (the engine or a server gave out) or "failed", as the chat says."""
    if status != "done":
        return {"cancelled": "stopped", "streaming": "being written", "error": "failed"}.get(status, "interrupted")
    s = GenerationStats.from_json(stats)
    return "cut off" if s is not None and s.stop_reason in CUT_OFF else "finished"


def footer_text(stats: dict | GenerationStats | None, settings: dict | None, status: str = "done") -> str:
    """The footer of one reply ("" while it is still being written)."""
    return footer_forms(stats, settings, status)[0]


def footer_forms(stats: dict | GenerationStats | None, settings: dict | None, status: str = "done") -> list[str]:
    """The footer of one reply, then shorter forms of it for a narrow chat, longest first, dropping
    what matters least first (the rounds that drafted, "(measured)", then γ, the kept count, the
    drafter; in auto, γ goes with the rounds it is the mean over), so that the speed and the × plain
    figure are the last to go (a new user's try: "1.01× plain (measur…" at the default window size)."""
    s = GenerationStats.from_json(stats)
    if s is None:
        return ["" if status in ("done", "streaming") else NO_STATS.get(status, f"{status}: no statistics were recorded")]
    label = ran_label(settings)
    spec = (settings or {}).get("spec") if isinstance(settings, dict) else None
    spec = spec if isinstance(spec, dict) else {}
    changed = isinstance(settings, dict) and isinstance(settings.get("spec_end"), dict)   # (while it ran)
    if s.remote:                                        # its settings are the server's, not Tandem's
        label = s.remote
    elif label is None:                                 # settings missing: say what the numbers show
        label = "speculative decoding" if s.n_drafted else DRAFTER_LABELS["none"]
    if not s.n_tokens:                                  # stopped before its first token, or that token ended it
        return [f"{label} · nothing was written"]
    speed = rate_text(s.tokens_per_s, rates_finer(s))   # (as the panel shows it: 14.98 there was 15.0 here)
    fewer = speed                                       # (other work busy, threads.py: a slowed reply looked
    if 0 < s.threads < s.threads_most:                  # like any other in the chat, a new user's try)
        fewer += f" on {threads_text(s)}"
    if (label == DRAFTER_LABELS["none"] or s.remote) and not s.n_drafted:
        return list(dict.fromkeys([f"{label} · {fewer}", f"{label} · {speed}", speed]))
    mean = f"{s.mean_drafted:.1f}" if s.mean_drafted is not None else "–"
    gamma, gamma_short = "", ""
    if not s.n_drafted:                                 # every round a plain step: no γ, nothing kept
        if s.n_rounds:
            gamma = gamma_short = f"drafted in none of {count(s.n_rounds, 'round')}"
    elif spec.get("auto") or changed:                     # its mean over the rounds that drafted, and how many
        drafted_in = f"drafted in {s.n_rounds - s.n_plain_rounds} of {s.n_rounds} rounds, " if s.n_rounds else ""
        gamma, gamma_short = f"{drafted_in}γ ≈ {mean}", ""      # (not γ alone: without the rounds it read
                                                                  # as γ 7.8 in every round, a user's try)
    elif isinstance(spec.get("draft_max"), int):
        gamma = gamma_short = f"γ {spec['draft_max']}"
    elif s.mean_drafted is not None:
        gamma = gamma_short = f"γ ≈ {mean}"
    kept = f"{s.n_accepted}/{s.n_drafted} drafted kept" if s.n_drafted else ""
    measured = s.measured_speedup
    times = f"{measured:.2f}× plain" if measured is not None else ""
    measured_times = times + " (measured)" if times else ""
    forms = [(label, gamma, kept, fewer, measured_times),
             (label, gamma_short, kept, fewer, measured_times),     # (auto's rounds went with "(measured)")
             (label, gamma_short, kept, fewer, times),
             (label, kept, speed, times),
             (label, speed, times),
             (speed, times)]
    cut = (STATUS_NOTES["cancelled"] if status == "cancelled"          # (at its end, in sight under a long reply:
           else "" if s.remote or status != "done" else CUT_OFF_SHORT.get(s.stop_reason, ""))   # a new user's try)
    out: list[str] = []
    for parts in forms:
        text = " · ".join(p for p in (*parts, cut) if p)
        if text not in out:
            out.append(text)
    return out


def version_line(number: int, stats: dict | GenerationStats | None, settings: dict | None, status: str = "done") -> str:
    """One version of a reply, for the list beside "‹ n/m ›": "2. draft model · 58.6 tok/s", with how
    it ended where that was not its own choice ("· stopped")."""
    s = GenerationStats.from_json(stats)
    label = (s.remote if s is not None and s.remote else ran_label(settings)) or "a reply"
    speed = rate_text(s.tokens_per_s, rates_finer(s)) if s is not None and s.n_tokens else "no statistics"   # (as
                                                                                    # the footer and panel show it)
    note = reply_note(status, stats)
    return " · ".join(part for part in (f"{number}. {label}", speed, note.split(":")[0]) if part)


def made_with(settings: dict | None) -> str:
    """What wrote a reply, for the footer's tooltip: the models (or the server) and the sampling, from
    its stored settings; "" where they say nothing. Replies written by two pairs looked alike, and the
    settings the history keeps with each were shown nowhere (a new user's try)."""
    if not isinstance(settings, dict):
        return ""
    lines = []
    if settings.get("server"):
        lines.append(f"Server: {settings['server']}" + (f" ({settings['target']})" if settings.get("target") else ""))
    elif settings.get("target"):
        lines.append(f"Target: {settings['target']}")
        lines.append(f"Draft: {settings.get('draft') or 'none'}")
    sampling = settings.get("sampling")
    if isinstance(sampling, dict) and isinstance(sampling.get("temperature"), (int, float)):
        if sampling["temperature"] <= 0:
            lines.append("Sampling: greedy (temperature 0)")
        else:
            seed = sampling.get("seed")
            lines.append(f"Sampling: temperature {sampling['temperature']:g}, top-k {sampling.get('top_k')}, "
                         f"top-p {sampling.get('top_p')}, min-p {sampling.get('min_p')}, "
                         + (f"seed {seed}" if seed is not None else "random seed"))
    if isinstance(settings.get("max_tokens"), int):
        lines.append(f"Max tokens: {settings['max_tokens']}")
    parts = settings.get("parts")
    if isinstance(parts, int) and parts > 1 and lines:    # (ChatSession.continue_reply's)
        lines.append(f"Written in {parts} runs (Continue): the settings above are the last run's")
    return "\n".join(lines)
