"""The commands' Ctrl-C handling (commands/interrupt.py), in a process of its own, with real signals."""
from __future__ import annotations

import signal
import subprocess
import sys

CHILD = """
import os, signal, sys, time
from desktop_app.commands.interrupt import Interrupt

def press():
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.2)                        # (Python runs the handler between two instructions)

with Interrupt(on_force=lambda: print("forced", flush=True)) as interrupt:
    press()
    print("noted", interrupt.pressed, flush=True)
if "again" in sys.argv:                    # the command has stopped because of it, and reports and exits
    press()
print("reported", flush=True)
"""


def run(*args: str) -> subprocess.CompletedProcess:
    # (as from a terminal: a job started in the background inherits Ctrl-C ignored, and keeps ignoring it)
    return subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, timeout=60,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def test_a_press_is_noted_and_one_after_the_command_stopped_is_ignored():
    """A press inside the block is only noted; once the command has left the block because of it, a second
    press (a user pressing twice while it reports and exits) is ignored, instead of breaking into its
    report or Python's exit with a KeyboardInterrupt traceback (seen once in CI, at the end of
    `tandem generate`)."""
    once = run()
    assert once.returncode == 0 and once.stdout.split() == ["noted", "1", "reported"], once
    twice = run("again")
    assert twice.returncode == 0, twice
    assert twice.stdout.split() == ["noted", "1", "reported"] and "Traceback" not in twice.stderr, twice
