"""App settings (models last used, recent pairs, generation defaults, window layout) as JSON under the
user config dir, written atomically.

Nothing in the file can stop the app from starting: a file that is not JSON is kept aside (under a
name of its own) and replaced by defaults; in valid JSON every field is checked against `FIELDS`,
and a value of the wrong type or out of range (or a bad entry in a list) is dropped for its default,
with a notice naming what was dropped. A folder that cannot be written makes `save()` return False
and say why in `save_error`, never raise.
"""
from __future__ import annotations

import json
import math
import os
from copy import deepcopy
from pathlib import Path
from typing import Any, Callable

from platformdirs import user_config_dir

from desktop_app import APP_NAME
from desktop_app.chat.aside import set_aside
from desktop_app.json_file import write_atomic

CONFIG_DIR_ENV = "TANDEM_CONFIG_DIR"
MAX_RECENT_PAIRS = 8

DEFAULTS: dict = {
    "version": 1,
    "last_target": None,
    "last_draft": None,
    "recent_pairs": [],            # [{"target": path, "draft": path or None}], newest first
    "model_folders": [],           # extra folders to look for GGUF files in
    "generation": {                # Auto by default: replayed on the recorded traces it beat the draft model
                                   # at γ 4 in 58 of 60 cases, which ran below 0.99 of plain in 44 of them
                                   # (docs/auto-mode.md, "Auto by default")
        "speculation": True, "drafter": "model", "draft_max": 4, "draft_min": 0, "draft_p_min": 0.0,
        "auto": True, "temperature": 0.7, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "seed": None,
        "max_tokens": 1024, "system_prompt": "",
    },
    "loading": {"n_ctx": 4096, "n_threads": 0, "n_gpu_layers": 0, "n_gpu_layers_draft": 0,
                "repack": "auto"},  # repack: "auto" (CPU probe), "off" or "on" (engine/repack.py)
    "window": {},                  # geometry and splitter state, as the UI stores them; the conversation open
}

Check = Callable[[Any], bool]


def _text(value) -> bool:
    return isinstance(value, str)


def _maybe_text(value) -> bool:
    return value is None or isinstance(value, str)


def _flag(value) -> bool:
    return isinstance(value, bool)


def _whole(lo: int, hi: int) -> Check:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def _number(lo: float, hi: float) -> Check:
    return lambda v: (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                      and lo <= v <= hi)


def _one_of(*choices) -> Check:
    return lambda v: v in choices


def _pair(value) -> bool:
    return (isinstance(value, dict) and set(value) == {"target", "draft"} and _text(value["target"])
            and _maybe_text(value["draft"]))


# Every field: a check for its value, or for each entry of a list (("each", check)), or a nested dict.
FIELDS: dict = {
    "version": _whole(1, 1_000), "last_target": _maybe_text, "last_draft": _maybe_text,
    "recent_pairs": ("each", _pair), "model_folders": ("each", _text),
    "generation": {
        "speculation": _flag, "drafter": _one_of("model", "lookup", "none"), "draft_max": _whole(1, 32),
        "draft_min": _whole(0, 32), "draft_p_min": _number(0.0, 0.99), "auto": _flag,
        "temperature": _number(0.0, 2.0), "top_k": _whole(0, 1000), "top_p": _number(0.0, 1.0),
        "min_p": _number(0.0, 1.0), "seed": lambda v: v is None or _whole(0, 2**31 - 1)(v),
        "max_tokens": _whole(1, 32768), "system_prompt": _text,
    },
    "loading": {"n_ctx": _whole(256, 131072), "n_threads": _whole(0, 256), "n_gpu_layers": _whole(0, 999),
                "n_gpu_layers_draft": _whole(0, 999), "repack": _one_of("auto", "off", "on")},
    "window": ("values", _text),
}


def validated(loaded: dict, fields: dict = FIELDS, defaults: dict = DEFAULTS, where: str = "") -> tuple[dict, list[str]]:
    """The settings from `loaded` that pass their checks, over the defaults; and what was dropped."""
    out, dropped = deepcopy(defaults), []
    for key, check in fields.items():
        if key not in loaded:
            continue
        value, name = loaded[key], where + key
        if isinstance(check, dict):
            if isinstance(value, dict):
                out[key], more = validated(value, check, defaults[key], name + ".")
                dropped += more
            else:
                dropped.append(name)
        elif isinstance(check, tuple):                     # ("each", check): a list; ("values", check): a dict
            kind, item_check = check
            if not isinstance(value, list if kind == "each" else dict):
                dropped.append(name)
                continue
            if kind == "each":
                out[key] = [item for item in value if item_check(item)]
            else:
                out[key] = {k: v for k, v in value.items() if item_check(v)}
            if len(out[key]) < len(value):
                dropped.append(f"{name} ({len(value) - len(out[key])} of {len(value)} entries)")
        elif check(value):
            out[key] = value
        else:
            dropped.append(name)
    return out, dropped


def default_path() -> Path:
    override = os.environ.get(CONFIG_DIR_ENV)
    folder = Path(override) if override else Path(user_config_dir(APP_NAME, appauthor=False))
    return folder / "settings.json"


def read_model_folders(path: Path | str | None = None) -> list[str]:
    """The folders added in the window to look for GGUF files in, read without changing anything (a
    damaged file is not set aside, as the window would): [] where the file cannot be read."""
    try:
        loaded = json.loads(Path(path or default_path()).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return []
    return validated(loaded)[0]["model_folders"] if isinstance(loaded, dict) else []


class SettingsFile:
    def __init__(self, path: Path | str | None = None):
        self.path = Path(path) if path else default_path()
        self.notice = ""
        self.save_error = ""
        self._written: str | None = None      # the settings as last read or written, when the file holds them
        self.data = self._load()

    def _load(self) -> dict:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return deepcopy(DEFAULTS)
        except (OSError, UnicodeDecodeError) as exc:
            self.notice = f"The settings file could not be read ({getattr(exc, 'strerror', None) or exc}); " \
                          f"defaults are used."
            return deepcopy(DEFAULTS)
        try:
            loaded = json.loads(text)
            if not isinstance(loaded, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            try:
                aside = set_aside(self.path, "corrupt")
                kept = f"it was kept as {aside.name}"
            except OSError as move:
                kept = f"it could not be set aside ({move.strerror})"
            self.notice = f"The settings file was damaged ({exc}); {kept} and the defaults are used."
            return deepcopy(DEFAULTS)
        data, dropped = validated(loaded)
        if dropped:
            self.notice = (f"Some settings were not valid and their defaults are used instead: "
                           f"{', '.join(dropped)}.")
        elif data == loaded:
            self._written = json.dumps(data, sort_keys=True)
        return data

    def __getitem__(self, key):
        return self.data[key]

    def save(self) -> bool:
        """Write the settings atomically. Returns False, with the reason in `save_error`, if the folder
        or the disk refuses; the settings stay in effect for this session."""
        now = json.dumps(self.data, sort_keys=True)
        if now == self._written and not self.save_error:     # (the window saves a second after every
            return True                                      # change it sees, a resize too: no rewrite)
        try:
            write_atomic(self.path, self.data)
            self.save_error = ""
            self._written = now
            return True
        except OSError as exc:
            self.save_error = (f"Settings could not be saved to {self.path.parent} ({exc.strerror or exc}); "
                               f"they apply until Tandem is closed.")
            return False

    def remember_pair(self, target: str, draft: str | None) -> None:
        self.data["last_target"], self.data["last_draft"] = target, draft
        pair = {"target": target, "draft": draft}
        recent = [p for p in self.data["recent_pairs"] if p != pair]
        self.data["recent_pairs"] = [pair, *recent][:MAX_RECENT_PAIRS]
