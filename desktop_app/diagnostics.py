"""The facts a bug report needs: versions, CPU, llama.cpp build, weight repacking, folders.

`gather()` collects them as one JSON-able document (it loads llama.cpp, and may run the CPU probe);
`format_text()` renders such a document as compact text, without loading anything: the System
dialog runs `tandem doctor --json` in a child process and renders its output with it. No Qt here.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import sys
from pathlib import Path

from desktop_app import __version__, bundle
from desktop_app.counts import count

REPACK_STATES = ("on", "off", "not probed")
PACKAGES = ("PySide6-Essentials", "llama-cpp-python", "numpy", "platformdirs", "Jinja2", "gguf", "pyqtgraph",
            "Pygments", "psutil")      # pyproject.toml's dependencies, in its order (three were left out)


def _packages() -> dict[str, str | None]:
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _folder(path: Path) -> dict:
    """A folder, whether it exists, and the free space where it is (or would be created)."""
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        free = None
    return {"path": str(path), "exists": path.is_dir(), "free_bytes": free}


def _folders() -> dict:
    from desktop_app.chat.history import default_path as history_path
    from desktop_app.chat.settings_file import default_path as settings_path
    from desktop_app.models.store import models_dir

    folders = {"models": _folder(models_dir()), "data": _folder(history_path().parent),
               "config": _folder(settings_path().parent)}
    try:
        from desktop_app.engine.repack import cache_dir
        folders["cache"] = _folder(cache_dir())
    except Exception:  # reported in the llama_cpp section
        pass
    return folders


def _cpu() -> dict:
    from desktop_app import machine
    from desktop_app.engine.threads import physical_cores

    return {"model": machine.cpu_model(), "physical_cores": physical_cores(), "logical_cores": machine.logical_cores(),
            "flags": list(machine.cpu_flags())}


def _llama() -> dict:
    from desktop_app import machine

    return machine.llama_build()


def _window_setting() -> str | None:
    """The window's Weight repacking setting, read without touching the settings file."""
    from desktop_app.chat.settings_file import default_path

    try:
        value = json.loads(default_path().read_text(encoding="utf-8"))["loading"]["repack"]
        return value if isinstance(value, str) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _repack(no_repack: bool, probe: bool, reprobe: bool) -> dict:
    from desktop_app.engine import repack

    if reprobe:
        repack.forget()
    verdict = repack.decide(probe=False, respect_env=False)       # the machine's own, if remembered
    probed_now = verdict is None and probe
    if probed_now:                                                # (even under --no-repack: --reprobe)
        verdict = repack.decide(respect_env=False)
    decision = repack.decide(False if no_repack else None, probe=False)     # what loading does now
    if probed_now and decision is not None and decision.source == repack.REMEMBERED:
        decision = verdict                                        # (with its notice, if it just failed)
    record = repack.remembered()
    return {"state": "not probed" if decision is None else ("on" if decision.enabled else "off"),
            "source": decision.source if decision else None,
            "reason": decision.reason if decision else "no CPU probe has run on this machine and build yet",
            "notice": decision.notice if decision else "", "probed_now": probed_now,
            "remembered": record, "verdicts_file": str(repack.verdicts_path()),
            "overrides": {"no_repack_flag": no_repack, "env": os.environ.get(repack.NO_REPACK_ENV),
                          "window_setting": _window_setting()}}


def _speed_timings() -> dict:
    from desktop_app.engine import calibration_store

    state, targets = calibration_store.summary()
    return {"file": str(calibration_store.path()), "state": state, "targets": targets}


def _failed(exc: BaseException) -> dict:
    return {"error": f"{type(exc).__name__}: {exc}"}


def gather(no_repack: bool = False, probe: bool = True, reprobe: bool = False) -> dict:
    """Every fact, each section on its own: one that fails carries an "error" instead."""
    doc: dict = {"ok": True, "tandem": {"version": __version__, "bundle": bundle.info()},
                 "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                            "executable": sys.executable},
                 "platform": {"system": platform.system(), "release": platform.release(),
                              "machine": platform.machine(), "description": platform.platform()},
                 "packages": _packages()}
    for name, collect in (("cpu", _cpu), ("llama_cpp", _llama), ("repack", lambda: _repack(no_repack, probe, reprobe)),
                          ("folders", _folders), ("speed_timings", _speed_timings)):
        try:
            doc[name] = collect()
        except Exception as exc:  # a broken llama.cpp install is exactly what a report must show
            doc[name] = _failed(exc)
    if "error" in doc["repack"]:
        doc["repack"].update(state="not probed", reason=f"not decided ({doc['repack']['error']})")
    return doc


# --- text -------------------------------------------------------------------------------------------


def _size(n: int | None) -> str:
    if n is None:
        return "free space unknown"
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:.1f} {unit} free"
    return f"{n} bytes free"


def _features(values: dict[str, str]) -> str:
    return " ".join(k if v == "1" else f"{k}={v}" for k, v in values.items() if v != "0") or "-"


def _yes(flag) -> str:
    return "?" if flag is None else ("yes" if flag else "no")


def format_text(doc: dict) -> str:
    """The doctor report as compact text (the first thing to paste into a bug report)."""
    py, plat, cpu = doc.get("python", {}), doc.get("platform", {}), doc.get("cpu", {})
    lines = [f"Tandem {doc.get('tandem', {}).get('version', '?')} · Python {py.get('version', '?')} "
             f"({py.get('implementation', '?')}) · {plat.get('description', '?')}"]
    record = doc.get("tandem", {}).get("bundle")
    if record:
        lines.append(f"Bundle: built {record.get('built', '?')} · {bundle.describe(record)}")
    flags = cpu.get("flags", [])
    amx = "AMX" if any(f.startswith("amx") for f in flags) else "no AMX"
    lines.append(f"CPU: unknown: {cpu['error']}" if "error" in cpu else
                 f"CPU: {cpu.get('model', '?')} · {cpu.get('physical_cores', '?')} cores, "
                 f"{cpu.get('logical_cores', '?')} logical · "
                 f"{' '.join(flags) or 'flags unknown'} · {amx}")
    llama = doc.get("llama_cpp", {})
    if "error" in llama:
        lines.append(f"llama.cpp: not loaded: {llama['error']}")
    else:
        builds = " · ".join(f"{name or 'build'}: {_features(values)}" for name, values in llama.get("backends", {}).items())
        lines.append(f"llama.cpp: llama-cpp-python {llama.get('version', '?')} · {builds} · "
                     f"GPU offload: {_yes(llama.get('gpu_offload'))} · RPC: {_yes(llama.get('rpc'))}")
    rp = doc.get("repack", {})
    how = {"remembered": "remembered", "probe": "probed now"}.get(rp.get("source"), "")
    lines.append(f"Weight repacking: {rp.get('state', '?')}" + (f" ({how})" if how else "") + f": {rp.get('reason', '')}")
    ov = rp.get("overrides")
    if ov:
        lines.append(f"  overrides: --no-repack {_yes(ov.get('no_repack_flag'))} · TANDEM_NO_REPACK "
                     f"{ov.get('env') if ov.get('env') is not None else 'unset'} · window setting "
                     f"{ov.get('window_setting') or 'auto'}")
        window = {"off": "off", "on": "on"}.get(ov.get("window_setting") or "")
        if window and window != rp.get("state") and not (window == "on" and rp.get("source") == "override"):
            lines.append(f"  the window loads models with repacking {window} (its Weight repacking setting)")
    remembered = rp.get("remembered")
    if remembered and rp.get("source") in ("override", "forced"):
        lines.append(f"  remembered probe: {remembered.get('outcome')} {remembered.get('probed_at', '')}: "
                     f"{remembered.get('detail', '')}")
    packages = doc.get("packages", {})
    lines.append("Packages: " + " · ".join(f"{k} {v or 'missing'}" for k, v in packages.items()))
    folders = doc.get("folders", {})
    if "error" in folders:
        lines.append(f"Folders: unknown: {folders['error']}")
    else:
        lines.append("Folders:")
        width = max((len(k) for k in folders), default=0)
        for name, f in folders.items():
            lines.append(f"  {name:<{width}}  {f['path']}  ({'' if f['exists'] else 'missing; '}{_size(f['free_bytes'])})")
    timings = doc.get("speed_timings", {})
    if "error" in timings:
        lines.append(f"Speed timings: unknown: {timings['error']}")
    elif timings:
        targets = timings.get("targets", [])
        remembered = [f"{t['model']} ({str(t['setup']) + '; ' if t.get('setup') else ''}"
                      f"{count(t['loads'], 'load')}, last {t['updated']})" for t in targets[:3]]
        more = f" and {len(targets) - 3} more" if len(targets) > 3 else ""
        state = timings.get("state")
        lines.append("Speed timings: " + {
            "missing": "none remembered yet",
            "damaged": f"{timings['file']} is damaged; the next load replaces it",
            "newer": f"{timings['file']} was written by a newer Tandem; not used (delete it to measure here)",
        }.get(state, ("remembered for " + ", ".join(remembered) + more if remembered else "none remembered")
              + f" in {timings['file']} (delete it to measure afresh)"))
    return "\n".join(lines)
