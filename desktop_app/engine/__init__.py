"""The speculative decoding engine: loading, pair compatibility, sampling, drafters, the loop, metrics.

No Qt here, ever: the engine yields plain dataclass events that any front end can consume.

The names below are imported on first use (PEP 562), so that importing a pure-numpy module of the
engine (rejection, sampling, events, settings, costs, metrics, explain) does not load llama.cpp:
only the modules that drive models (backend, loading, compat, pair, decoding) need it.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "IncompatiblePair": "errors", "check_pair": "compat",
    "FinishEvent": "events", "GenerationStats": "events", "RoundEvent": "events", "StopReason": "events",
    "TokenEvent": "events", "TokenKind": "events", "PromptEvent": "events",
    "LoadCancelled": "errors", "LoadOptions": "load_options", "ModelLoadError": "errors",
    "ModelPair": "pair",
    "GREEDY": "sampling", "SamplingParams": "sampling",
    "Controls": "settings", "SpecSettings": "settings",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value                  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
