"""The messages between the window's worker and the engine process: plain, picklable dataclasses.

Requests go parent → child on one pipe and are answered, in order, on the other pipe by zero or more
`Progress`/`Events` messages and then exactly one `Done` or `Failed`. `Cancel` and `SetSpec` are
controls, not requests: the child acts on them the moment they arrive, even mid-request, and sends
nothing back. Each request carries an id, so a control names the request it is for and one sent
before its request started still lands.

The engine's own events (PromptEvent, RoundEvent, TokenEvent, FinishEvent) cross unchanged, one `Events`
message per round: the round, then its tokens (and the finish, if it ended the reply); a long prompt's
PromptEvents, about a second apart, each in the first message after it.
"""
from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Any

from desktop_app.child import signal_name
from desktop_app.engine.sampling import SamplingParams
from desktop_app.engine.settings import SpecSettings

# -- requests (parent -> child) ---------------------------------------------------------------------


@dataclass(frozen=True)
class Load:
    """Load a target and an optional draft; the models loaded before stay if this fails."""

    id: int
    target: str
    draft: str | None
    target_options: Any            # engine.loading.LoadOptions
    draft_options: Any


@dataclass(frozen=True)
class Tokenize:
    """Tokenise several texts with the target's vocabulary in one trip: (text, parse_special) each."""

    id: int
    parts: tuple[tuple[str, bool], ...]
    add_special: bool = False


@dataclass(frozen=True)
class Pieces:
    """The bytes each token renders to, control tokens included."""

    id: int
    tokens: tuple[int, ...]


@dataclass(frozen=True)
class TopLogits:
    """The target's k best next tokens after `tokens`, as (token, logit), highest first."""

    id: int
    tokens: tuple[int, ...]
    k: int = 2


@dataclass(frozen=True)
class Generate:
    id: int
    prompt: tuple[int, ...]
    sampling: SamplingParams
    spec: SpecSettings
    max_tokens: int
    stop: tuple[str, ...] = ()
    primed: int = 0                  # the prompt ends with this many tokens of a reply written on (Continue)


@dataclass(frozen=True)
class Shutdown:
    """Free the models and end the process (after the request in progress)."""


# -- controls (parent -> child, acted on at once) ---------------------------------------------------


@dataclass(frozen=True)
class Cancel:
    """Stop request `id` within one round (a load at its next progress step); id 0: whatever runs."""

    id: int = 0


@dataclass(frozen=True)
class SetSpec:
    """New speculation settings for generation `id`, from its next round."""

    id: int
    spec: SpecSettings


# -- answers (child -> parent) ----------------------------------------------------------------------


@dataclass(frozen=True)
class ModelInfo:
    """What the parent needs of a loaded model without loading it: its vocabulary's facts."""

    path: str
    n_vocab: int
    bos: int
    eos: int
    add_bos: bool
    add_eos: bool
    vocab_type: int
    chat_template: str | None
    special_pieces: dict[int, bytes] = field(default_factory=dict)   # bos and eos, as the template needs
    vocab_id: str = ""             # backend.Model.vocab_id


@dataclass(frozen=True)
class PairInfo:
    target: ModelInfo
    draft: ModelInfo | None
    n_ctx: int
    notice: str = ""               # something the user should be told once (a decision made for them)
    plain_step_s: float = 0.0      # ModelPair.plain_step_s


@dataclass(frozen=True)
class Progress:
    what: str
    fraction: float


@dataclass(frozen=True)
class Events:
    events: tuple                  # [PromptEvent...], RoundEvent, TokenEvent..., [FinishEvent]


@dataclass
class Transfer:
    """What streaming one reply cost the engine process, and when its controls landed: pipe messages,
    seconds spent pickling and writing them (time the decoding loop waited), rounds completed, and
    how many rounds were complete when each control arrived (("cancel" | "spec", rounds), in order)."""

    messages: int = 0
    send_s: float = 0.0
    rounds: int = 0
    controls: list[tuple[str, int]] = field(default_factory=list)


@dataclass(frozen=True)
class Done:
    id: int
    value: Any = None


@dataclass(frozen=True)
class Failed:
    """A request failed in a way the engine understood. `kind` names the error class for the parent
    to raise again; `path` and `reason` rebuild a ModelLoadError."""

    id: int
    kind: str
    message: str
    path: str = ""
    reason: str = ""


# -- when the child dies ----------------------------------------------------------------------------


class EngineCrashed(RuntimeError):
    """The engine process ended without being asked to. `str()` is a message for the user."""

    def __init__(self, message: str, exitcode: int | None = None, stage: str = ""):
        """exitcode: the process's (negative: the signal that ended it); None when it was not running."""
        super().__init__(message)
        self.exitcode = exitcode
        self.stage = stage


# signal -> (what happened, a reason where one is likely, which advice)
SIGNAL_WORDS = {
    signal.SIGSEGV: ("crashed (segmentation fault)", "", "fault"),
    signal.SIGBUS: ("crashed (bus error)", "", "fault"),
    signal.SIGILL: ("crashed (illegal instruction)", "this llama.cpp build uses an instruction this processor "
                    "does not have", "fault"),
    signal.SIGFPE: ("crashed (arithmetic fault)", "", "fault"),
    signal.SIGABRT: ("stopped on an internal error (abort)", "", "fault"),
    signal.SIGKILL: ("was killed", "the system does this most often when memory runs out", "memory"),
    signal.SIGTERM: ("was terminated", "", "external"),
}

ADVICE = {
    "fault": ("Reload the models to go on. If it happens again, turn off weight repacking (Settings → "
              "Loading, or start Tandem with --no-repack), set GPU layers to 0, and include the report of "
              "Help → About Tandem and this system (or of tandem doctor) in a bug report."),
    "memory": ("Reload the models to go on. If it happens again, use a smaller context size, a smaller "
               "or more quantised model, or close other programs."),
    "external": "Reload the models to go on.",
}


def describe_death(exitcode: int, stage: str, log_tail: str = "") -> str:
    """A few sentences for the user: what happened to the engine, when, why if known, what to try."""
    reason, kind = "", "fault"
    if exitcode < 0:
        words, reason, kind = SIGNAL_WORDS.get(-exitcode, ("was stopped", "", "fault"))
        words += f" [{signal_name(exitcode)}]"
    else:
        words = f"exited unexpectedly with code {exitcode}"
    text = f"The model engine {words} while {stage or 'idle'}"
    text += f"; {reason}." if reason else "."
    if log_tail:
        text += f" Its last message: “{log_tail}”."
    return f"{text} Your conversation is saved. {ADVICE[kind]}"
