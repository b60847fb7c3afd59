"""The chat's rules: what a conversation allows next, and what a finished reply is called. The session
enforces them and the window offers only what they allow, from this one place."""
from __future__ import annotations

from typing import Protocol, Sequence

from desktop_app.engine.events import GenerationStats, StopReason


LEFT_OUT_NOTE = ("The turns above are left out of what the model reads, to make room in its context; "
                 "they stay in the history.")     # (under them, in the window and in a Markdown export)


class _Message(Protocol):
    role: str
    content: str


def reply_status(stop_reason: StopReason | str, broke_off: bool = False) -> str:
    """How a reply that ended for `stop_reason` is stored and shown: "cancelled" when the user stopped
    it, "interrupted" where it broke off (FinishEvent.broke_off: a llama-server's connection broke), else
    "done" (a reply cut short by the engine's death is "interrupted" too, by an error "error")."""
    if broke_off:
        return "interrupted"
    return "cancelled" if stop_reason == StopReason.CANCELLED else "done"


def can_regenerate(messages: Sequence[_Message]) -> bool:
    """A reply can be regenerated when the conversation ends with one."""
    return bool(messages) and messages[-1].role == "assistant"


CONTINUABLE = ("cancelled", "interrupted", "error")   # stored statuses of a reply that ended before its end
CUT_AT_LIMIT = (StopReason.MAX_TOKENS.value, StopReason.CONTEXT_FULL.value)   # ... and the stop reasons of a
                                                                             # "done" one that did


def can_continue(messages: Sequence[_Message]) -> bool:
    """The last reply can be continued (written on from where it ended): continuable(), of the last
    stored message."""
    if not messages:
        return False
    last = messages[-1]
    return continuable(last.role, last.content, getattr(last, "status", "done"), getattr(last, "stats", None),
                       getattr(last, "settings", None))


def continuable(role: str, text: str, status: str, stats, settings: dict | None = None) -> bool:
    """Whether a reply (`stats`: its GenerationStats, or their JSON) can be continued: it has text and
    ended before its own end: stopped, interrupted (the engine died), failed, or cut off (at Max tokens,
    or by a full context, which a larger one then holds: where it does not, Continue says so). Not one
    that ended by itself or at a stop string, nor one a llama-server wrote (`settings`: the reply's; its
    statistics are the server's, which a run here would not add up with). A new user typed "continue"
    after a cut-off reply, and the rest came as a second reply that began again."""
    if role != "assistant" or not text.strip() or (isinstance(settings, dict) and settings.get("server")):
        return False
    if status in CONTINUABLE:
        return True
    parsed = GenerationStats.from_json(stats)
    return status == "done" and parsed is not None and parsed.stop_reason in CUT_AT_LIMIT


def last_user_message(messages: Sequence[_Message]) -> _Message | None:
    """The message an edit replaces and a Compare answers again (None: nothing to edit)."""
    return next((m for m in reversed(messages) if m.role == "user"), None)


def user_positions(messages: Sequence[_Message]) -> list[int]:
    """Indices of the user's messages: where turns start."""
    return [i for i, m in enumerate(messages) if m.role == "user"]
