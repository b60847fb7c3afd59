"""Running this very Tandem as a child process (the engine process, the doctor report): the same
interpreter and the same copy of the code, whatever the working directory, and from a frozen
bundle too (where the executable itself takes Tandem's arguments)."""
from __future__ import annotations

import os
import signal
import sys

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tandem_command(*args: str) -> list[str]:
    """The command line of `tandem ARGS...` for a child process."""
    if getattr(sys, "frozen", False):
        return [sys.executable, *args]
    return [sys.executable, "-m", "desktop_app", *args]


def child_environment() -> dict[str, str]:
    """This process's environment, with this copy of Tandem first on the import path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    return env


def signal_name(returncode: int) -> str | None:
    """The name of the signal that ended a child (SIGSEGV, ...), or None if it exited by itself."""
    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def exit_description(returncode: int) -> str:
    """How a child ended, in a few words: "killed by SIGSEGV", "exit code 3"."""
    name = signal_name(returncode)
    if name:
        return f"killed by {name}"
    return f"exit code {returncode}" + (f" (0x{returncode:08X})" if returncode > 0xFFFF else "")
