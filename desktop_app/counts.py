"""How every view words a count ("1 token", "2 rounds"): the engine's sentences, the window, the CLI
and `tandem doctor` alike. Imports nothing, so the window process can use it without the engine."""
from __future__ import annotations


def count(n: int, noun: str) -> str:
    """"1 token", "2 tokens"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
