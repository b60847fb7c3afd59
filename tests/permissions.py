"""Folders this process cannot write, even when the tests run as root (as CI does).

Root writes anywhere because of its CAP_DAC_OVERRIDE capability, not because of permission bits.
`permissions_apply()` drops that capability from the calling thread's effective set (threads started
meanwhile inherit it) and restores it afterwards, so a folder made read-only with chmod is read-only
for the code under test, as it is for any user. Elsewhere it does nothing: the bits already apply.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import stat
from pathlib import Path

CAP_DAC_OVERRIDE = 1
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
