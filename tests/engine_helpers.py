"""Running the engine in tests and replaying its rounds independently."""
from __future__ import annotations

import numpy as np

from desktop_app.engine import Controls, FinishEvent, PromptEvent, RoundEvent, SamplingParams, SpecSettings, TokenEvent
from desktop_app.engine.backend import Context
from desktop_app.engine.sampling import process

CODE_PROMPT = ("<|im_start|>user\nWrite a Python function that returns the n-th Fibonacci number, "
               "with a docstring.<|im_end|>\n<|im_start|>assistant\n")
ANIMAL_PROMPT = "<|im_start|>user\nName one animal.<|im_end|>\n<|im_start|>assistant\n"


def run(pair, prompt, sampling, max_tokens=64, stop=(), controls=None, **spec):
    """Generate; return (rounds, token events, finish event). (A long prompt's PromptEvents are left out.)"""
    controls = controls or Controls(SpecSettings(**spec))
    rounds, tokens, finish = [], [], None
    for ev in pair.generate(prompt, sampling, controls, max_tokens, stop):
        if isinstance(ev, RoundEvent):
            rounds.append(ev)
        elif isinstance(ev, TokenEvent):
            tokens.append(ev)
        elif not isinstance(ev, PromptEvent):
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


def first_token_law(model, prompt, params: SamplingParams, n_vocab: int | None = None) -> np.ndarray:
    """The processed distribution of the token after `prompt`, evaluated as the engine evaluates it
    (all but the last token, then the last), on n_vocab ids (default the model's own): a model with
    more ids has its logits cut to n_vocab, as a draft's are for a smaller target. Returns [n_vocab]."""
    n_vocab = n_vocab or model.n_vocab
    ctx = Context(model, 512, 2)
    ctx.eval(prompt[:-1], logits="none")
    ctx.eval(prompt[-1:])
    law = process(ctx.logits(-1)[:n_vocab], params, n_vocab).dense()
    ctx.close()
    return law


def first_divergence_gap(model, prompt, plain_tokens, spec_tokens, n_ctx=1024) -> tuple[int, float] | None:
    """Where a speculative greedy reply first parts from the plain one, and the plain run's top-2
    logit gap there (evaluated exactly as plain decoding evaluates it); None when they agree. They may
    part only where that gap is within what batching can move: 2 * max_batch_deviation."""
    if list(plain_tokens) == list(spec_tokens):
        return None
    first = next((i for i, (a, b) in enumerate(zip(plain_tokens, spec_tokens)) if a != b),
                 min(len(plain_tokens), len(spec_tokens)))
    ctx = Context(model, n_ctx, 2)
    ctx.eval(prompt[:-1], logits="none")
    for t in [prompt[-1], *plain_tokens[:first]]:
        ctx.eval([t], logits="last")
    top2 = np.sort(ctx.logits(-1))[-2:]
    ctx.close()
    return first, float(top2[1] - top2[0])


def first_tokens(pair, prompt, sampling, n: int = 1, gamma: int = 1) -> tuple[RoundEvent, tuple[int, ...]]:
    """The first round of a reply that drafts `gamma` tokens, and the reply's first n tokens; the rest
    of the reply is never decoded (the generator is closed). (A reply capped at n tokens would draft
    fewer: the engine never drafts past the reply's end.)"""
    events = pair.generate(prompt, sampling, Controls(SpecSettings(drafter="model", draft_max=gamma)),
                           max_tokens=gamma + 1)
    first_round = next(events)
    assert isinstance(first_round, RoundEvent) and first_round.gamma == gamma
    tokens = []
    for event in events:
        if isinstance(event, TokenEvent):
            tokens.append(event.token)
            if len(tokens) == n:
                break
    events.close()
    return first_round, tuple(tokens)
