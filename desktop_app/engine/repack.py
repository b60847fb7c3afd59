"""Weight repacking: on where it works, off where llama.cpp's repacked kernels crash the process.

llama.cpp repacks quantised weights at load time into layouts for faster CPU kernels (its "extra
buffer types": CPU_REPACK with AVX2/AVX-512/NEON, AMX on Intel Xeons with AMX). On virtualised Intel
CPUs with AMX (GCP C4, VMware, CI runners) the AMX path faults on the first llama_decode (llama.cpp
issue #20824) and the whole process dies without a message. Keeping AMX out of the process avoids
it (engine/amx.py), and so does loading with repacking off; generation stays exact either way.

So before the first model is used on a machine, a child process loads a tiny synthetic model
(probe_model.py) with repacking on and decodes with it (repack_probe.py). If the child dies, times
out or computes garbage, models load with repacking off; except on a CPU with AMX, where a second
child tries again with AMX kept out (engine/amx.py): if that one passes, models load repacked for
the AVX2/AVX-512 kernels, with AMX kept out of the process that loads them. The verdict is
remembered per CPU (model and flags) and llama.cpp build in `repack.json` in Tandem's cache folder
(TANDEM_CACHE_DIR, else the user cache folder), so the probe runs once per machine and build, and
the user is told once.

Precedence: off by --no-repack, TANDEM_NO_REPACK=1 or the setting "off" > on by the setting "on" >
the remembered verdict > a new probe.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from platformdirs import user_cache_dir

from desktop_app import APP_NAME, machine
from desktop_app.child import child_environment, exit_description, tandem_command
from desktop_app.engine import amx
from desktop_app.engine.probe_model import probe_model_path
from desktop_app.json_file import write_atomic

log = logging.getLogger(__name__)
CACHE_DIR_ENV = "TANDEM_CACHE_DIR"
NO_REPACK_ENV = "TANDEM_NO_REPACK"
VERDICTS_FILE = "repack.json"
PROBE_TIMEOUT_S = 60.0
ISSUE = "llama.cpp issue #20824"
HOW_TO_CHANGE = ("`tandem doctor --reprobe` probes again; Settings → Loading → Weight repacking: On forces it on "
                 "(at the risk of that crash)")
# Probe outcomes. Only "passed" turns repacking on. "crashed" and "failed" are verdicts on repacked
# weights and are remembered; "timeout" (a busy machine, two first runs at once) and "unavailable"
# (the probe itself could not run, or died before it tried repacked weights) are no verdict: repacking
# stays off in this process, nothing is remembered, the next process tries again.
PASSED, CRASHED, FAILED, TIMEOUT, UNAVAILABLE = "passed", "crashed", "failed", "timeout", "unavailable"
NO_VERDICT = (TIMEOUT, UNAVAILABLE)
PROBE_ARG = "--repack-probe"           # cli.main hands these command lines to repack_probe.main
LOCK_FILE = "repack.lock"
# Where a decision came from.
OVERRIDE, FORCED, REMEMBERED, PROBED = "override", "forced", "remembered", "probe"
TOO_LATE = ("AMX, which faults on this CPU, was in use in this process before it could be kept out; start "
            "Tandem again to load repacked weights")


@dataclass(frozen=True)
class RepackDecision:
    """Whether models load with repacked weights, and why. `notice` is non-empty only when the user
    must be told now: the probe has just failed on this machine."""

    enabled: bool
    reason: str
    notice: str = ""
    source: str = PROBED          # override, forced, remembered or probe
    amx: bool = True              # False: repacked only with AMX kept out (it faults here; engine/amx.py)


@dataclass(frozen=True)
class ProbeResult:
    outcome: str                   # passed, crashed, failed, timeout, unavailable
    detail: str                    # one line: what happened
    seconds: float
    info: dict                     # from a passed probe: buffers and kernels used


def cache_dir() -> Path:
    override = os.environ.get(CACHE_DIR_ENV)
    return Path(override) if override else Path(user_cache_dir(APP_NAME, appauthor=False))


def verdicts_path() -> Path:
    return cache_dir() / VERDICTS_FILE


def env_forbids_repack() -> bool:
    return os.environ.get(NO_REPACK_ENV, "").strip().lower() in ("1", "true", "yes", "on")


# --- the probe ------------------------------------------------------------------------------------


def probe_threads() -> int:
    """More than one thread, so that worker threads run the kernels too (AMX tile permission is per thread)."""
    return min(4, max(2, machine.logical_cores()))


def probe_command(model: Path) -> list[str]:
    """The child process that evaluates repacked weights (tests swap it for one that crashes)."""
    return tandem_command(PROBE_ARG, os.fspath(model), str(probe_threads()))


def _steps(stderr: str) -> list[str]:
    return [line[len("step: "):] for line in stderr.splitlines() if line.startswith("step: ")]


def _last_step(stderr: str) -> str:
    steps = _steps(stderr)
    return f" while {steps[-1]}" if steps else ""


def _last_message(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("step: ")]
    return lines[-1] if lines else ""


def run_probe(timeout: float | None = None, with_amx: bool = True) -> ProbeResult:
    """Run the probe child once (within `timeout`, default PROBE_TIMEOUT_S) and classify how it ended.
    `with_amx=False`: the child runs with AMX kept out (amx.command)."""
    timeout = PROBE_TIMEOUT_S if timeout is None else timeout
    from desktop_app.engine.repack_probe import EXIT_UNAVAILABLE

    t0 = time.monotonic()
    scratch = None
    try:
        try:
            model = probe_model_path(cache_dir())
        except OSError:                   # a cache folder we cannot write: probe from a scratch folder
            scratch = tempfile.mkdtemp(prefix="tandem-probe-")
            model = probe_model_path(Path(scratch))
        command = probe_command(model) if with_amx else amx.command(probe_command(model))
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              env=child_environment(), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return ProbeResult(TIMEOUT, f"the probe did not finish within {timeout:.0f} s{_last_step(stderr)}",
                           time.monotonic() - t0, {})
    except Exception as exc:  # gguf missing, a full disk, no Python to start: no verdict
        return ProbeResult(UNAVAILABLE, f"the probe could not start ({type(exc).__name__}: {exc})", 0.0, {})
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    seconds = time.monotonic() - t0
    if proc.returncode == 0:
        try:
            info = json.loads(proc.stdout.strip().splitlines()[-1])
            info.pop("ok")
            return ProbeResult(PASSED, "repacked weights evaluate correctly", seconds, info)
        except (ValueError, IndexError, KeyError, AttributeError):
            return ProbeResult(UNAVAILABLE, "the probe gave no report", seconds, {})
    message = _last_message(proc.stderr)
    if proc.returncode == EXIT_UNAVAILABLE:
        return ProbeResult(UNAVAILABLE, message or "the probe could not run", seconds, {})
    if proc.returncode < 0 or proc.returncode > 0xFFFF:      # a signal (POSIX) or an exception code (Windows)
        detail = f"the probe process was {exit_description(proc.returncode)}{_last_step(proc.stderr)}"
        if not any("repacked" in step for step in _steps(proc.stderr)):
            # It died before it tried repacked weights (a build for another CPU, the OOM killer):
            # whatever it was, it says nothing about repacking.
            return ProbeResult(UNAVAILABLE, detail, seconds, {})
        return ProbeResult(CRASHED, detail, seconds, {})
    return ProbeResult(FAILED, message or f"the probe ended with {exit_description(proc.returncode)}", seconds, {})


# --- remembered verdicts --------------------------------------------------------------------------


def _read_verdicts(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) and isinstance(data.get("machines"), dict) else {"machines": {}}
    except (OSError, ValueError):
        return {"machines": {}}


def remembered(key: str | None = None) -> dict | None:
    """The remembered verdict for this machine and build, or None. A failure remembered before the
    probe tried again without AMX is no verdict on a CPU with AMX: it is probed again."""
    record = _read_verdicts(verdicts_path())["machines"].get(key or machine.machine_key())
    if not isinstance(record, dict) or not isinstance(record.get("enabled"), bool):
        return None
    if not record["enabled"] and "amx" not in record and amx.possible():
        return None
    return record


def _known(key: str) -> dict | None:
    """This machine's verdict: remembered, or kept by this process where the cache folder took none."""
    return remembered(key) or _unsaved.get((str(verdicts_path()), key))


def forget() -> None:
    """Drop this machine's remembered verdict (the next decision probes again)."""
    path = verdicts_path()
    data = _read_verdicts(path)
    if data["machines"].pop(machine.machine_key(), None) is not None:
        write_atomic(path, data)
    _unsaved.clear()


def _record(result: ProbeResult, facts: dict, with_amx: bool = True) -> dict:
    return {"enabled": result.outcome == PASSED, "amx": with_amx, "outcome": result.outcome, "detail": result.detail,
            "seconds": round(result.seconds, 3), "probed_at": time.strftime("%Y-%m-%d %H:%M:%S"),
            "info": result.info, "machine": facts}


def _remember(key: str, record: dict) -> bool:
    path = verdicts_path()
    data = _read_verdicts(path)
    data["version"] = 1
    data["machines"][key] = record
    try:
        write_atomic(path, data)
        return True
    except OSError:
        return False


# --- the decision ---------------------------------------------------------------------------------


def reason_for(record: dict) -> str:
    """One line on a verdict, for the decision and `tandem doctor`."""
    when = f"probed {record.get('probed_at', '?')}"
    if record["enabled"]:
        kernels = ", ".join(record.get("info", {}).get("kernels", [])) or "no weights repacked on this CPU"
        if record.get("amx") is False:
            return f"the CPU probe passed with AMX kept out ({kernels}; {when}): {record.get('detail', '')}"
        return f"the CPU probe passed ({kernels}; {when})"
    if record.get("outcome") in NO_VERDICT:
        return f"off for now: the CPU probe gave no verdict ({record.get('detail', '')})"
    return f"the CPU probe failed: {record.get('detail', '')} ({when}; {ISSUE})"


def notice_for(record: dict) -> str:
    return (f"Weight repacking is off on this machine: llama.cpp failed while evaluating repacked weights in a test "
            f"process ({record.get('detail', '')}). This is a known fault on virtualised Intel CPUs with AMX "
            f"({ISSUE}). Models load without repacking: the output is the same, prompt processing may be slower. "
            f"Tandem remembers this; {HOW_TO_CHANGE}.")


_lock = threading.Lock()
_unsaved: dict[tuple[str, str], dict] = {}     # verdicts the cache folder would not take, for this process


def decide(override: bool | None = None, probe: bool = True, respect_env: bool = True) -> RepackDecision | None:
    """Whether to load models with repacked weights on this machine.

    override: False (--no-repack, the setting "off") or True (the setting "on"), None to decide.
    With probe=False, returns None where nothing is remembered instead of probing. respect_env=False
    leaves TANDEM_NO_REPACK out (`tandem doctor` asks for the machine's own verdict)."""
    if respect_env and env_forbids_repack():
        return RepackDecision(False, f"turned off by {NO_REPACK_ENV}={os.environ[NO_REPACK_ENV]}", source=OVERRIDE)
    if override is False:
        return RepackDecision(False, "turned off (--no-repack, or the setting Weight repacking: Off)", source=OVERRIDE)
    if override is True:
        record = _known(machine.machine_key())
        return RepackDecision(True, "forced on (the setting Weight repacking: On)", source=FORCED,
                              amx=record is None or record.get("amx", True))
    with _lock:
        facts = machine.machine_facts()
        key = machine.machine_key(facts)
        record = _known(key)
        if record is not None:
            return _remembered_decision(record)
        if not probe:
            return None
        with _machine_lock():                    # another Tandem probing now: wait for its verdict
            record = _known(key)
            if record is not None:
                return _remembered_decision(record)
            result, with_amx = _probe_with_and_without_amx()
            record = _record(result, facts, with_amx)
            if result.outcome in NO_VERDICT or not _remember(key, record):    # try again in the next process
                _unsaved[(str(verdicts_path()), key)] = record
        notice = notice_for(record) if result.outcome not in (PASSED, *NO_VERDICT) else ""
        return RepackDecision(record["enabled"], reason_for(record), notice, PROBED, with_amx)


def _remembered_decision(record: dict) -> RepackDecision:
    return RepackDecision(record["enabled"], reason_for(record), source=REMEMBERED, amx=record.get("amx", True))


def _probe_with_and_without_amx() -> tuple[ProbeResult, bool]:
    """The probe; where repacked weights fail on a CPU with AMX, the probe again with AMX kept out.
    Returns the verdict and whether it holds with AMX. (From a process under amx's filter, where
    this one's verdict was forgotten, the probe child inherits the filter: its verdict is one without
    AMX, whatever AMX would do.)"""
    result = run_probe()
    if amx.kept_out_here():
        return result, False
    if result.outcome not in (CRASHED, FAILED) or not amx.possible():
        return result, True
    second = run_probe(with_amx=False)
    if second.outcome != PASSED:
        return result, True
    return ProbeResult(PASSED, f"with AMX, {result.detail} ({ISSUE})", result.seconds + second.seconds,
                       second.info), False


def use_extra_bufts(enabled: bool) -> bool:
    """Whether a model loads now with llama.cpp's repacked layouts, repacking being `enabled`. Where
    this machine's verdict holds only with AMX kept out, AMX is kept out of this process first,
    whether or not this model is repacked (llama.cpp lists its layouts once, at a process's first
    model or first decode: amx.keep_out); where it could not be, without repacking."""
    record = _known(machine.machine_key())
    if record is None or record.get("amx", True):
        return enabled
    kept_out = amx.keep_out()
    if enabled and not kept_out:
        log.warning("repacking off: %s", TOO_LATE)
    return enabled and kept_out


def in_this_process(decision: RepackDecision) -> RepackDecision:
    """`decision` as it holds for a load in this process (use_extra_bufts): off, saying why, where AMX
    was in use here before it could be kept out."""
    if not decision.enabled or use_extra_bufts(True):
        return decision
    return replace(decision, enabled=False, reason=f"off in this process: {TOO_LATE} ({decision.reason})")


def llama_cpp_tool(tool: list[str], off: tuple[str, ...] = ("--no-repack",)) -> list[str]:
    """The command line that makes one of llama.cpp's own tools (llama-server, llama-speculative-simple;
    `tool`, its path and arguments) load as Tandem does on this machine: with `off` added where
    repacking is off (llama-bench spells it `--repack 0`), under amx.command where it is on with AMX
    kept out. Without that they crash where repacked weights fault (llama-server died on its first
    decode on an Intel Xeon with AMX), and elsewhere a comparison would not be like with like."""
    decision = decide()
    if not decision.enabled:
        return [*tool, *off]
    return tool if decision.amx else amx.command(tool)


@contextlib.contextmanager
def _machine_lock():
    """One probe at a time on this machine (an advisory lock file in the cache folder, POSIX); where the
    folder cannot take it, no lock: at worst two probes run."""
    try:
        import fcntl

        cache_dir().mkdir(parents=True, exist_ok=True)
        fh = open(cache_dir() / LOCK_FILE, "a")
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield
    finally:
        fh.close()
