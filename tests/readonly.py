"""A folder that a child process really cannot write, even when the tests run as root.

The folder loses its write permission (chmod 555). A normal user's child is then refused by the
kernel. Root ignores permission bits through two capabilities, CAP_DAC_OVERRIDE and CAP_FOWNER: a
child started by root drops them (and CAP_DAC_READ_SEARCH) from its bounding set before it runs, so
after exec it is root without them and the kernel refuses its writes as it would any user's. Each
use checks that a write is refused, and skips, saying why, where that cannot be arranged."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

PR_CAPBSET_DROP = 24
ROOT_OVERRIDES = (1, 2, 3)          # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER


def _drop_root_overrides() -> None:          # runs in the child, between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in ROOT_OVERRIDES:
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"prctl(PR_CAPBSET_DROP, {cap})")


def run(cmd: list[str], env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `cmd` as an ordinary user would be, as far as file permissions go."""
    preexec = _drop_root_overrides if os.geteuid() == 0 else None
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, preexec_fn=preexec)


@contextmanager
def read_only(folder: Path) -> Iterator[Path]:
    """`folder` without write permission for the children `run` starts; restored afterwards."""
    mode = folder.stat().st_mode & 0o7777
    folder.chmod(0o555)
    try:
        probe = [sys.executable, "-c", f"open({str(folder / 'write-probe')!r}, 'w')"]
        try:
            refused = run(probe, dict(os.environ), timeout=60)
        except (OSError, subprocess.SubprocessError) as exc:      # the capabilities could not be dropped
            pytest.skip(f"running as root without the right to drop CAP_DAC_OVERRIDE ({exc}): "
                        f"no folder can be made read-only for a child")
        if refused.returncode == 0:
            pytest.skip("a child could still write into a chmod 555 folder: no read-only folder here")
        assert "PermissionError" in refused.stderr, refused.stderr
        yield folder
    finally:
        folder.chmod(mode)
