"""App settings (models last used, recent pairs, generation defaults, window layout) as JSON under the
user config dir, written atomically. A file that cannot be read is kept aside and replaced by
defaults, with a notice for the user; it never stops the app from starting."""
from __future__ import annotations

import json
import os
import tempfile
import time
from copy import deepcopy
from pathlib import Path

from platformdirs import user_config_dir

from desktop_app import APP_NAME

CONFIG_DIR_ENV = "TANDEM_CONFIG_DIR"
MAX_RECENT_PAIRS = 8

DEFAULTS: dict = {
    "version": 1,
    "last_target": None,
    "last_draft": None,
    "recent_pairs": [],            # [{"target": path, "draft": path or None}], newest first
    "model_folders": [],           # extra folders to look for GGUF files in
    "generation": {
        "speculation": True, "drafter": "model", "draft_max": 4, "draft_min": 0, "draft_p_min": 0.0,
        "auto": False, "temperature": 0.7, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "seed": None,
        "max_tokens": 1024, "system_prompt": "",
    },
    "loading": {"n_ctx": 4096, "n_threads": 0, "n_gpu_layers": 0, "n_gpu_layers_draft": 0,
                "repack": "auto"},     # weight repacking: "auto" (CPU probe), "off", "on" (engine/repack.py)
    "window": {},                  # geometry and splitter state, as the UI stores them
}


def default_path() -> Path:
    override = os.environ.get(CONFIG_DIR_ENV)
    folder = Path(override) if override else Path(user_config_dir(APP_NAME, appauthor=False))
    return folder / "settings.json"


def _merge(defaults: dict, loaded: dict) -> dict:
    out = deepcopy(defaults)
    for key, value in loaded.items():
        if isinstance(out.get(key), dict) and isinstance(value, dict):
            out[key] = _merge(out[key], value)
        elif key in out and (out[key] is None or value is None or isinstance(value, type(out[key]))
                             or (isinstance(out[key], float) and isinstance(value, int))):
            out[key] = value
    return out


class SettingsFile:
    def __init__(self, path: Path | str | None = None):
        self.path = Path(path) if path else default_path()
        self.notice = ""
        self.data = self._load()

    def _load(self) -> dict:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return deepcopy(DEFAULTS)
        except OSError as exc:
            self.notice = f"The settings file could not be read ({exc.strerror}); defaults are used."
            return deepcopy(DEFAULTS)
        try:
            loaded = json.loads(text)
            if not isinstance(loaded, dict):
                raise ValueError("not a JSON object")
        except (ValueError, UnicodeDecodeError) as exc:
            aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
            os.replace(self.path, aside)
            self.notice = (f"The settings file was damaged ({exc}); it was kept as {aside.name} "
                           f"and the defaults are used.")
            return deepcopy(DEFAULTS)
        return _merge(DEFAULTS, loaded)

    def __getitem__(self, key):
        return self.data[key]

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".settings-", suffix=".json", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(self.data, fh, indent=2)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def remember_pair(self, target: str, draft: str | None) -> None:
        self.data["last_target"], self.data["last_draft"] = target, draft
        pair = {"target": target, "draft": draft}
        recent = [p for p in self.data["recent_pairs"] if p != pair]
        self.data["recent_pairs"] = [pair, *recent][:MAX_RECENT_PAIRS]
