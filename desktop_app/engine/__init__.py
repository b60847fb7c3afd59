"""The speculative decoding engine: loading, pair compatibility, sampling, drafters, the loop, metrics.

No Qt here, ever: the engine yields plain dataclass events that any front end can consume.
"""
from desktop_app.engine.compat import IncompatiblePair, check_pair
from desktop_app.engine.events import (FinishEvent, GenerationStats, RoundEvent, StopReason, TokenEvent,
                                       TokenKind)
from desktop_app.engine.loading import LoadCancelled, LoadOptions, ModelLoadError
from desktop_app.engine.pair import ModelPair
from desktop_app.engine.sampling import GREEDY, SamplingParams
from desktop_app.engine.settings import Controls, SpecSettings

__all__ = ["IncompatiblePair", "check_pair", "FinishEvent", "GenerationStats", "RoundEvent", "StopReason",
           "TokenEvent", "TokenKind", "LoadCancelled", "LoadOptions", "ModelLoadError", "ModelPair", "GREEDY",
           "SamplingParams", "Controls", "SpecSettings"]
