"""Checks of what a command line gives `generate` and `bench`, before any model loads.

Where llama.cpp has a convention, it is followed (common/arg.cpp and its samplers):
  -t 0 or below     llama.cpp's default count (common.cpp cpu_get_num_math: one thread per performance core);
                    `generate` follows the machine's load from there (engine/threads.py), `bench` holds it
  --seed -1         a random seed (llama.cpp's default, LLAMA_DEFAULT_SEED); seeds are 32-bit
  --temp 0 or below greedy decoding
  --top-k 0 or below off;  --top-p 1: off;  --min-p 0: off
  -c 0              the model's own training context
Where it has none, values that would fail later or quietly do something else are refused or
adjusted with a note: more threads than CPUs (llama.cpp starts them all, and decoding crawls), a
context below llama.cpp's smallest (256 tokens), a temperature that is not a number, p values
outside [0, 1], text that is not UTF-8. A refusal is a ValueError whose message is one line.
"""
from __future__ import annotations

import math
import os
import random
import sys

from desktop_app.engine.load_options import MIN_CTX

SEED_MAX = 2**32 - 1
RANDOM_SEED = -1
NO_LIMIT = -1                  # -n: no token limit, as in llama.cpp (the context, or the server, ends the reply)


def note(message: str) -> None:
    print(f"note: {message}", file=sys.stderr)


def draft_note(target: str, draft: str | None) -> None:
    """Say, before loading, where the draft is not much smaller than the target, in parameters (a
    swapped -m and -md ran at 0.39× plain and nothing said why: a new user's try; pairing._no_smaller)."""
    from desktop_app.models.pairing import check_headers, draft_too_big

    why = draft_too_big(target, draft, "swap -m and -md") if draft else ""
    if why and check_headers(target, draft).ok is not False:   # (a pair that cannot pair either way: the
        note(why)                                                   # load's error says what to do, a user's try)


def load_error(exc, target: str, draft: str | None) -> str:
    """A load's error for a terminal: which model, by the path as given (the window shows file names),
    or for a pair that cannot pair, what to do (it said only why)."""
    from desktop_app.engine import ModelLoadError

    if isinstance(exc, ModelLoadError):
        role = "draft model" if draft and exc.path == draft and exc.path != target else "target model"
        return f"{role} {exc.path}: {exc.reason}"
    return f"{exc} — choose a draft made for this target, or leave out -md to use the target alone"


def cpu_count() -> int:
    return max(1, os.cpu_count() or 1)


def threads(value: int | None) -> int:
    """-t: None, 0 or below mean the default count (0, as LoadOptions.n_threads takes it: automatic); more
    than the CPUs here is capped to them, with a note."""
    if value is None or value <= 0:
        return 0
    if value > cpu_count():
        note(f"-t {value}: this machine has {cpu_count()} CPUs; using {cpu_count()} threads")
        return cpu_count()
    return value


def ctx_size(value: int) -> int:
    """-c: 0 is the model's own context; below llama.cpp's smallest, the smallest (noted once the
    context exists, see ctx_note)."""
    if value < 0:
        raise ValueError(f"-c must be 0 (the model's own context length, as in llama.cpp) or a number of "
                         f"tokens, not {value}")
    return MIN_CTX if 0 < value < MIN_CTX else value


def ctx_note(asked: int, got: int, target: str | None = None) -> None:
    if asked and got != asked:
        note(f"-c {asked}: the context holds {got:,} tokens (llama.cpp makes contexts of at least {MIN_CTX} "
             f"tokens, in steps of {MIN_CTX})")
    trained = _trained_length(target) if target else None
    if trained and got > trained:          # (-c 32768 for a model trained on 8,192 went unsaid: a user's try)
        note(f"-c {asked}: the context holds {got:,} tokens, beyond the {trained:,} the model was trained on: "
             f"text past that may come out garbled")


def _trained_length(path: str) -> int | None:
    from desktop_app.models.gguf_info import GGUFError, read_info

    try:
        return read_info(path).context_length
    except GGUFError:
        return None


def seed(value: int | None) -> int:
    """--seed: a 32-bit seed; None or -1 draw a random one (reported by the command)."""
    if value is None or value == RANDOM_SEED:
        return random.randrange(2**31)
    if not 0 <= value <= SEED_MAX:
        raise ValueError(f"--seed must be -1 (random, as in llama.cpp) or between 0 and {SEED_MAX}, not {value}")
    return value


def temperature(value: float) -> float:
    """--temp: a finite number; 0 or below is greedy, reported as 0."""
    if not math.isfinite(value):
        raise ValueError(f"--temp must be a finite number (0 or below: greedy), not {value}")
    return max(value, 0.0)


def fraction(option: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:                           # also refuses nan
        raise ValueError(f"{option} must be between 0 and 1, not {value}")
    return value


def top_k(value: int) -> int:
    """--top-k: 0 or below is off, reported as 0."""
    return max(value, 0)


def text(what: str, value: str | None) -> str | None:
    """Command-line text must be UTF-8: invalid bytes reach Python as lone surrogates."""
    if value is not None:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{what} is not valid UTF-8 text") from None
    return value


def offload(args) -> tuple[int, int, tuple[str, ...]]:
    """(-ngl, -ngld, RPC servers) from the command line; raises ValueError. Layers go to a GPU, or with
    --rpc to the RPC servers: there every layer does unless -ngl says otherwise (as llama.cpp's -ngl 99)."""
    from desktop_app.engine.rpc import ALL_LAYERS, REBUILD, WARNING, RpcError, parse_servers
    from desktop_app.machine import llama_build

    servers: tuple[str, ...] = ()
    if getattr(args, "rpc", None) is not None:
        try:
            servers = parse_servers(args.rpc)
        except RpcError as exc:
            raise ValueError(f"--rpc: {exc}") from None
        if not llama_build()["rpc"]:           # (said after loading, of the target's file, and after the
            raise ValueError(f"--rpc: {REBUILD}")   # warning on a network RPC could not use: a new user's try)
        note(WARNING)
    default = ALL_LAYERS if servers else 0
    ngl = default if args.gpu_layers is None else args.gpu_layers
    ngld = default if args.gpu_layers_draft is None else args.gpu_layers_draft
    if ngl < 0 or ngld < 0:
        raise ValueError("-ngl and -ngld take 0 or more layers (99: all)")
    if (ngl or ngld) and not servers:
        if not llama_build()["gpu_offload"]:
            asked = " and ".join(f"{flag} {n}" for flag, n in (("-ngl", ngl), ("-ngld", ngld)) if n)
            note(f"{asked}: this llama.cpp build has no GPU offload (tandem doctor), so every layer runs on the CPU")
    return ngl, ngld, servers
