"""Folders the code under test cannot write, even when the tests run as root (as CI does).

Root writes anywhere because of its capabilities (CAP_DAC_OVERRIDE, CAP_FOWNER), not because of
permission bits. Two ways to make chmod bind root as it binds any user:
- in this process, `permissions_apply()` drops CAP_DAC_OVERRIDE from the calling thread's effective
  set (threads started meanwhile inherit it) and restores it afterwards;
- for a child, `run_as_user()` drops the overriding capabilities from its bounding set between fork
  and exec, and `read_only_for_children()` checks that a child's write is really refused, skipping
  the test, saying why, where that cannot be arranged.
Where the tests do not run as root, both do nothing: the bits already apply.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

CAP_DAC_OVERRIDE = 1
PR_CAPBSET_DROP = 24
ROOT_OVERRIDES = (1, 2, 3)          # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _set_override(on: bool) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    data = (_Data * 2)()
    if libc.capget(ctypes.byref(_Header(_LINUX_CAPABILITY_VERSION_3, 0)), data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    if on:
        data[0].effective |= 1 << CAP_DAC_OVERRIDE
    else:
        data[0].effective &= ~(1 << CAP_DAC_OVERRIDE)
    if libc.capset(ctypes.byref(_Header(_LINUX_CAPABILITY_VERSION_3, 0)), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


@contextlib.contextmanager
def permissions_apply():
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    if as_root:
        _set_override(False)
    try:
        yield
    finally:
        if as_root:
            _set_override(True)


def read_only(folder: Path) -> Path:
    """chmod a folder (and what is in it) read-only; returns it."""
    for path in [*folder.rglob("*"), folder]:
        mode = path.stat().st_mode
        path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return folder


def writable(folder: Path) -> None:
    """Undo read_only (so pytest can clean up)."""
    for path in [folder, *folder.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


def _drop_root_overrides() -> None:          # runs in the child, between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in ROOT_OVERRIDES:
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"prctl(PR_CAPBSET_DROP, {cap})")


def run_as_user(cmd: list[str], env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `cmd` as an ordinary user would be, as far as file permissions go."""
    preexec = _drop_root_overrides if os.geteuid() == 0 else None
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, preexec_fn=preexec)


@contextlib.contextmanager
def read_only_for_children(folder: Path) -> Iterator[Path]:
    """`folder` without write permission for the children `run_as_user` starts; restored afterwards."""
    mode = folder.stat().st_mode & 0o7777
    folder.chmod(0o555)
    try:
        probe = [sys.executable, "-c", f"open({str(folder / 'write-probe')!r}, 'w')"]
        try:
            refused = run_as_user(probe, dict(os.environ), timeout=60)
        except (OSError, subprocess.SubprocessError) as exc:      # the capabilities could not be dropped
            pytest.skip(f"running as root without the right to drop CAP_DAC_OVERRIDE ({exc}): "
                        f"no folder can be made read-only for a child")
        if refused.returncode == 0:
            pytest.skip("a child could still write into a chmod 555 folder: no read-only folder here")
        assert "PermissionError" in refused.stderr, refused.stderr
        yield folder
    finally:
        folder.chmod(mode)
