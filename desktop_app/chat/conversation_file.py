"""A conversation as Tandem exports it (HistoryStore.export_json, format "tandem-conversation"), and
the check a file passes before HistoryStore.import_json takes it: anything of the wrong shape is a
ValueError that says what, never a half conversation or one the window cannot open (a review's find:
a round that was not a dict imported, and then every opening of the conversation failed).

What cannot be wrong in a reply read back is made right rather than refused: a status other than a
finished reply's (one exported while it was written, say "streaming") is "interrupted", rounds not of
a stored round's shape and statistics not of theirs are left out (the reply shows no rounds, no
statistics), a time that is not a number is now. A file of a newer format version is refused.
"""
from __future__ import annotations

import json
import time

from desktop_app.engine.events import GenerationStats, RoundEvent, int_list

FORMAT = "tandem-conversation"
VERSION = 1                     # the format's, as export_json writes it
NOT_AN_EXPORT = "not a Tandem conversation export"
ENDED = ("done", "interrupted", "cancelled", "error")     # a reply's statuses once it is no longer written


class NewerExport(ValueError):
    """A Tandem export, of a format version newer than this Tandem reads (its import said "it is not a
    conversation exported by Tandem" of one that is: a new user's try)."""


def checked(doc) -> dict:
    """`doc` with every field of the type the history stores, or ValueError naming what is wrong."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(NOT_AN_EXPORT)
    version = doc.get("version", VERSION)
    if not isinstance(version, int) or isinstance(version, bool):
        raise ValueError(f"its format version is {version!r}, not a number")
    if version > VERSION:
        raise NewerExport(f"it was written by a newer Tandem (format version {version}; this one reads {VERSION}): "
                          "a newer Tandem can import it")
    messages = doc.get("messages")
    if not isinstance(messages, list):
        raise ValueError("it has no list of messages")
    first = doc.get("first_turn", 0)     # (where the model's reading starts; none, or out of range: all)
    first = first if isinstance(first, int) and not isinstance(first, bool) and 0 <= first < len(messages) else 0
    return {"format": FORMAT, "title": _text(doc.get("title"), "title") or "Imported conversation",
            "system_prompt": _text(doc.get("system_prompt"), "system prompt"),
            "created_at": _time(doc.get("created_at")), "updated_at": _time(doc.get("updated_at")),
            "first_turn": first, "messages": [_message(m, i) for i, m in enumerate(messages, 1)]}


def _message(m, n: int, earlier: bool = False) -> dict:
    if not isinstance(m, dict):
        raise ValueError(f"message {n} is not an object")
    role = m.get("role")
    if role not in ("user", "assistant") or (earlier and role != "assistant"):
        raise ValueError(f"message {n} has the role {role!r}")
    content = m.get("content")
    if not isinstance(content, str):
        raise ValueError(f"message {n} has no text")
    tokens, rounds = m.get("token_ids"), m.get("rounds")
    out = {"role": role, "content": content,
           "status": m.get("status") if role == "assistant" and m.get("status") in ENDED
           else "interrupted" if role == "assistant" else "done",
           "token_ids": tokens if int_list(tokens) else None,
           "settings": m.get("settings") if isinstance(m.get("settings"), dict) else None,
           "stats": m.get("stats") if _stats_ok(m.get("stats")) else None,
           "rounds": rounds if isinstance(rounds, list) and all(map(RoundEvent.record_ok, rounds)) else None,
           "created_at": _time(m.get("created_at"))}
    versions = m.get("earlier_versions", [])
    if role == "assistant" and not earlier and versions:
        if not isinstance(versions, list):
            raise ValueError(f"message {n}'s earlier versions are not a list")
        out["earlier_versions"] = [_message(v, n, earlier=True) for v in versions]
    return out


def _text(value, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"its {what} is not text")
    return value


def _stats_ok(stats) -> bool:
    """Whether every field of GenerationStats that `stats` has is of its type (from_json drops the others,
    and a reply then read "nothing was written" under its text: a new user's try). Compared as a file
    holds them: JSON writes the batch sizes of verify_s_by_batch as strings, and compared as numbers
    they dropped the statistics of every reply checked at more than one size (another new user's try)."""
    s = GenerationStats.from_json(stats) if isinstance(stats, dict) else None
    if s is None:
        return False
    as_filed = json.loads(json.dumps(s.to_json()))
    return all(as_filed.get(key, value) == value for key, value in stats.items())


def _time(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else time.time()
