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
if "later" in sys.argv:                    # a command that goes on (a press just after its last check)
    with Interrupt() as later:             # stops at its next block
        press()
        print("later", later.pressed, flush=True)
print("reported", flush=True)
"""


def run(*args: str, inherited=signal.SIG_DFL) -> subprocess.CompletedProcess:
    # (as from a terminal: a job started in the background inherits Ctrl-C ignored, and keeps ignoring it)
    return subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, timeout=60,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, inherited))


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
    # the ignore is this module's own: a later block notes Ctrl-C again (one set by the job is kept: see
    # test_cli_generate's presses, run as `.ci/run` runs them)
    later = run("again", "later")
    assert later.stdout.split() == ["noted", "1", "later", "1", "reported"], later
    ignored = run("later", inherited=signal.SIG_IGN)       # a job started with Ctrl-C ignored
    assert ignored.stdout.split() == ["noted", "0", "later", "0", "reported"], ignored
