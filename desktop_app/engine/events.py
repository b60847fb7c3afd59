"""What the decoding loop yields: plain dataclasses, one per round, one per token, one at the end.

A consumer (the CLI, the Qt worker, a test) needs nothing else to show or record a generation.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum


class TokenKind(str, Enum):
    ACCEPTED = "accepted"        # a drafted token the target kept
    CORRECTION = "correction"    # the target's token in place of the first rejected draft
    BONUS = "bonus"              # the target's extra token after every draft was kept
    PLAIN = "plain"              # a round with nothing drafted: ordinary decoding


_KIND_OF_LETTER = {k.value[0]: k for k in TokenKind}


class StopReason(str, Enum):
    EOS = "eos"                  # an end-of-generation token
    STOP_STRING = "stop_string"
    MAX_TOKENS = "max_tokens"
    CANCELLED = "cancelled"
    CONTEXT_FULL = "context_full"


def int_list(value) -> bool:
    """Whether `value` is a list of ints (not bools): token ids as stored rounds and exports keep them."""
    return isinstance(value, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in value)


@dataclass(frozen=True)
class RoundEvent:
    """One draft-and-verify round (or one plain step when nothing was drafted)."""

    index: int
    drafter: str                      # "model", "lookup" or "none"
    drafted: tuple[int, ...]          # the proposal x_1..x_γ
    drafted_text: tuple[str, ...]
    q: tuple[float, ...]              # the draft's probability of each x_i (1.0 for a copied token)
    p: tuple[float, ...]              # the target's probability of each x_i
    accepted: int                     # how many of the drafted tokens were kept
    emitted: tuple[int, ...]          # tokens this round added to the text, in order
    emitted_text: tuple[str, ...]
    kinds: tuple[TokenKind, ...]
    target_top: tuple[int, ...]       # the target's argmax at each verified position (len γ+1)
    t_draft_s: float
    t_verify_s: float
    t_round_s: float
    n_past: int                       # tokens in the context before the round

    end: str = ""                     # "eos" or "max_tokens" when the reply ended in this round: the
                                      # round is cut there, so nothing past the reply's end is in it
                                      # (an end-of-generation token stays as its last emitted token)
    plain_step_s: float = 0.0         # the engine's price of a single-token target pass as the round
                                      # ended, at this context: how much dearer plain decoding's pass was
                                      # there than at the plain steps (metrics.PlainPass; 0.0: not known;
                                      # not stored)
    t_catch_up_s: float = 0.0         # of t_round_s: the draft model catching up on the text (not stored:
                                      # GenerationStats.t_catch_up_s has the reply's)

    @property
    def gamma(self) -> int:
        return len(self.drafted)

    @property
    def n_reply_tokens(self) -> int:
        """The tokens this round added to the reply: its emitted ones, less an end-of-generation token."""
        return len(self.emitted) - (self.end == "eos" and len(self.emitted) > 0)

    def to_record(self) -> dict:
        """The round as the history stores it: short keys, probabilities rounded (the whole log is
        compressed). `from_record` reads it back; the two are the one place the format lives."""
        record = {"s": self.drafter, "d": list(self.drafted), "dt": list(self.drafted_text), "a": self.accepted,
                  "e": list(self.emitted), "ets": list(self.emitted_text),
                  "k": "".join(k.value[0] for k in self.kinds),
                  "q": [round(x, 4) for x in self.q], "p": [round(x, 4) for x in self.p],
                  "tt": list(self.target_top), "td": round(self.t_draft_s, 5), "tv": round(self.t_verify_s, 5),
                  "tr": round(self.t_round_s, 5), "n": self.n_past}
        if self.end:
            record["end"] = self.end
        return record

    @staticmethod
    def record_ok(r) -> bool:
        """Whether `r` has a stored round's shape (to_record's keys, each of its type where present): what
        an imported file holds is checked before the window draws it."""
        ints = int_list

        def of(kind):
            return lambda v: isinstance(v, list) and all(isinstance(x, kind) for x in v)

        def number(v):
            return isinstance(v, (int, float)) and not isinstance(v, bool)

        types = {"s": lambda v: isinstance(v, str), "d": ints, "dt": of(str), "a": lambda v: ints([v]), "e": ints,
                 "ets": of(str), "k": lambda v: isinstance(v, str), "q": of((int, float)), "p": of((int, float)),
                 "tt": ints, "td": number, "tv": number, "tr": number, "n": lambda v: ints([v]),
                 "end": lambda v: isinstance(v, str), "et": lambda v: isinstance(v, str)}
        return isinstance(r, dict) and all(check(r[key]) for key, check in types.items() if key in r)

    @classmethod
    def from_record(cls, index: int, r: dict) -> "RoundEvent":
        """A stored round (`to_record`'s format, or the older one that kept only the last emitted text)."""
        drafted = tuple(r.get("d", ()))
        kinds = tuple(_KIND_OF_LETTER.get(c, TokenKind.PLAIN) for c in r.get("k", "p"))
        emitted = tuple(r.get("e", ()))
        if "ets" in r:
            emitted_text = tuple(r["ets"])
        else:                                    # the first format: the kept drafts, then the last token
            dt = tuple(r.get("dt", ()))
            emitted_text = dt[:r.get("a", 0)] + (r.get("et", "?"),)
        return cls(index=index, drafter=r.get("s", "none"), drafted=drafted,
                   drafted_text=tuple(r.get("dt", ("?",) * len(drafted))), q=tuple(r.get("q", ())),
                   p=tuple(r.get("p", ())), accepted=r.get("a", 0), emitted=emitted, emitted_text=emitted_text,
                   kinds=kinds, target_top=tuple(r.get("tt", ())), t_draft_s=r.get("td", 0.0),
                   t_verify_s=r.get("tv", 0.0), t_round_s=r.get("tr", r.get("td", 0.0) + r.get("tv", 0.0)),
                   n_past=r.get("n", 0), end=r.get("end", ""))

    def to_json(self) -> dict:
        return {"drafter": self.drafter, "drafted": list(self.drafted), "accepted": self.accepted,
                "emitted": list(self.emitted),
                "kinds": [k.value for k in self.kinds], "drafted_text": list(self.drafted_text),
                "emitted_text": list(self.emitted_text),
                "q": [round(x, 6) for x in self.q], "p": [round(x, 6) for x in self.p],
                "t_draft_s": round(self.t_draft_s, 6), "t_verify_s": round(self.t_verify_s, 6),
                **({"end": self.end} if self.end else {})}

    @classmethod
    def from_json(cls, index: int, d: dict, drafter: str) -> "RoundEvent":
        """A round as `to_json` wrote it (`tandem generate --json`); `drafter` where it does not name its
        own (written before it did: auto's rounds could not be told apart, a new user's try)."""
        return cls.from_record(index, {"s": d.get("drafter", drafter), "d": d["drafted"], "dt": d["drafted_text"],
                                       "a": d["accepted"], "e": d["emitted"], "ets": d["emitted_text"],
                                       "k": "".join(k[0] for k in d["kinds"]), "q": d["q"], "p": d["p"],
                                       "td": d["t_draft_s"], "tv": d["t_verify_s"], "end": d.get("end", "")})


@dataclass(frozen=True)
class PromptEvent:
    """How far a long prompt pass has read, between its pieces (SpeculativeDecoder._prompt_piece):
    `done` of the `total` tokens the reply reads before its first token (a prefix already in the cache is
    not counted; the prompt's last token is, which the first round reads, as GenerationStats counts it:
    "1,024 of 1,404" read on, a new user's try, to "1,405 tokens … had to be read first"). Only a
    pass longer than a piece sends any, and none after its last piece. `model` "draft": in fixed mode
    the draft model then reads the prompt too, in one pass (one event, done 0), before the first round."""

    done: int
    total: int
    model: str = "target"


@dataclass(frozen=True)
class TokenEvent:
    """One emitted token, with the text it adds (possibly empty: UTF-8 split across tokens, or held back
    because it may begin a stop string)."""

    token: int
    text: str
    kind: TokenKind
    index: int                        # position in the reply, from 0


@dataclass
class GenerationStats:
    n_tokens: int = 0                 # tokens in the reply
    n_prompt_tokens: int = 0
    n_prompt_evaluated: int = 0       # prompt tokens actually evaluated (the rest came from the cache,
                                      # or, where a Stop cut the prompt pass, the n_prompt_unread)
    n_prompt_unread: int = 0          # a prompt pass stopped mid-way: the tokens it had still to read (the
                                      # last, which the first round would have read, among them)
    t_total_s: float = 0.0
    tokens_per_s: float = 0.0         # reply tokens / decoding time (prompt evaluation excluded)
    ttft_s: float = 0.0               # time to first token
    n_rounds: int = 0
    n_plain_rounds: int = 0           # rounds that drafted nothing (a plain step through the same loop)
    t_plain_s: float = 0.0            # their draft + verify time
    n_drafted: int = 0
    n_accepted: int = 0
    acceptance_rate: float | None = None   # accepted / drafted (as llama.cpp prints it)
    alpha: float | None = None        # per-token acceptance probability: accepted / (accepted + rejections)
    mean_accepted: float | None = None     # accepted tokens per round that drafted
    mean_drafted: float | None = None      # γ actually used, per round that drafted
    mean_written: float | None = None      # tokens a round that drafted emitted: its drafts kept (the reply's
                                           # end among them where it was one) and the target's own, which a
                                           # round that ended the reply on a kept draft has not
    position_acceptance: list[float] = field(default_factory=list)  # P(x_i kept | x_i drafted), i = 1..
    t_draft_s: float = 0.0
    t_verify_s: float = 0.0
    t_other_s: float = 0.0
    t_catch_up_s: float = 0.0         # of t_other_s: the draft model catching up on text it had not read (auto)
    t_draft_step_s: float | None = None    # mean time of one draft step
    t_target_step_s: float | None = None   # mean time of one single-token target pass: this reply's plain steps,
                                           # or the engine's price of one where it had none
    t_plain_pass_s: float | None = None    # plain decoding's pass per token of this reply, each priced at the
                                           # context it was written (metrics.PlainPass); None in replies
                                           # stored before it (t_target_step_s then stands for it)
    c: float | None = None            # draft step cost relative to a single target pass (plain_pass_s)
    unused_draft_c: float | None = None    # auto mode weighed the draft model and never drafted with it:
                                           # its step cost relative to a target pass, as auto priced it
    n_copies_passed: int = 0          # auto mode: plain steps taken with a copy of earlier text on offer (why auto
    n_copies_passed_right: int = 0    # copied so seldom: a new user's try); of those, the ones whose copy's first
                                      # token the target then wrote itself;
    n_copies_passed_kept: int = 0     # and the copies' tokens it wrote, each copy up to its first it did not,
                                      # summed over the steps (the copies of consecutive steps overlap)
    repeated_share: float = 0.0       # of its tokens, those that repeat its own earlier text (metrics.repeated_share)
    predicted_speedup: float | None = None          # the paper's formula over this reply's rounds: each
                                                    # drafting round E(α, γ) tokens for 1 + γc passes,
                                                    # each plain one 1 for 1 (metrics.py)
    predicted_speedup_measured: float | None = None  # same, with the measured cost of verify batches
    stop_reason: str = ""
    remote: str = ""                  # "llama-server": rounds rebuilt from its timings (no split, no costs)
    threads: int = 0                  # the fewest threads llama.cpp ran the reply on (0: not recorded) ...
    threads_most: int = 0             # ... of at most this many (fewer while other work kept the CPUs busy)
    threads_mixed: bool = False       # the count changed during the reply (its steps ran on two counts)
    threads_suggested: int = 0        # the fewest automatic threads would have run (a count the user set)
    others_cpus: float | None = None  # the most CPUs other work used at a look during the reply (threads.py)
    verify_s_by_batch: dict[int, float] = field(default_factory=dict)  # the pair's measured verify pass
                                      # seconds per batch size when the reply ended (auto mode's costs)

    def __post_init__(self):
        # stored as JSON, the batch sizes come back as strings: a GenerationStats(**stored) has ints
        self.verify_s_by_batch = {int(k): float(v) for k, v in (self.verify_s_by_batch or {}).items()}

    @classmethod
    def from_json(cls, stats: "dict | GenerationStats | None") -> "GenerationStats | None":
        """GenerationStats from the history's JSON (to_json), which may come from an older version:
        unknown keys are dropped, missing ones keep their defaults, a value of the wrong type is left out.
        The one reader of stored statistics."""
        if stats is None or isinstance(stats, GenerationStats):
            return stats
        if not isinstance(stats, dict):
            return None
        defaults = cls()
        known = {}
        for key, value in stats.items():
            if key not in cls.__dataclass_fields__:
                continue
            default = getattr(defaults, key)
            if isinstance(default, bool):
                ok = isinstance(value, bool)
            elif isinstance(default, str):
                ok = isinstance(value, str)
            elif isinstance(default, list):
                ok = isinstance(value, list)
            elif isinstance(default, dict):
                ok = isinstance(value, dict) and all(
                    str(k).isdigit() and isinstance(v, (int, float)) for k, v in value.items())
            else:                                       # a number, or a number that may be None
                ok = (value is None and default is None) or (isinstance(value, (int, float))
                                                             and not isinstance(value, bool))
            if ok:
                known[key] = value
        return cls(**known)

    @property
    def plain_pass_s(self) -> float | None:
        """Plain decoding's single-token pass, per token of this reply (t_plain_pass_s; a reply stored
        before it has its plain steps' mean)."""
        return self.t_plain_pass_s or self.t_target_step_s

    @property
    def plain_tokens_per_s(self) -> float | None:
        """What plain decoding would have given on this machine at this point: one single-token target
        pass per token (plain_pass_s: as this reply's plain steps took them, and where it drafted, at the
        engine's price of one at that point of the reply), and one for the end-of-reply token where the
        reply ended on one (its pass is in the reply's time, the token not in n_tokens), plus the loop's
        own time per round as this reply spent it (sampling, text, events), so that a reply decoded
        plainly is 1.00× of it."""
        if not self.plain_pass_s or not self.n_rounds or not self.tokens_per_s:
            return None
        decode_s = self.n_tokens / self.tokens_per_s
        # (not the draft model's catch-up, which plain decoding would not pay: counted as the loop's own
        # time, it made plain look 5 % slower in a reply where auto caught the model up once)
        overhead = max(0.0, decode_s - self.t_draft_s - self.t_verify_s - self.t_catch_up_s) / self.n_rounds
        passes = self.n_tokens + (self.stop_reason == StopReason.EOS.value)
        return self.n_tokens / (passes * (self.plain_pass_s + overhead))

    @property
    def measured_speedup(self) -> float | None:
        """This reply's tokens per second over plain_tokens_per_s: the one "× plain (measured)" number
        every view shows (predicted speed-ups are labelled as predictions)."""
        plain = self.plain_tokens_per_s
        return self.tokens_per_s / plain if plain else None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class FinishEvent:
    """The end of a generation: the text, the tokens, and the statistics."""

    text: str
    tokens: tuple[int, ...]
    stats: GenerationStats
    stop_reason: StopReason
    message: str = ""                 # a sentence for the user when the stop needs explaining
    tail: str = ""                    # text held back from the token events (a possible stop-string
                                      # start, an unfinished UTF-8 sequence) and released at the end

    @property
    def broke_off(self) -> bool:
        """The reply ended neither by itself nor by Stop: a llama-server's connection broke mid-reply, or
        the server sent an error instead of the rest (CANCELLED, with the message saying which)."""
        return self.stop_reason == StopReason.CANCELLED and bool(self.message)

    @property
    def end_after_rounds(self) -> str:
        """The end mark (RoundEvent.end) for the reply's last round where the reply ended after it, for a
        reason no round carries: a stop string, a full context, Stop. "" otherwise: an end token or the
        token limit is marked in its own round, and a llama-server reply that broke off (CANCELLED with
        a message) was not stopped by the user."""
        if self.stop_reason in (StopReason.STOP_STRING, StopReason.CONTEXT_FULL) or (
                self.stop_reason == StopReason.CANCELLED and not self.broke_off):
            return self.stop_reason.value
        return ""
