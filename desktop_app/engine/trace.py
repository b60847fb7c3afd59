"""Recorded traces: real greedy replies with everything a policy needs to be judged on them later.

A greedy reply is the target's argmax at every step, whatever drafted it; so one plain run fixes the
text, and what any drafter would have had kept at any point follows from it:
- prompt lookup: its copy is a function of the text so far; the target keeps the copied tokens up
  to the first that differs from the reply;
- the draft model: greedy, its i-th draft after position j is its argmax after the text up to j+i-1
  as long as the drafts before it were kept (they are then the reply's tokens). So its argmax after
  each prefix of the reply, read in one batched pass (`draft_next`), gives the run it would have
  had kept from every position at every length.
With the costs measured on the machine (a CostProfile named "here"), replay.py can then run any
policy over the trace under any profile in milliseconds. (Batched and single-token passes round
differently, so a live run can part from the trace at a near-tie; sampled replies are not traced.)
"""
from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from desktop_app.engine.calibration import calibrate
from desktop_app.engine.cost_profiles import CostProfile
from desktop_app.engine.costs import CostModel

TRACE_VERSION = 1


@dataclass
class Trace:
    """One prompt's greedy reply and the draft model's argmax after each prefix of it."""

    name: str
    prompt: list[int]
    reply: list[int]                              # the target's greedy reply (no end-of-generation token)
    draft_next: list[int] = field(default_factory=list)   # [len(reply)]: the draft's argmax after
                                                          # prompt + reply[:j]; empty: no draft model
    confidence: list[float] = field(default_factory=list)  # [len(reply)]: the target's probability of
                                                           # reply[j] after prompt + reply[:j]
    max_tokens: int = 0                                    # the reply's limit (it may have ended sooner)
    ends: frozenset[int] = frozenset()                     # the target's end-of-generation tokens (its
                                                           # TraceSet's): a copy stops at one, as live

    def __post_init__(self):
        self.max_tokens = max(self.max_tokens, len(self.reply))

    @property
    def has_draft(self) -> bool:
        return bool(self.draft_next)

    def model_run(self, j: int, gamma: int) -> int:
        """How many of γ greedy draft-model tokens drafted after reply[:j] the target keeps."""
        n = 0
        while n < gamma and j + n < len(self.reply) and self.draft_next[j + n] == self.reply[j + n]:
            n += 1
        return n

    def copy_run(self, j: int, copy: Sequence[int]) -> int:
        """How many of `copy`, drafted after reply[:j], the target keeps."""
        n = 0
        while n < len(copy) and j + n < len(self.reply) and copy[n] == self.reply[j + n]:
            n += 1
        return n

    def to_json(self) -> dict:
        return {"name": self.name, "prompt": self.prompt, "reply": self.reply, "draft_next": self.draft_next,
                "confidence": [round(c, 4) for c in self.confidence], "max_tokens": self.max_tokens}

    @classmethod
    def from_json(cls, d: dict, ends: frozenset[int] = frozenset()) -> "Trace":
        return cls(d["name"], list(d["prompt"]), list(d["reply"]), list(d.get("draft_next", [])),
                   list(d.get("confidence", [])), int(d.get("max_tokens", 0)), ends)


@dataclass
class TraceSet:
    """Traces of one pair on one machine, with that machine's costs and the target's
    end-of-generation tokens (`ends`; a file recorded before they were kept has none, and its copies
    run on through them in replay)."""

    target: str
    draft: str | None
    machine: str
    here: CostProfile
    traces: list[Trace]
    ends: frozenset[int] = frozenset()

    def save(self, path: str) -> None:
        doc = {"version": TRACE_VERSION, "target": self.target, "draft": self.draft, "machine": self.machine,
               "here": self.here.to_json(), "ends": sorted(self.ends), "traces": [t.to_json() for t in self.traces]}
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, separators=(",", ":"))

    @classmethod
    def load(cls, path: str) -> "TraceSet":
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        if doc.get("version") != TRACE_VERSION:
            raise ValueError(f"{path}: trace version {doc.get('version')!r}, this Tandem reads {TRACE_VERSION}")
        ends = frozenset(int(t) for t in doc.get("ends", []))
        return cls(doc["target"], doc.get("draft"), doc.get("machine", ""), CostProfile.from_json(doc["here"]),
                   [Trace.from_json(t, ends) for t in doc["traces"]], ends)


def conversations(traces: Sequence[Trace]) -> dict[str, list[Trace]]:
    """A conversation trace set's turns (named NAME-1, NAME-2, ...: scripts/record_traces.py
    --conversations) by conversation, each in turn order."""
    out: dict[str, list[tuple[int, Trace]]] = {}
    for t in traces:
        name, _, turn = t.name.rpartition("-")
        if not name or not turn.isdigit():
            raise ValueError(f"{t.name!r} is not a conversation's turn (NAME-1, NAME-2, ...)")
        out.setdefault(name, []).append((int(turn), t))
    return {name: [t for _, t in sorted(turns, key=lambda x: x[0])] for name, turns in out.items()}


def machine_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def record(pair, prompts: Sequence[tuple[str, list[int]]], n_tokens: int, profile_sizes: Sequence[int] = range(1, 34),
           log=lambda _m: None) -> TraceSet:
    """Greedy plain replies of `pair` (a loaded ModelPair) to each (name, prompt tokens), the draft's
    argmax after each prefix, and the costs of this machine for every verify size in profile_sizes."""
    return trace_set(pair, [trace_reply(pair, name, prompt, n_tokens, log)[0] for name, prompt in prompts],
                     profile_sizes)


def end_tokens(model) -> frozenset[int]:
    """Every end-of-generation token of `model` (a loaded backend.Model)."""
    return frozenset(t for t in range(model.n_vocab) if model.is_eog(t))


def trace_reply(pair, name: str, prompt: Sequence[int], n_tokens: int, log=lambda _m: None) -> tuple[Trace, str]:
    """One greedy plain reply of `pair` to `prompt`, traced, and its text (a conversation's next turn
    is templated from it: scripts/record_traces.py --conversations)."""
    from desktop_app.engine import GREEDY, Controls, FinishEvent, SpecSettings

    pair.target_ctx.clear()
    finish = None
    for event in pair.generate(list(prompt), GREEDY, Controls(SpecSettings(enabled=False)), n_tokens):
        if isinstance(event, FinishEvent):
            finish = event
    reply = list(finish.tokens)
    draft_next = _argmax(pair.draft_ctx, pair.target_ctx.n_vocab, prompt, reply)[0] if pair.draft_ctx else []
    confidence = _argmax(pair.target_ctx, pair.target_ctx.n_vocab, prompt, reply)[1]
    log(f"traced {name}: {len(prompt)} prompt tokens, {len(reply)} reply tokens")
    return Trace(name, list(prompt), reply, draft_next, confidence, n_tokens), finish.text


def trace_set(pair, traces: list[Trace], profile_sizes: Sequence[int] = range(1, 34)) -> TraceSet:
    """`traces` of `pair` with this machine's costs (measure_profile) and the target's end tokens,
    read once and given to every trace (as TraceSet.load does)."""
    ends = end_tokens(pair.target)
    return TraceSet(os.path.basename(pair.target.path), os.path.basename(pair.draft.path) if pair.draft else None,
                    machine_name(), measure_profile(pair, profile_sizes),
                    [replace(t, ends=ends) for t in traces], ends)


def _argmax(ctx, n_vocab_target: int, prompt: Sequence[int], reply: Sequence[int]) -> tuple[list[int], list[float]]:
    """The model's argmax after prompt + reply[:j] for every j, and its probability of reply[j]
    there: one batched pass over the text."""
    from desktop_app.engine.sampling import softmax_prob

    n_common = min(ctx.n_vocab, n_vocab_target)
    ctx.clear()
    text = list(prompt) + list(reply)
    ctx.eval(text[:len(prompt) - 1], logits="none")
    top: list[int] = []
    prob: list[float] = []
    pos = len(prompt) - 1                       # logits after text[:pos + 1]
    chunk = 32
    while len(top) < len(reply):
        piece = text[pos:pos + min(chunk, len(reply) - len(top))]
        ctx.eval(piece, logits="all")
        for i in range(len(piece)):
            logits = ctx.logits(i)[:n_common]
            top.append(int(np.argmax(logits)))
            prob.append(float(softmax_prob(logits, reply[len(prob)])[0]))
        pos += len(piece)
    ctx.clear()
    return top, prob


def measure_profile(pair, sizes: Sequence[int] = range(1, 34)) -> CostProfile:
    """This machine's costs for the pair, timed as at load (calibration.calibrate), for a verify pass
    of every size in `sizes`."""
    costs = CostModel()
    calibrate(costs, pair.target_ctx, pair.draft_ctx, steps=8, verify_sizes=tuple(k for k in sizes if k > 1))
    return CostProfile("here", f"measured on {machine_name()} with the traced pair",
                       {b: 1000 * s for b, s in sorted(costs.verify_s.items()) if b in sizes},
                       1000 * costs.draft_step_s.get("model", 0.0),
                       {name: 1000 * s for name, s in costs.prefill_s.items()})
