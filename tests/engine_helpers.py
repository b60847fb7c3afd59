"""Running the engine in tests and replaying its rounds independently."""
from __future__ import annotations

import numpy as np

from desktop_app.engine import Controls, FinishEvent, RoundEvent, SpecSettings, TokenEvent
from desktop_app.engine.backend import Context

CODE_PROMPT = ("<|im_start|>user\nWrite a Python function that returns the n-th Fibonacci number, "
               "with a docstring.<|im_end|>\n<|im_start|>assistant\n")


def run(pair, prompt, sampling, max_tokens=64, stop=(), controls=None, **spec):
    """Generate; return (rounds, token events, finish event)."""
    controls = controls or Controls(SpecSettings(**spec))
    rounds, tokens, finish = [], [], None
    for ev in pair.generate(prompt, sampling, controls, max_tokens, stop):
        if isinstance(ev, RoundEvent):
            rounds.append(ev)
        elif isinstance(ev, TokenEvent):
            tokens.append(ev)
        else:
            assert isinstance(ev, FinishEvent) and finish is None
            finish = ev
    assert finish is not None
    return rounds, tokens, finish


def prompt_tokens(model, text=CODE_PROMPT):
    return model.tokenize(text, add_special=True, parse_special=True)


def max_batch_deviation(model, n_ctx=512) -> float:
    """The largest |logit| difference between evaluating a text token by token and in batches of
    2..17 tokens (4, 8 and 16 included: they time differently, so they may round differently), on
    this machine: the only source of legitimate greedy divergence."""
    text = prompt_tokens(model) + model.tokenize(" def fib(n):\n    a, b = 0, 1\n    for _ in range(n):", False)
    one = Context(model, n_ctx, 2)
    single = []
    for t in text:
        one.eval([t], logits="last")
        single.append(one.logits(-1).copy())
    worst = 0.0
    for k in (2, 3, 4, 5, 8, 9, 16, 17):
        ctx = Context(model, n_ctx, 2)
        for start in range(0, len(text), k):
            chunk = text[start:start + k]
            ctx.eval(chunk, logits="all")
            for i in range(len(chunk)):
                worst = max(worst, float(np.abs(ctx.logits(i) - single[start + i]).max()))
        ctx.close()
    one.close()
    return worst
