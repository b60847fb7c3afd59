"""How many threads llama.cpp runs: by default one per performance core, and fewer while other work
keeps the CPUs busy, looked at again every second of a reply.

llama.cpp's threads wait for each other after every operation of a pass, so a thread that shares its
CPU with other work holds all of them up. Measured on this project's 2-core AMD EPYC (no SMT), 48
greedy tokens of the test model and 32 of the demo target, tokens per second, two runs each
(`tandem generate -m MODEL -p "Write a short story about a robot." -n 48 --temp 0 -t N --json`, beside
a Python loop that spins all or half of the time):

| beside it            | test model, 2 threads / 1 | demo target, 2 threads / 1 |
|----------------------|---------------------------|----------------------------|
| nothing              | 105–130 / 81–83           | 30 / 20–21                 |
| a loop, half a CPU   | 88–99 / 80–83             | 22–24 / 21                 |
| a loop, a whole CPU  | 46 / 77–83                | 12–14 / 21                 |

So a whole busy CPU makes the second thread cost 0.55–0.65× of one thread's speed, while beside half
a busy CPU two threads are still 1.05–1.2× ahead: the count goes down for the one, and the other sits
near the edge (either count is within a tenth of the best there). (Telling libgomp to sleep rather
than spin, OMP_WAIT_POLICY=passive, made 2 threads slower everywhere: 39–47 idle, 54–63 beside a busy
CPU.)

The count to start from is llama.cpp's own default (common.cpp, cpu_get_num_math): physical cores, as
a core's second hardware thread shares its arithmetic units; on macOS the performance cores, and on
Linux with Intel's hybrid cores the P-cores, since every thread waits for the slowest; never more than
the CPUs this process may run on. (Windows' hybrid cores are all counted: psutil cannot tell them.)

Other work is the busy time of the CPUs this process may run on, less this process's own (and its
waited-for children's: the CPU probe a first load runs), over the last half second or so: a sampler
thread keeps the counters' recent readings, so a reply that starts after a long idle time looks at
the last moments, not the whole idle time. While this process decodes, other work gets less CPU than
it wants (its threads spin while they wait): a whole busy CPU read 0.65–0.73 beside two threads, so
where every CPU was busy, others' share is scaled by the threads' (OthersLoad). A look's reading
depends on the count it was taken at, so `fitting` works out what other work wants from it and
chooses the most threads whose own look would not take one away again; one more than now only with a
margin to spare, so that the count does not swing between two (a program using half a CPU made it
swing every second, a review found). Only two CPUs were measured: on more, the rule is the same
arithmetic, untried. The window's own drawing counts as other work: it takes CPU from the threads
like any other. A count set by the user (-t N, Settings ▸ Threads) is never changed, but the load is
still looked at, so that a reply can say what automatic would have run; nothing is looked at where
layers run on a GPU, or where psutil cannot read the counters.
"""
from __future__ import annotations

import collections
import functools
import os
import subprocess
import sys
import threading
import time
import weakref
from contextlib import suppress
from typing import Callable, Sequence

import psutil

CHECK_S = 1.0            # a reply looks at the machine's load at most this often
SAMPLE_S = 0.25          # the sampler's interval
WINDOW_S = 0.5           # a look covers at least this much of the recent past
QUIET_S = 0.25           # a load looks this long, idle, before calibration times the passes
DROP_AT = 0.6            # one thread fewer once others want this much of the CPUs the threads run on
ADD_MARGIN = 0.1         # one more only where the look at that count would be this far from dropping it
SATURATED = 0.9          # every CPU busy: others got a share of what they wanted (OthersLoad)
NOT_BUSY = ("idle", "iowait", "guest", "guest_nice", "interrupt", "dpc")   # (Linux counts guest time in
                         # user time too, Windows interrupt and DPC time in system time: each once)


@functools.lru_cache(maxsize=1)
def physical_cores() -> int:
    """The cores llama.cpp's default runs one thread on (module docstring), at most cpus()."""
    return max(1, min(_performance_cores() or psutil.cpu_count(logical=False) or os.cpu_count() or 1, cpus()))


def _performance_cores() -> int | None:
    if sys.platform == "darwin":                 # Apple silicon: the performance cluster
        with suppress(Exception):
            out = subprocess.run(["sysctl", "-n", "hw.perflevel0.physicalcpu"], capture_output=True,
                                 text=True, timeout=5)
            return int(out.stdout.strip()) if out.returncode == 0 else None
        return None
    try:                                         # Intel hybrid on Linux: the P-cores' logical CPUs
        with open("/sys/devices/cpu_core/cpus") as fh:
            listed = _cpu_list(fh.read())
    except OSError:
        return None
    cores = set()
    for cpu in listed:
        with suppress(OSError):
            with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/core_id") as fh:
                with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id") as pk:
                    cores.add((pk.read().strip(), fh.read().strip()))
    return len(cores) or None


def _cpu_list(text: str) -> list[int]:
    """Linux's CPU list syntax: "0-7,16,18-19"."""
    cpus = []
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            cpus += range(int(a), int(b) + 1)
        elif part:
            cpus.append(int(part))
    return cpus


def _allowed() -> list[int] | None:
    """The CPUs this process may run on, where the OS says (not macOS)."""
    with suppress(Exception):
        return sorted(psutil.Process().cpu_affinity())
    return None


def cpus() -> int:
    """CPUs this process may run on: what other work is counted in."""
    allowed = _allowed()
    return max(1, len(allowed) if allowed else psutil.cpu_count(logical=True) or os.cpu_count() or 1)


def _busy(times) -> float:
    return sum(getattr(times, f) for f in times._fields if f not in NOT_BUSY)


class OthersLoad:
    """CPUs other work wants, from recent readings of the CPUs' busy time less this process's.
    `read`: one reading (monotonic seconds, busy CPU seconds, this process's CPU seconds); by default
    psutil's counters, and a sampler thread takes one every SAMPLE_S until this object is gone."""

    def __init__(self, read: Callable[[], tuple[float, float, float]] | None = None):
        self._read = read or _Counters()
        self._samples: collections.deque = collections.deque(maxlen=16)
        self._lock = threading.Lock()
        self.mark()
        if read is None:
            threading.Thread(target=_sample_while_alive, args=(weakref.ref(self),), name="cpu-load",
                             daemon=True).start()

    def mark(self) -> tuple[float, float, float]:
        """A reading now: the start of a window a look may cover (kept, and returned for `since`)."""
        reading = self._read()
        with self._lock:
            self._samples.append(reading)
        return reading

    def __call__(self, threads: int, n_cpus: int, window_s: float = WINDOW_S,
                 since: tuple[float, float, float] | None = None) -> float | None:
        """CPUs other work wanted over the newest window of at least `window_s` (or, given `since`, a
        mark's reading, from then on, however long ago), while this process ran `threads` threads on
        `n_cpus`; None where no reading is that old yet. Where every CPU was busy,
        others had only a share: the scheduler gives each runnable thread about the same, and this
        process's threads are runnable all the time they decode (they spin while they wait), so others
        wanted `threads` × their time ÷ this process's."""
        now = self._read()
        with self._lock:
            older = [s for s in self._samples if s[0] <= now[0] - window_s] if since is None else [since]
            self._samples.append(now)
        if not older:
            return None
        then = max(older)                 # (the newest: the sampler reads before it takes the lock)
        wall = now[0] - then[0]
        if wall <= 0:
            return None
        own = max(0.0, (now[2] - then[2]) / wall)
        others = max(0.0, (now[1] - then[1]) / wall - own)
        if others + own >= SATURATED * n_cpus and own > 0.1:
            return others * threads / own
        return others


def _sample_while_alive(ref: weakref.ref) -> None:
    while True:
        time.sleep(SAMPLE_S)
        load = ref()
        if load is None:
            return
        try:
            load.mark()
        except Exception:             # (counters that cannot be read: the looks say so)
            return
        del load


class _Counters:
    """psutil's readings of the CPUs this process may run on, and of this process."""

    def __init__(self):
        self._process = psutil.Process()
        allowed = _allowed()
        every = psutil.cpu_count(logical=True) or 0
        self._cpus = allowed if allowed and len(allowed) < every else None   # (None: all of them)

    def __call__(self) -> tuple[float, float, float]:
        if self._cpus is None:
            busy = _busy(psutil.cpu_times())
        else:
            per_cpu = psutil.cpu_times(percpu=True)
            busy = sum(_busy(per_cpu[i]) for i in self._cpus if i < len(per_cpu))
        own = self._process.cpu_times()
        return (time.monotonic(), busy,
                own.user + own.system + getattr(own, "children_user", 0.0) + getattr(own, "children_system", 0.0))


def crowded(n: int, others: float, n_cpus: int) -> bool:
    """Whether other work on `others` of `n_cpus` CPUs takes some of what `n` threads need."""
    return n_cpus - others <= n - DROP_AT


def _drops(n: int, reading: float, n_cpus: int) -> bool:
    """Whether a look reading `reading` takes a thread away from `n`."""
    return n > 1 and crowded(n, reading, n_cpus)


def _seen_at(n: int, wanted: float, n_cpus: int) -> float:
    """What a look at `n` threads reads (OthersLoad) where other work wants `wanted` CPUs and gets them
    whenever it runs: where the threads do not fit beside it, they spin on what is left, every CPU is
    busy, and the look scales others' share by the threads' over their own."""
    if wanted + n > n_cpus and n_cpus > wanted:
        return wanted * n / (n_cpus - wanted)
    return wanted


def _wanted(n: int, reading: float, n_cpus: int) -> float:
    """The CPUs other work wants, from a look's reading at `n` threads: _seen_at's inverse. (Work that
    would run all the time reads as wanting less: its share beside the threads is what it got; the
    next look, at the count this one chose, reads it again.)"""
    return reading if reading <= n_cpus - n else reading * n_cpus / (n + reading)


def fitting(current: int, most: int, reading: float, n_cpus: int) -> int:
    """The thread count a look reading `reading` at `current` threads calls for: the most threads, up to
    `most`, that the look at that count would not take away again (one more than now only with
    ADD_MARGIN to spare, so that the count does not swing between two)."""
    wanted = _wanted(current, reading, n_cpus)
    for n in range(most, 1, -1):
        if not _drops(n, _seen_at(n, wanted, n_cpus) + (ADD_MARGIN if n > current else 0.0), n_cpus):
            return n
    return 1


class ThreadCount:
    """The thread count of a pair's contexts. `most`: the count to start with and never exceed;
    `others`: the load to look at (None: none); `follow`: whether the count follows it (automatic) or
    stays `most` (a count the user set: the looks then only say what automatic would run)."""

    def __init__(self, contexts: Sequence, most: int, others: OthersLoad | None = None,
                 n_cpus: int | None = None, follow: bool = True, automatic: int | None = None):
        self.contexts = [c for c in contexts if c is not None]
        self.most = self.current = most
        self.automatic = automatic or most   # what automatic threads start from (a set count is compared with it)
        self.suggested = most                # the count the load calls for: automatic's, where it is fewer
        self._others = others
        self._follow = follow
        self._n_cpus = n_cpus or cpus()
        self.others: float | None = None     # CPUs other work used at the last look: the reading, at most
                                             # every CPU (beside threads that spin, scaled as OthersLoad does)
        self._checked = time.monotonic()

    @property
    def follow_load(self) -> bool:
        return self._follow and self._others is not None

    def adjust(self, force: bool = False) -> int:
        """Look at the load if CHECK_S passed since the last look (or `force`), and set the count it
        calls for on every context where the count follows it. Returns the count in use."""
        if self._others is not None and (force or time.monotonic() - self._checked >= CHECK_S):
            self._look(lambda: self._others(self.current, self._n_cpus))
        return self.current

    def mark(self) -> tuple[float, float, float] | None:
        """A reading now, for look_since (None where the load is not looked at)."""
        if self._others is None:
            return None
        try:
            return self._others.mark()
        except Exception:
            self._stop_looking()
            return None

    def look_since(self, start: tuple[float, float, float] | None) -> int:
        """Look at the load from `start` (a mark's reading) to now, however short or long: a bench run
        shorter than WINDOW_S, looked at over the last WINDOW_S, was read by the work before it (a
        load's calibration, beside which a busy CPU read as less: the run was left unmarked, 1 CI run
        in 6). Returns the count in use."""
        if self._others is not None and start is not None:
            self._look(lambda: self._others(self.current, self._n_cpus, since=start))
        return self.current

    def look_back(self, window_s: float) -> int:
        """Look at the load over the last `window_s` (at most the sampler's 16 readings, 4 s). Returns the
        count in use."""
        if self._others is not None:
            self._look(lambda: self._others(self.current, self._n_cpus, window_s))
        return self.current

    def look_quietly(self) -> int:
        """Look at the load over QUIET_S of this process doing nothing (a load's, before calibration:
        the weights' reading, and on another OS the CPU probe, would count as other work)."""
        if self.follow_load:
            self.mark()                              # (a reading to start from)
        if self.follow_load:
            time.sleep(QUIET_S)
            self._look(lambda: self._others(self.current, self._n_cpus, QUIET_S))
        return self.current

    def _look(self, read: Callable[[], float | None]) -> None:
        self._checked = time.monotonic()
        try:
            others = read()
        except Exception:
            self._stop_looking()
            return
        if others is None:
            return
        self.others = min(others, float(self._n_cpus))
        if self._follow:
            self.suggested = fitting(self.current, self.most, others, self._n_cpus)
        else:                             # (a set count: what automatic would have dropped to from its start)
            n, wanted = self.automatic, _wanted(self.current, others, self._n_cpus)
            dropped = fitting(n, n, _seen_at(n, wanted, self._n_cpus), self._n_cpus)
            self.suggested = dropped if dropped < n else self.most
        if self._follow and self.suggested != self.current:
            for ctx in self.contexts:
                ctx.set_threads(self.suggested)
            self.current = self.suggested

    def _stop_looking(self) -> None:
        """Counters psutil cannot read: the count stays, for good, and nothing is said of other work."""
        self._others = self.others = None
        self.suggested = self.most
