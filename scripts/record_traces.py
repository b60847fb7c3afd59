#!/usr/bin/env python3
"""Record greedy traces of the built-in prompts for replay (desktop_app/engine/trace.py).

    python scripts/record_traces.py -m qwen2.5-coder-1.5b -md qwen2.5-coder-0.5b -n 192 -o tests/data/traces/demo.json
    python scripts/record_traces.py -m SmolLM2-135M-Instruct.Q4_1.gguf -md SmolLM2-135M-Instruct.Q2_K.gguf \
        -n 192 -o tests/data/traces/smollm2.json
    python scripts/record_traces.py -m qwen2.5-coder-1.5b -md qwen2.5-coder-0.5b -n 192 \
        --prompts tests/data/traces/heldout_prompts.json -o tests/data/traces/demo-heldout.json
    python scripts/record_traces.py -m qwen2.5-coder-1.5b -md qwen2.5-coder-0.5b -n 192 \
        --conversations tests/data/traces/conversations.json -o tests/data/traces/demo-conversations.json

Sampled replies (the window samples by default: temperature 0.7, top-k 40, top-p 0.95, min-p 0.05),
--samples replies per prompt, with seeds --seed, --seed + 1, ..., named PROMPT-sSEED:

    python scripts/record_traces.py -m qwen2.5-coder-1.5b -md qwen2.5-coder-0.5b -n 192 \
        --temp 0.7 --top-k 40 --top-p 0.95 --min-p 0.05 --seed 1 --samples 2 -o tests/data/traces/demo-sampled.json

--conversations FILE: a JSON list of {"name", "turns": [user messages]}; each turn is traced with the
whole conversation before it (the earlier turns' replies as the target wrote them) as its prompt, as
the window sends it, and named NAME-1, NAME-2, ...
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from desktop_app import models  # noqa: E402
from desktop_app.bench.prompts import load_prompts  # noqa: E402
from desktop_app.chat.template import ChatTemplate, Message  # noqa: E402
from desktop_app.engine import GREEDY, LoadOptions, ModelPair, SamplingParams  # noqa: E402
from desktop_app.engine.trace import record, trace_reply, trace_set  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-md", "--model-draft")
    ap.add_argument("-n", type=int, default=192)
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--temp", type=float, default=0.0, help="0: greedy (default)")
    ap.add_argument("--top-k", type=int, default=40)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--min-p", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--samples", type=int, default=1, help="sampled replies per prompt, seeds --seed, --seed + 1, ...")
    source = ap.add_mutually_exclusive_group()
    source.add_argument("--prompts", default="builtin", help="builtin, or a prompts file as tandem bench takes")
    source.add_argument("--conversations", help="a JSON list of {name, turns}: traced turn after turn")
    a = ap.parse_args()
    log = lambda m: print(m, file=sys.stderr, flush=True)   # noqa: E731
    sampling = GREEDY if a.temp <= 0 else SamplingParams(a.temp, a.top_k, a.top_p, a.min_p, a.seed)
    if a.conversations and not sampling.greedy:
        ap.error("--conversations traces greedy replies only")
    opts = LoadOptions(n_threads=a.threads, n_ctx=2048)
    pair = ModelPair.load(models.path_for(a.model), models.path_for(a.model_draft) if a.model_draft else None,
                          opts, opts)
    with pair:
        template = ChatTemplate(pair.target)
        if a.conversations:
            traces = trace_set(pair, _conversations(pair, template, a.conversations, a.n, log))
        else:
            prompts = [(p.name, template.tokenize([Message("user", p.text)])) for p in load_prompts(a.prompts)]
            traces = record(pair, prompts, a.n, log=log, sampling=sampling, samples=a.samples)
    traces.save(a.output)
    print(f"wrote {a.output}: {len(traces.traces)} traces on {traces.machine}", file=sys.stderr)
    return 0


def _conversations(pair, template: ChatTemplate, path: str, n: int, log) -> list:
    with open(path, encoding="utf-8") as fh:
        conversations = json.load(fh)
    traces = []
    for conversation in conversations:
        messages: list[Message] = []
        for i, turn in enumerate(conversation["turns"], 1):
            messages.append(Message("user", turn))
            trace, text = trace_reply(pair, f"{conversation['name']}-{i}", template.tokenize(messages), n, log)
            messages.append(Message("assistant", text, tuple(trace.reply)))   # (as the window sends it)
            traces.append(trace)
    return traces


if __name__ == "__main__":
    sys.exit(main())
