"""Recorded traces: real replies with everything a policy needs to be judged on them later.

A greedy reply is the target's argmax at every step, whatever drafted it; so one plain run fixes the
text, and what any drafter would have had kept at any point follows from it:
- prompt lookup: its copy is a function of the text so far; the target keeps the copied tokens up
  to the first that differs from the reply;
- the draft model: greedy, its i-th draft after position j is its argmax after the text up to j+i-1
  as long as the drafts before it were kept (they are then the reply's tokens). So its argmax after
  each prefix of the reply, read in one batched pass (`draft_next`), gives the run it would have
  had kept from every position at every length.

A sampled reply (plain decoding with a TraceSet's `sampling`) is a draw from the target's processed
distributions p; speculative sampling's output has that same distribution, so a replay may follow
the recorded text if it keeps a draft exactly when the draft and the recorded token agree, with the
right probability:
- prompt lookup drafts one token x with q a point mass; the rule keeps it with probability p(x), and
  the recorded token r, drawn from p, equals x with probability p(x); when it does not, the rule's
  replacement, drawn from p without x, is distributed as r given r != x. So "kept while the copy
  equals the reply", as for greedy replies, is exact.
- the draft model samples x ~ q. The joint law of (x, the token written) under the rule is
  min(p, q) on the diagonal and (q - p)+ (p - q)+ / (1 - Σ min(p, q)) off it; given the written token
  r, x = r (kept) with probability min(1, q(r) / p(r)). So the trace keeps that probability at every
  position (`draft_keep`), and a replay keeps the draft at reply position i when a uniform draw for
  i falls below it. A position's draw is used at most once (a round's drafts past a rejection are
  never judged), so one draw per position, fixed per seed, is exact and gives every setting the
  same luck at the same place. (For a greedy reply they would be 1 or 0: draft_next says which.)
  Exact for what is kept and for the text; not for what is drafted: a live draft model stops at an
  end-of-generation token it samples (under sampling it may, where the reply went on), which the
  replay, drafting γ tokens a round, does not see; and, as for greedy replies, the replay drafts
  nothing past the recorded reply's last token, where a live reply can draft its end.
With the costs measured on the machine (a CostProfile named "here"), replay.py can then run any
policy over the trace under any profile in milliseconds. (Batched and single-token passes round
differently, so a live run can part from the trace at a near-tie.)
"""
from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass, field, replace
from typing import Sequence

import numpy as np

from desktop_app.engine.calibration import calibrate
from desktop_app.engine.cost_profiles import CostProfile
from desktop_app.engine.costs import CostModel
from desktop_app.engine.sampling import GREEDY, SamplingParams

TRACE_VERSION = 1


@dataclass
class Trace:
    """One prompt's reply (greedy, or sampled) and what the draft model would have had kept after
    each prefix of it."""

    name: str
    prompt: list[int]
    reply: list[int]                              # the target's plain reply (no end-of-generation token)
    draft_next: list[int] = field(default_factory=list)   # [len(reply)], greedy: the draft's argmax
                                                          # after prompt + reply[:j]; empty: no draft model
    confidence: list[float] = field(default_factory=list)  # [len(reply)]: the target's top probability
                                                           # after prompt + reply[:j] (temperature 1, as
                                                           # decoding.judge reports it; greedy traces
                                                           # recorded before sampled ones: its probability
                                                           # of reply[j], the same but at near-ties)
    max_tokens: int = 0                                    # the reply's limit (it may have ended sooner)
    ends: frozenset[int] = frozenset()                     # the target's end-of-generation tokens (its
                                                           # TraceSet's): a copy stops at one, as live
    draft_keep: list[float] = field(default_factory=list)  # [len(reply)], sampled: min(1, q_j(r_j) / p_j(r_j)),
                                                           # the probability that the draft model's token
                                                           # after prompt + reply[:j] is kept as reply[j]

    def __post_init__(self):
        self.max_tokens = max(self.max_tokens, len(self.reply))

    @property
    def has_draft(self) -> bool:
        return bool(self.draft_next or self.draft_keep)

    def model_run(self, j: int, gamma: int, draws: Sequence[float] | None = None) -> int:
        """How many of γ draft-model tokens drafted after reply[:j] the target keeps. Greedy: while
        the draft's argmax is the reply's token. Sampled: while the uniform draw of each reply
        position (`draws`, [len(reply)]) falls below its draft_keep."""
        if not self.draft_keep:                       # its drafts are its argmax after each kept prefix
            return self.copy_run(j, self.draft_next[j:j + gamma])
        if draws is None:
            raise ValueError(f"{self.name}: a sampled trace's draft runs need a draw per position")
        n = 0
        while n < gamma and j + n < len(self.reply) and draws[j + n] < self.draft_keep[j + n]:
            n += 1
        return n

    def copy_run(self, j: int, copy: Sequence[int]) -> int:
        """How many of `copy`, drafted after reply[:j], the target keeps."""
        n = 0
        while n < len(copy) and j + n < len(self.reply) and copy[n] == self.reply[j + n]:
            n += 1
        return n

    def to_json(self) -> dict:
        d = {"name": self.name, "prompt": self.prompt, "reply": self.reply, "draft_next": self.draft_next,
             "confidence": [round(c, 4) for c in self.confidence], "max_tokens": self.max_tokens}
        if self.draft_keep:
            d["draft_keep"] = [round(a, 4) for a in self.draft_keep]
        return d

    @classmethod
    def from_json(cls, d: dict, ends: frozenset[int] = frozenset()) -> "Trace":
        return cls(d["name"], list(d["prompt"]), list(d["reply"]), list(d.get("draft_next", [])),
                   list(d.get("confidence", [])), int(d.get("max_tokens", 0)), ends, list(d.get("draft_keep", [])))


@dataclass
class TraceSet:
    """Traces of one pair on one machine, with that machine's costs and the target's
    end-of-generation tokens (`ends`; a file recorded before they were kept has none, and its copies
    run on through them in replay). `sampling`: the SamplingParams fields the replies were sampled
    with (None: greedy)."""

    target: str
    draft: str | None
    machine: str
    here: CostProfile
    traces: list[Trace]
    ends: frozenset[int] = frozenset()
    sampling: dict | None = None

    def save(self, path: str) -> None:
        doc = {"version": TRACE_VERSION, "target": self.target, "draft": self.draft, "machine": self.machine,
               "here": self.here.to_json(), "ends": sorted(self.ends), "traces": [t.to_json() for t in self.traces]}
        if self.sampling is not None:
            doc["sampling"] = self.sampling
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
                   [Trace.from_json(t, ends) for t in doc["traces"]], ends, doc.get("sampling"))


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
           log=lambda _m: None, sampling: SamplingParams = GREEDY, samples: int = 1) -> TraceSet:
    """Plain replies of `pair` (a loaded ModelPair) to each (name, prompt tokens), traced
    (trace_reply), and the costs of this machine for every verify size in profile_sizes. Greedy: one
    reply a prompt, named as it is. Sampled: `samples` replies a prompt, with seeds sampling.seed,
    sampling.seed + 1, ..., named NAME-sSEED."""
    if sampling.greedy:
        runs = [(name, prompt, sampling) for name, prompt in prompts]
    else:
        first = sampling.seed or 0
        runs = [(f"{name}-s{seed}", prompt, replace(sampling, seed=seed))
                for name, prompt in prompts for seed in range(first, first + samples)]
    return trace_set(pair, [trace_reply(pair, name, prompt, n_tokens, log, params)[0] for name, prompt, params in runs],
                     profile_sizes, sampling)


def end_tokens(model) -> frozenset[int]:
    """Every end-of-generation token of `model` (a loaded backend.Model)."""
    return frozenset(t for t in range(model.n_vocab) if model.is_eog(t))


def trace_reply(pair, name: str, prompt: Sequence[int], n_tokens: int, log=lambda _m: None,
                sampling: SamplingParams = GREEDY) -> tuple[Trace, str]:
    """One plain reply of `pair` to `prompt` (greedy, or sampled with `sampling`), traced, and its
    text (a conversation's next turn is templated from it: scripts/record_traces.py --conversations)."""
    from desktop_app.engine import Controls, FinishEvent, SpecSettings

    pair.target_ctx.clear()
    finish = None
    for event in pair.generate(list(prompt), sampling, Controls(SpecSettings(enabled=False)), n_tokens):
        if isinstance(event, FinishEvent):
            finish = event
    reply = list(finish.tokens)
    n_vocab = pair.target_ctx.n_vocab
    target = _read(pair.target_ctx, n_vocab, prompt, reply, sampling)
    confidence = [top for top, _, _ in target]
    draft_next: list[int] = []
    draft_keep: list[float] = []
    if pair.draft_ctx:
        draft = _read(pair.draft_ctx, n_vocab, prompt, reply, sampling)
        if sampling.greedy:
            draft_next = [argmax for _, argmax, _ in draft]
        else:           # min(1, q(r) / p(r)); p(r) > 0 but for rounding at a cut-off (batched passes)
            draft_keep = [min(1.0, q / p) if p > 0 else float(q > 0) for (_, _, p), (_, _, q) in zip(target, draft)]
    log(f"traced {name}: {len(prompt)} prompt tokens, {len(reply)} reply tokens")
    return Trace(name, list(prompt), reply, draft_next, confidence, n_tokens, draft_keep=draft_keep), finish.text


def trace_set(pair, traces: list[Trace], profile_sizes: Sequence[int] = range(1, 34),
              sampling: SamplingParams = GREEDY) -> TraceSet:
    """`traces` of `pair` (replies sampled with `sampling`) with this machine's costs (measure_profile)
    and the target's end tokens, read once and given to every trace (as TraceSet.load does)."""
    ends = end_tokens(pair.target)
    return TraceSet(os.path.basename(pair.target.path), os.path.basename(pair.draft.path) if pair.draft else None,
                    machine_name(), measure_profile(pair, profile_sizes),
                    [replace(t, ends=ends) for t in traces], ends,
                    None if sampling.greedy else {k: v for k, v in asdict(sampling).items() if k != "seed"})


def _read(ctx, n_vocab_target: int, prompt: Sequence[int], reply: Sequence[int],
          sampling: SamplingParams) -> list[tuple[float, int, float]]:
    """For every j, the model's (top probability at temperature 1, argmax, processed probability of
    reply[j]) after prompt + reply[:j], its ids cut to those the target has (as ModelDrafter's q):
    one batched pass over the text. (Greedy: the processed probability is not needed, and is 0.0.)"""
    from desktop_app.engine.sampling import process, softmax_prob

    n_common = min(ctx.n_vocab, n_vocab_target)
    ctx.clear()
    text = list(prompt) + list(reply)
    ctx.eval(text[:len(prompt) - 1], logits="none")
    out: list[tuple[float, int, float]] = []
    pos = len(prompt) - 1                       # logits after text[:pos + 1]
    chunk = 32
    while len(out) < len(reply):
        piece = text[pos:pos + min(chunk, len(reply) - len(out))]
        ctx.eval(piece, logits="all")
        for i in range(len(piece)):
            logits = ctx.logits(i)[:n_common]
            argmax = int(np.argmax(logits))
            r = reply[len(out)]
            p = 0.0 if sampling.greedy else process(logits, sampling, n_vocab_target).prob(r)
            out.append((softmax_prob(logits, argmax)[1], argmax, p))
        pos += len(piece)
    ctx.clear()
    return out


def measure_profile(pair, sizes: Sequence[int] = range(1, 34)) -> CostProfile:
    """This machine's costs for the pair, timed as at load (calibration.calibrate), for a verify pass
    of every size in `sizes`."""
    costs = CostModel()
    calibrate(costs, pair.target_ctx, pair.draft_ctx, steps=8, verify_sizes=tuple(k for k in sizes if k > 1))
    return CostProfile("here", f"measured on {machine_name()} with the traced pair",
                       {b: 1000 * s for b, s in sorted(costs.verify_s.items()) if b in sizes},
                       1000 * costs.draft_step_s.get("model", 0.0),
                       {name: 1000 * s for name, s in costs.prefill_s.items()})
