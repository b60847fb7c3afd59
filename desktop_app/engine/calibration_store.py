"""Verify-pass timings remembered per machine and target model, so that a load need not take them all.

Timing a verify pass of every batch size after loading (calibration.py) is most of a load on a slow
CPU (about 8 s of a 15.6 s load of the demo pair on a 2-core AVX2 machine), and one warm timing per
size scatters by 10-40 % between loads on a shared machine, which moves auto mode's choices
(docs/auto-mode.md, "Calibrations remembered across loads"). So the timings are kept here, each as a
ratio to the single-token passes timed beside it: the last KEEP of every batch size. calibration.py
prices each size at their median and decides which sizes a load times.

One file, `calibrations.json` in Tandem's cache folder (repack.cache_dir), keyed by the machine
(machine.machine_key: CPU, its flags, the llama.cpp build), the target file (name and size), the
load options that change how fast it runs and the way sizes are timed (METHOD). Only loads that run
on this CPU alone are remembered (`rememberable`): a GPU or an RPC server behind the same settings
can change without the key changing, and there the timings are quick anyway. Deleting the file
makes the next loads time every size again. A file that cannot be read counts as empty, one that
cannot be written is left as it is; two processes writing at once may lose one load's timings.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from desktop_app import machine
from desktop_app.counts import count
from desktop_app.engine.load_options import LoadOptions
from desktop_app.engine.repack import cache_dir
from desktop_app.json_file import write_atomic

FILE = "calibrations.json"
VERSION = 1
KEEP = 3                      # timings remembered per batch size
METHOD = "min-of-2-warm, each over a single pass beside it"   # how calibration.py times a size; part of
                                                              # the key, so a new way starts afresh
MAX_BATCH = 512               # larger sizes read back are damage, not timings
TARGETS_KEPT = 16             # keys kept (each llama.cpp upgrade or new thread count starts another)


@dataclass
class Remembered:
    """What earlier loads timed for one key."""

    loads: int = 0                                               # loads that added timings
    ratios: dict[int, list[float]] = field(default_factory=dict)  # batch size -> its last KEEP timings,
                                                                  # oldest first, each ÷ a single-token pass


def path() -> Path:
    return cache_dir() / FILE


def rememberable(options: LoadOptions) -> bool:
    """Whether a pair loaded with `options` runs on this CPU alone, so that the key says what it runs on."""
    return options.n_gpu_layers == 0 and not options.rpc_servers and not machine.llama_build()["gpu_offload"]


def key(model_path: str, options: LoadOptions) -> str:
    """What a verify pass's cost depends on: this machine and build, the target file, how it runs."""
    facts = {"machine": machine.machine_key(), "model": os.path.basename(model_path),
             "bytes": os.path.getsize(model_path), "threads": options.threads, "batch": options.n_batch,
             "repack": options.repack, "method": METHOD}
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]


def setup(options: LoadOptions) -> str:
    """The part of key() a person can tell apart, for the list of remembered targets: one file loaded
    two ways, or under two llama.cpp builds (a version and a digest of what it was built with), is
    remembered twice."""
    repack = {True: ", repacking on", False: ", repacking off"}.get(options.repack, "")
    build = machine.llama_build()
    digest = hashlib.sha256(build["system_info"].encode()).hexdigest()[:6]
    return (f"{count(options.threads, 'thread')}, batch {options.n_batch}{repack}, "
            f"llama-cpp-python {build['version']} build {digest}")


MISSING, DAMAGED, NEWER, OK = "missing", "damaged", "newer", "ok"


def _read() -> tuple[str, dict]:
    """(state, contents): MISSING or DAMAGED (contents empty: the next load replaces it), NEWER (a
    newer Tandem wrote it: not read, not overwritten) or OK."""
    try:
        data = json.loads(path().read_text(encoding="utf-8"))
    except FileNotFoundError:
        return MISSING, {}
    except (OSError, ValueError, RecursionError):
        return DAMAGED, {}
    if not isinstance(data, dict) or not isinstance(data.get("targets"), dict):
        return DAMAGED, {}
    version = data.get("version")
    if version != VERSION:
        return (NEWER if isinstance(version, int) and version > VERSION else DAMAGED), {}
    return OK, data


def plausible(k: int, ratio: float) -> float:
    """A timed ratio of a pass over `k` tokens, brought within what such a pass can cost: at least one
    single-token pass and at most `k` of them (CostModel.verify_cost prices so too). Beyond, the pass or
    the single passes beside it were slowed by other work: a load beside other jobs had remembered a
    3-token check at 8.6 and 21 single passes and a 9-token one at 31, where they cost 2.1 and about
    5, and the "Does it pay?" curve dipped to 0.3x at γ 2."""
    return min(max(ratio, 1.0), float(k))


def _ratio(k: int, v) -> float | None:
    """A remembered ratio read back (plausible), or None where it cannot be one."""
    if type(v) not in (int, float) or not 2 <= k <= MAX_BATCH:
        return None
    try:
        v = float(v)
    except OverflowError:
        return None
    return plausible(k, v) if math.isfinite(v) and v > 0 else None


def remembered(key: str) -> Remembered:
    """The timings remembered for `key` (none where the file or the entry is missing or damaged)."""
    return _parse(_read()[1], key)


def _parse(data: dict, key: str) -> Remembered:
    entry = data.get("targets", {}).get(key)
    if not isinstance(entry, dict) or not isinstance(entry.get("sizes"), dict):
        return Remembered()
    out = Remembered(loads=entry["loads"] if type(entry.get("loads")) is int else 0)
    for k, values in entry["sizes"].items():
        try:
            k = int(k)
        except ValueError:
            continue
        values = [r for r in (_ratio(k, v) for v in values) if r is not None] if isinstance(values, list) else []
        if values:
            out.ratios[k] = values[-KEEP:]
    return out


def summary() -> tuple[str, list[dict]]:
    """For `tandem doctor`: the file's state (MISSING, DAMAGED, NEWER, OK) and every remembered target
    (model file name, how it was loaded, loads that added timings, when), the latest first."""
    state, data = _read()
    return state, [{"model": e.get("model", ""), "setup": e.get("setup", ""), "loads": e.get("loads", 0),
                    "updated": e.get("updated", "")}
                   for e in reversed(list(data.get("targets", {}).values())) if isinstance(e, dict)]


def remember(key: str, ratios: Mapping[int, float], model_name: str = "", setup: str = "") -> bool:
    """Add one load's timings ({batch size: seconds ÷ its single-token pass}) to `key`'s; each size
    keeps its last KEEP. False where the file could not be written (or a newer Tandem owns it)."""
    state, data = _read()
    if state == NEWER:
        return False
    data = data or {"version": VERSION, "targets": {}}
    known = _parse(data, key)
    for k, v in ratios.items():
        r = _ratio(int(k), float(v))
        if r is not None:
            known.ratios[int(k)] = [*known.ratios.get(int(k), []), round(r, 4)][-KEEP:]
    # The file keeps its keys oldest first: this one goes last, and beyond TARGETS_KEPT the oldest go.
    others = [(k, e) for k, e in data["targets"].items() if k != key and isinstance(e, dict)]
    data["targets"] = dict(others[max(0, len(others) - (TARGETS_KEPT - 1)):])
    data["targets"][key] = {"model": model_name, "setup": setup, "updated": time.strftime("%Y-%m-%d %H:%M:%S"),
                            "loads": known.loads + 1, "sizes": {str(k): v for k, v in sorted(known.ratios.items())}}
    try:
        write_atomic(path(), data, indent=1)
    except OSError:
        return False
    return True
