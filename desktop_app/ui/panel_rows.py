"""The speculation panel's words: the rows of its grid with their tooltips, the Tokens row's forms, and
the header of a stored reply (ui/spec_panel.py shows them)."""
from __future__ import annotations

import time

from desktop_app.chat.reply_footer import ending
from desktop_app.counts import count
from desktop_app.engine.explain import ALPHA_TIP

STATS = [("speed", "Speed", "This reply's tokens per second (prompt evaluation excluded)"),
         ("vs_plain", "vs plain (measured)", "This reply's speed over plain decoding's on this machine, "
                                             "measured: one single-token target pass per token, timed on this "
                                             "reply's plain steps, or (\"earlier\") last timed before it, at "
                                             "load or in an earlier reply: a machine busier now than then "
                                             "makes this reply look slower. Every pass slows as the "
                                             "context grows, so the tokens of a round that drafted are priced "
                                             "at a pass as slow as the checks around them show it, and plain's "
                                             "rate tends to fall from reply to reply"),
         ("tokens", "Tokens", "Tokens this reply wrote, in how many rounds: a round is one target pass, a plain step "
                              "or a check of drafts (numbered in the strip); \"+ end\": and the reply's end, not text"),
         ("first", "First token", "How long the reply's first token took: reading the prompt (what the conversation "
                                  "had not read before), then the first round. While the reply is written, "
                                  "\"≈\": when the token reached this panel; at its end, the engine's own time"),
         ("accepted", "Drafts kept", "Drafted tokens the target kept: kept / drafted (the acceptance rate)"),
         ("alpha", "Acceptance α", ALPHA_TIP),
         ("per_round", "Kept per drafted round", "Drafts kept of drafts made, per round that drafted (plain steps left out)"),
         ("split", "Draft / target time", "Seconds choosing and making drafts (the draft model's steps, finding "
                                           "copies of earlier text, auto's choice: a reply that drafted nothing "
                                           "spends some too) / in the target's passes (checking drafts, and the "
                                           "plain steps)"),
         ("c", "Draft step cost", "c: one draft step's time relative to one single-token target pass; \"not "
                                  "drafted\": the price auto weighed the draft model at, from its steps timed at "
                                  "load and since, so it moves a little from reply to reply"),
         ("predicted", "Predicted (cost model)", "What the cost model predicts for this reply's rounds as they "
                                                 "ran, from each drafter's α and costs (a plain round: one token "
                                                 "per pass): a prediction, not a measurement")]


def tokens_forms(tokens: str, rounds: int) -> tuple[str, ...]:
    """The Tokens row, "38 + end in 39 rounds", and its narrower form, "38 + end (39 rounds)", whose
    parenthesis StatLabel leaves out before it cuts a number ("38 + end in 3…" in a 300-px panel); the
    rounds as the strip numbers them ("#473" beside "Tokens 559" read as a token's number, a new user's
    try). A llama-server's replies are untimed: no rounds."""
    if not rounds:
        return (tokens,)
    return f"{tokens} in {count(rounds, 'round')}", f"{tokens} ({count(rounds, 'round')})"


def reply_header(title: str, began: time.struct_time, number: int | None, how: str) -> str:
    """The panel's header for a reply that has ended: "Reply of 14:02 in 'Cats' (message 4, finished)",
    alike whether it has just ended or is opened from the history (the message's place is left out only
    where the history cannot say it: "(finished)" became "(message 4, finished)" once the reply was
    opened again, a new user's try)."""
    where = f"message {number}, " if number else ""
    return f"Reply of {time.strftime('%H:%M', began)} in '{title}' ({where}{how})"


def stored_header(title: str, created_at: float, number: int, status: str = "done", stats: dict | None = None) -> str:
    """The header for a reply from the history: how it ended too, as when it had just ended ("(stopped)"
    became "(message 6)" once it was opened again: a new user's try)."""
    if not created_at:
        return f"Reply of ? in '{title}' (message {number}, {ending(status, stats)})"
    return reply_header(title, time.localtime(created_at), number, ending(status, stats))
