"""How many threads llama.cpp runs: by default one per physical core, and one fewer for each CPU that
other programs keep busy, looked at again while a reply runs.

llama.cpp's threads wait for each other after every operation of a pass, so a thread that shares its
CPU with another program holds all of them up. Measured on this project's 2-core AMD EPYC (no SMT),
48 greedy tokens of the test model and 32 of the demo target, tokens per second, two runs each
(`tandem generate -m MODEL -p "Write a short story about a robot." -n 48 --temp 0 -t N --json`, beside
a Python loop that spins all or half of the time):

| beside it            | test model, 2 threads / 1 | demo target, 2 threads / 1 |
|----------------------|---------------------------|----------------------------|
| nothing              | 105–130 / 81–83           | 30 / 20–21                 |
| a loop, half a core  | 88–99 / 80–83             | 22–24 / 21                 |
| a loop, a whole core | 46 / 77–83                | 12–14 / 21                 |

So a whole busy CPU makes the second thread cost 0.55–0.65× of one thread's speed, and half a busy
CPU still leaves two threads ahead. (Telling libgomp to sleep rather than spin, OMP_WAIT_POLICY=passive,
made 2 threads slower everywhere: 39–47 idle, 54–63 beside a busy core.)

The default counts physical cores, as llama.cpp's own does (common.cpp, cpu_get_num_math): a core's
second hardware thread shares its arithmetic units and only adds another thread to wait for.

Others' load is the machine's busy CPU time less this process's, over the time since the last look
(psutil: /proc/stat on Linux, the same counters elsewhere). While this process decodes, others get less
CPU than they want (its threads spin while they wait): a whole busy CPU read 0.65–0.73 beside two
threads, so where every CPU was busy, others' share is scaled up by the threads' (OthersLoad). The
thresholds for one thread fewer and one more differ, so that the count does not swing between two.
A count set by the user (-t N, Settings ▸ Threads) is never changed.
"""
from __future__ import annotations

import os
import time
from typing import Callable, Sequence

import psutil

CHECK_S = 1.0            # a reply looks at the machine's load at most this often
DROP_AT = 0.6            # one thread fewer once others want this much of the CPUs the threads run on
ADD_AT = 0.5             # one more once this much of a CPU is free beyond the threads running
SATURATED = 0.9          # every CPU busy: others got a share of what they wanted (OthersLoad)


def physical_cores() -> int:
    """Cores, not hardware threads (os.cpu_count() where the OS does not say)."""
    return max(1, psutil.cpu_count(logical=False) or os.cpu_count() or 1)


def cpus() -> int:
    """Logical CPUs: what others' load is counted in."""
    return max(1, psutil.cpu_count(logical=True) or os.cpu_count() or 1)


class OthersLoad:
    """CPUs other programs would keep busy, from the machine's busy time less this process's since the
    last look."""

    def __init__(self):
        self._process = psutil.Process()
        self._last = self._read()

    def _read(self) -> tuple[float, float, float]:
        machine = psutil.cpu_times()
        idle = machine.idle + getattr(machine, "iowait", 0.0)
        # (Linux counts guest time inside user time as well: left out of the total so it counts once)
        total = sum(machine) - getattr(machine, "guest", 0.0) - getattr(machine, "guest_nice", 0.0)
        own = self._process.cpu_times()      # (with the children it waited for: the CPU probe's, at a load)
        return time.monotonic(), total - idle, own.user + own.system + own.children_user + own.children_system

    def __call__(self, threads: int, n_cpus: int) -> float | None:
        """CPUs other programs would keep busy, on average since the last call, while this process ran
        `threads` threads on `n_cpus`; None when too little time passed for the counters (ticks of
        10 ms) to say. Where every CPU was busy, others got only a share: the scheduler gives each
        runnable thread about the same, and this process's threads are runnable all the time they
        decode (they spin while they wait), so others wanted `threads` × their time ÷ ours."""
        now = self._read()
        wall = now[0] - self._last[0]
        if wall < 0.2:
            return None
        others = max(0.0, (now[1] - self._last[1] - (now[2] - self._last[2])) / wall)
        own = max(0.0, (now[2] - self._last[2]) / wall)
        self._last = now
        if others + own >= SATURATED * n_cpus and own > 0.1:
            return min(float(n_cpus), others * threads / own)
        return others


def fitting(current: int, most: int, others: float, n_cpus: int) -> int:
    """The thread count for `others` CPUs busy with other work, starting from `current` threads."""
    free = n_cpus - others
    if free <= current - DROP_AT:
        return max(1, min(most, int(free + 1 - DROP_AT)))
    if current < most and free >= current + ADD_AT:
        return max(1, min(most, int(free + 1 - ADD_AT)))
    return current


class ThreadCount:
    """The thread count of a pair's contexts. `most`: the count to start with and never exceed;
    `follow_load`: whether it may go down (and back up) as other programs use the CPUs."""

    def __init__(self, contexts: Sequence, most: int, follow_load: bool,
                 others: Callable[[int, int], float | None] | None = None, n_cpus: int | None = None):
        self.contexts = [c for c in contexts if c is not None]
        self.most = self.current = most
        self.follow_load = follow_load
        self._others = (others or OthersLoad()) if follow_load else None
        self._n_cpus = n_cpus or cpus()
        self.others: float | None = None     # CPUs others wanted at the last look
        self._checked = time.monotonic()

    def adjust(self, force: bool = False) -> int:
        """Look at the load if CHECK_S passed since the last look (or `force`), and set the count it
        calls for on every context. Returns the count in use."""
        if self._others is None or (not force and time.monotonic() - self._checked < CHECK_S):
            return self.current
        self._checked = time.monotonic()
        others = self._others(self.current, self._n_cpus)
        if others is None:
            return self.current
        self.others = others
        wanted = fitting(self.current, self.most, others, self._n_cpus)
        if wanted != self.current:
            for ctx in self.contexts:
                ctx.set_threads(wanted)
            self.current = wanted
        return self.current
