"""llama.cpp's thread count: llama.cpp's default to start from, fewer while other work keeps the CPUs
busy (engine/threads.py), and a count the user set kept as it is."""
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from desktop_app.engine.events import GenerationStats
from desktop_app.engine.explain import explain, fewer_threads
from desktop_app.engine.load_options import LoadOptions
from desktop_app.engine.pair import ModelPair
from desktop_app.engine.sampling import GREEDY
from desktop_app.engine.threads import OthersLoad, ThreadCount, _cpu_list, _seen_at, crowded, fitting, physical_cores
from engine_helpers import prompt_tokens, run


def test_the_count_for_what_others_want():
    """On two CPUs: a whole busy CPU takes the second thread away and a third of one does not; one thread
    gets its second back only where the look at two would not take it away again."""
    assert fitting(2, 2, 1.0, 2) == 1 and fitting(2, 2, _seen_at(2, 0.5, 2), 2) == 1
    assert fitting(2, 2, _seen_at(2, 0.35, 2), 2) == 2 and fitting(2, 2, 0.0, 2) == 2
    assert fitting(1, 2, 1.0, 2) == 1 and fitting(1, 2, 0.45, 2) == 1     # two would read 0.58: dropped again
    assert fitting(1, 2, 0.3, 2) == 2 and fitting(1, 2, 0.0, 2) == 2
    assert fitting(2, 2, 2.0, 2) == 1                                     # never below one
    # 8 threads on 16 CPUs (hardware threads): others on a few spare CPUs take none away ...
    assert fitting(8, 8, 3.0, 16) == 8
    # ... a build wanting ten leaves six, and once it is gone again, the count comes back
    assert fitting(8, 8, _seen_at(8, 10.0, 16), 16) == 6 and fitting(6, 8, _seen_at(6, 10.0, 16), 16) == 6
    assert fitting(6, 8, 0.0, 16) == 8
    # a drop goes to the count that stays (4 -> 2 -> 3 took a second on too few threads, a review found)
    assert fitting(4, 4, _seen_at(4, 1.19, 4), 4) == 3 == fitting(3, 4, _seen_at(3, 1.19, 4), 4)


@pytest.mark.parametrize("cpus,most", [(2, 2), (4, 4), (16, 8)])
def test_the_count_settles_for_a_program_that_gets_what_it_wants(cpus, most):
    """A program using x CPUs whenever it runs reads x beside few threads and more beside threads that
    fill every CPU (_seen_at, as OthersLoad scales it): the count must settle, not swing every second
    (at two threads beside half a CPU it did, a review found)."""
    for step in range(0, 100 * cpus, 7):
        x = step / 100
        counts = [most]
        for _ in range(8):
            counts.append(fitting(counts[-1], most, _seen_at(counts[-1], x, cpus), cpus))
        assert counts[-1] == counts[-2] == counts[-3], (x, counts)
        assert sum(a != b for a, b in zip(counts, counts[1:])) <= 1, (x, counts)


def test_a_look_scales_others_share_where_every_cpu_was_busy():
    """OthersLoad on readings (seconds, busy CPU seconds, this process's CPU seconds) of two CPUs."""
    readings = iter([(0.0, 0.0, 0.0), (0.3, 0.6, 0.4), (1.3, 2.6, 1.75), (2.3, 3.6, 2.45)])
    others = OthersLoad(read=lambda: next(readings))
    assert others(2, 2) is None                       # (0.3 s: younger than a look's window)
    # both CPUs busy, 0.65 of them others' beside two spinning threads: they wanted 0.65 x 2 / 1.35
    assert others(2, 2) == pytest.approx(0.65 * 2 / 1.35)
    assert others(2, 2) == pytest.approx(0.3)         # not every CPU busy: what they used


def test_a_look_since_a_mark_covers_that_time_alone():
    """A bench run of 0.1 s looked at over the last half second was read by the work before it (a load's
    calibration, beside which a busy CPU read less: 1 CI run in 6 left a run beside a loop unmarked);
    a run of many seconds, whose mark the sampler's newer readings have pushed out, is covered too."""
    run = (0.5, 1.0, 0.68 + 0.2 / 1.5)                # 0.1 s, both CPUs busy, this process's share 2/3
    readings = iter([(0.0, 0.0, 0.0), (0.4, 0.8, 0.68), run, run])   # (0.4 s of calibration, others 0.3)
    others = OthersLoad(read=lambda: next(readings))
    count = ThreadCount([], 2, others, n_cpus=2, follow=False)
    start = count.mark()
    assert count.look_since(start) == 2 and count.others == pytest.approx(1.0)    # a whole CPU's worth
    assert crowded(2, count.others, 2) and not crowded(2, others(2, 2), 2)         # (the last half second)
    # a 10 s run, read 40 times by the sampler after its mark (which they push out of the 16 kept): others
    # beside it on 2/3 of a CPU for its first half and on none after, 1/3 of a CPU over the run
    ticks = [(t / 4, t / 4 * 2.0, t / 4 * 4 / 3) if t <= 20 else (t / 4, 10 + (t - 20) / 4, 20 / 3 + (t - 20) / 4)
             for t in range(41)]
    readings = iter([(0.0, 0.0, 0.0), *ticks, (10.0, 15.0, 35 / 3)])
    others = OthersLoad(read=lambda: next(readings))
    count = ThreadCount([], 2, others, n_cpus=2, follow=False)
    start = count.mark()
    for _ in range(40):
        others.mark()
    assert count.look_since(start) == 2 and count.others == pytest.approx(1 / 3)


def test_a_mark_the_counters_refuse_stops_the_looks_and_says_nothing():
    """psutil that cannot read the counters: a bench's mark stops the looks, as a look does, instead of
    ending the bench with a traceback (a review found)."""
    readings = iter([(0.0, 0.0, 0.0)])
    count = ThreadCount([], 2, OthersLoad(read=lambda: next(readings)), n_cpus=2, follow=False)
    assert count.mark() is None and count.others is None and count.look_since(None) == 2
    assert count.mark() is None                       # (no more readings tried)


def test_other_work_is_counted_and_this_process_and_its_children_are_not():
    """A loop in another process counts; the same loop in this process does not, nor in a child this
    process waited for (the CPU probe a first load runs read as other work and took a thread away)."""
    others = OthersLoad()
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1.5)
        beside = others(1, 2)
    finally:
        child.kill()
        child.wait()
    time.sleep(1.0)
    others(1, 2)                                      # (a look from here on leaves the loop out)
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        pass
    alone = others(1, 2)
    assert beside is not None and alone is not None
    assert beside - alone > 0.5, (beside, alone)
    if sys.platform.startswith("linux"):              # (other OSes do not count children's time)
        subprocess.run([sys.executable, "-c", "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 1: pass"])
        waited = others(1, 2)
        assert waited is not None and waited < 0.4, waited


def test_counters_that_cannot_be_read_leave_the_count_as_it_is():
    def broken(threads, cpus, window_s=None):
        raise OSError("no /proc here")

    threads = ThreadCount([], 2, others=broken, n_cpus=2)
    assert threads.follow_load and threads.adjust(force=True) == 2 and not threads.follow_load


def test_linux_cpu_lists():
    assert _cpu_list("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11] and _cpu_list("5") == [5]


@pytest.fixture(scope="module")
def pair(test_model_path):
    with ModelPair.load(test_model_path, None, LoadOptions(n_ctx=512)) as p:
        yield p


def test_a_pair_loaded_with_automatic_threads_follows_the_load_and_one_with_a_count_does_not(
        pair, test_model_path):
    threads = pair.decoder.threads
    assert threads.follow_load and threads.most == physical_cores()
    assert pair.target_ctx.n_threads == threads.current <= threads.most
    with ModelPair.load(test_model_path, None, LoadOptions(n_ctx=256, n_threads=2)) as fixed:
        threads = fixed.decoder.threads
        assert not threads.follow_load and threads.most == threads.current == 2
        threads._others = lambda t, cpus: 2.0                 # (both CPUs busy beside it)
        threads._n_cpus, threads.automatic = 2, 2
        assert threads.adjust(force=True) == 2 == fixed.target_ctx.n_threads    # (looks, and keeps the count)
        assert threads.others == 2.0 and threads.suggested == 1
    with ModelPair.load(test_model_path, None, LoadOptions(n_ctx=256, n_gpu_layers=1)) as offloaded:
        assert not offloaded.decoder.threads.follow_load            # (layers on a GPU: nothing to follow)
        assert offloaded.decoder.threads.adjust(force=True) == offloaded.decoder.threads.most
        assert offloaded.decoder.threads.others is None


def test_what_a_reply_says_of_threads_and_where_it_says_nothing():
    base = GenerationStats(n_tokens=10, tokens_per_s=20.0, n_rounds=10)
    quiet_set = replace(base, threads=8, threads_most=8, threads_suggested=8, others_cpus=0.0)
    assert fewer_threads(quiet_set) == ""                            # a set count on a quiet machine
    near = replace(base, threads=2, threads_most=2, threads_suggested=1, others_cpus=0.6)
    assert fewer_threads(near) == ""                                 # (near the edge either count is as fast)
    assert fewer_threads(replace(near, others_cpus=1.0)).endswith("Automatic threads would have run 1.")
    assert fewer_threads(replace(base, threads=0, others_cpus=1.0)) == ""   # a llama-server's reply
    assert fewer_threads(replace(base, threads=2, threads_most=2, others_cpus=None)) == ""
    # part of a reply on fewer threads: its comparison with plain decoding mixes two counts, but not that of
    # a reply decoded plainly, compared with its own steps (it said so of one: a new user's try)
    mixed = replace(base, threads=1, threads_most=2, threads_mixed=True, others_cpus=1.2, n_drafted=12)
    assert fewer_threads(mixed).endswith("its comparison with plain decoding mixes steps on more than one "
                                         "thread count, not like for like.")
    plain = fewer_threads(replace(mixed, n_drafted=0))
    assert plain.startswith("Other work was using about 1.2 of this machine's CPUs, so llama.cpp ran part of "
                            "this reply on 1 thread of 2: llama.cpp's threads wait") and "comparison" not in plain
    stored = GenerationStats.from_json(replace(base, threads=1, threads_most=2, threads_mixed=True).to_json())
    assert stored.threads_mixed is True
    assert GenerationStats.from_json({"threads_mixed": 1}).threads_mixed is False   # (not a bool: left out)


def test_a_reply_runs_on_one_thread_fewer_while_a_cpu_is_busy_with_that_counts_costs(pair, monkeypatch):
    """The count others call for is set on the context before the reply's first pass, with costs of its
    own; the reply's statistics and the panel's sentence say it; the next reply on a quiet machine has
    the count, and its costs, back. A reply whose count changed midway says its comparison with plain
    decoding mixes two counts; a count the user set stays, and the sentence says what automatic would
    have run."""
    readings = [1.0]
    saved = pair.decoder.threads

    def threads(follow=True):
        return ThreadCount([pair.target_ctx], 2, others=lambda t, cpus: readings[0] if len(readings) == 1
                           else readings.pop(0), n_cpus=2, follow=follow)

    pair.decoder.threads = threads()
    pair.target_ctx.set_threads(2)
    pair.decoder._follow_threads(type("Reply", (), {"threads": 0, "threads_last": 0, "threads_mixed": False,
                                                    "threads_suggested": 0, "others_cpus": None})())
    two = pair.decoder.costs
    prompt = prompt_tokens(pair.target)
    try:
        _, tokens, busy = run(pair, prompt, GREEDY, max_tokens=8, enabled=False)
        assert pair.target_ctx.n_threads == 1 and pair.decoder.costs is not two
        assert pair.decoder.costs.verify_s[1] != two.verify_s[1]      # (this reply's passes, on one thread)
        assert (busy.stats.threads, busy.stats.threads_most, busy.stats.others_cpus) == (1, 2, 1.0)
        assert len(tokens) == 8 and not busy.stats.threads_mixed
        assert ("Other work was using about 1.0 of this machine's CPUs, so llama.cpp ran this reply on 1 thread "
                "of 2: llama.cpp's threads wait for each other") in explain(busy.stats)
        readings[0] = 0.0
        _, _, quiet = run(pair, prompt, GREEDY, max_tokens=8, enabled=False)
        assert pair.target_ctx.n_threads == 2 and (quiet.stats.threads, quiet.stats.threads_most) == (2, 2)
        assert pair.decoder.costs is two and pair.decoder.policy.costs is two
        assert "Other work" not in explain(quiet.stats)
        # a look every round: quiet for three rounds, then a busy CPU
        monkeypatch.setattr("desktop_app.engine.threads.CHECK_S", 0.0)
        readings[:] = [0.0, 0.0, 0.0, 1.0]
        _, _, midway = run(pair, prompt, GREEDY, max_tokens=8, enabled=False)
        assert (midway.stats.threads, midway.stats.threads_mixed) == (1, True)
        assert ("so llama.cpp ran part of this reply on 1 thread of 2: llama.cpp's threads wait for each other at "
                "every step, and one sharing a CPU holds up the rest.") in explain(midway.stats)   # (decoded plainly:
        # compared with its own steps, not said to mix counts in its comparison; a reply that drafted is, above)
        # a count the user set: kept beside a busy CPU, and the sentence says what automatic would run
        pair.decoder.threads = threads(follow=False)
        pair.target_ctx.set_threads(2)
        readings[:] = [1.0]
        _, _, fixed = run(pair, prompt, GREEDY, max_tokens=8, enabled=False)
        assert pair.target_ctx.n_threads == 2
        assert (fixed.stats.threads, fixed.stats.threads_suggested, fixed.stats.threads_mixed) == (2, 1, False)
        assert ("Other work was using about 1.0 of this machine's CPUs while llama.cpp ran this reply on 2 threads, "
                "the number set (Settings ▸ Threads, or -t): llama.cpp's threads wait for each other at every step, "
                "and one sharing a CPU holds up the rest. Automatic threads would have run 1.") in explain(fixed.stats)
    finally:
        pair.decoder.threads = saved
        pair.target_ctx.set_threads(saved.current)
