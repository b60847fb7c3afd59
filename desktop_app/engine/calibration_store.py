"""Verify-pass timings remembered per machine and target model, so that later loads need not take them.

Timing a verify pass of every batch size after loading (calibration.py) is most of a load on a slow
CPU (11.8 s of 15.1 s for the demo target on a 2-core AVX2 machine), and one warm timing per size
scatters by 10-40 % between loads on a shared machine, which moves auto mode's choices
(docs/auto-mode.md, "Calibration noise"). So each load's timings are kept here as ratios to the
single-token pass timed with them, and calibration prices each size at the median ratio of the loads
remembered: the first few loads time every size, later ones only single-token passes.

One file, `calibrations.json` in Tandem's cache folder (repack.cache_dir), keyed by the machine
(machine.machine_key: CPU, its flags, the llama.cpp build), the target file (name and size) and the
load options that change how fast it runs. Deleting the file makes the next loads time every size
again. A file that cannot be read counts as empty; one that cannot be written is left as it is.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path

from desktop_app import machine
from desktop_app.engine.load_options import LoadOptions
from desktop_app.engine.repack import cache_dir
from desktop_app.json_file import write_atomic

FILE = "calibrations.json"
KEEP = 3                       # loads remembered per key (calibration.REMEMBERED_ENOUGH of them stop the timing)


def path() -> Path:
    return cache_dir() / FILE


def key(model_path: str, options: LoadOptions) -> str:
    """What a verify pass's cost depends on: this machine and build, the target file, how it runs."""
    facts = {"machine": machine.machine_key(), "model": os.path.basename(model_path),
             "bytes": os.path.getsize(model_path), "gpu_layers": options.n_gpu_layers,
             "threads": options.n_threads, "batch": options.n_batch, "repack": options.repack,
             "rpc": list(options.rpc_servers)}
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]


def _read() -> dict:
    try:
        data = json.loads(path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"version": 1, "targets": {}}
    if not isinstance(data, dict) or not isinstance(data.get("targets"), dict):
        return {"version": 1, "targets": {}}
    return data


def remembered(key: str) -> list[dict[int, float]]:
    """The remembered loads for `key`, oldest first: {batch size: seconds ÷ a single-token pass's}."""
    entry = _read()["targets"].get(key)
    loads = entry.get("loads") if isinstance(entry, dict) else None
    out = []
    for load in loads if isinstance(loads, list) else []:
        try:
            ratios = {int(k): float(v) for k, v in load.items()}
        except (AttributeError, TypeError, ValueError):
            continue
        if ratios and all(v > 0 for v in ratios.values()):
            out.append(ratios)
    return out[-KEEP:]


def remember(key: str, ratios: Mapping[int, float], model_name: str = "") -> bool:
    """Add one load's ratios to `key`'s (the oldest beyond KEEP are dropped). False where the file
    could not be written."""
    data = _read()
    loads = [*remembered(key), {int(k): round(float(v), 4) for k, v in ratios.items()}][-KEEP:]
    data["version"] = 1
    data["targets"][key] = {"model": model_name, "updated": time.strftime("%Y-%m-%d %H:%M:%S"),
                            "loads": [{str(k): v for k, v in sorted(load.items())} for load in loads]}
    try:
        write_atomic(path(), data, indent=1)
    except OSError:
        return False
    return True
