"""Speculation controls. The loop reads them again every round, so they change without a reload."""
from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Callable

DRAFT_MAX_LIMIT = 32
DRAFTERS = ("model", "lookup", "none")


@dataclass(frozen=True)
class SpecSettings:
    enabled: bool = True
    drafter: str = "model"        # "model", "lookup" or "none"
    draft_max: int = 4            # γ in fixed mode (auto mode has its own range: AUTO_GAMMA_MAX)
    draft_min: int = 0            # a draft shorter than this is dropped (plain step instead), unless it
                                  # ends with an end-of-generation token
    draft_p_min: float = 0.0      # stop drafting when the draft's top probability falls below this
    auto: bool = False            # pick γ (and with a draft model, model or lookup) each round for the
                                  # best expected tokens per second

    def __post_init__(self):        # (in the command line's words: the window's widgets allow no other values)
        if self.drafter not in DRAFTERS:
            raise ValueError(f"--drafter must be one of {', '.join(DRAFTERS)}, not {self.drafter!r}")
        if not 1 <= self.draft_max <= DRAFT_MAX_LIMIT:
            raise ValueError(f"--draft-max must be between 1 and {DRAFT_MAX_LIMIT}, not {self.draft_max}")
        if not 0 <= self.draft_min <= self.draft_max:
            raise ValueError(f"--draft-min must be between 0 and --draft-max ({self.draft_max}), not {self.draft_min}")
        if not 0.0 <= self.draft_p_min < 1.0:
            raise ValueError(f"--draft-p-min must be at least 0 and below 1, not {self.draft_p_min}")

    @property
    def speculating(self) -> bool:
        return self.enabled and self.drafter != "none"


class Controls:
    """Holds the current SpecSettings and the cancel flag; safe to change from another thread.

    `subscribe(callback)` calls `callback(self)` after every change (a cancel or new settings), on
    the thread that made it: how a generation running in the engine process hears of them."""

    def __init__(self, settings: SpecSettings | None = None):
        self._settings = settings or SpecSettings()
        self._cancel = threading.Event()
        self._listeners: list[Callable[["Controls"], None]] = []

    @property
    def settings(self) -> SpecSettings:
        return self._settings

    def set(self, settings: SpecSettings) -> None:
        self._settings = settings
        self._changed()

    def update(self, **changes) -> SpecSettings:
        self.set(replace(self._settings, **changes))   # validated by __post_init__
        return self._settings

    def cancel(self) -> None:
        self._cancel.set()
        self._changed()

    def subscribe(self, callback: Callable[["Controls"], None]) -> Callable[[], None]:
        """Call `callback(self)` after each change until the returned function is called."""
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    def _changed(self) -> None:
        for callback in list(self._listeners):
            callback(self)

    def reset_cancel(self) -> None:
        self._cancel.clear()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()
