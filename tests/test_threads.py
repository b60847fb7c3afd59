"""llama.cpp's thread count: one per physical core, one fewer for each CPU other programs keep busy
(engine/threads.py), and a count the user set kept as it is."""
import subprocess
import sys
import time

import pytest

from desktop_app.engine.explain import explain
from desktop_app.engine.load_options import LoadOptions
from desktop_app.engine.pair import ModelPair
from desktop_app.engine.sampling import GREEDY
from desktop_app.engine.threads import OthersLoad, ThreadCount, fitting, physical_cores
from engine_helpers import prompt_tokens, run


def test_the_count_for_what_others_want():
    """On two CPUs: a whole busy CPU (0.9–1.0 wanted) takes the second thread away and half of one does
    not (two threads were still ahead there); one thread gets its second back only with half a CPU
    free beside it, so a load between the two thresholds keeps whichever count runs."""
    assert fitting(2, 2, 1.0, 2) == 1 and fitting(2, 2, 0.9, 2) == 1
    assert fitting(2, 2, 0.5, 2) == 2 and fitting(2, 2, 0.0, 2) == 2
    assert fitting(1, 2, 1.0, 2) == 1 and fitting(1, 2, 0.55, 2) == 1     # between: as it was
    assert fitting(1, 2, 0.5, 2) == 2 and fitting(1, 2, 0.0, 2) == 2
    assert fitting(2, 2, 2.0, 2) == 1                                     # never below one
    # 8 threads on 16 CPUs (hardware threads): others on a few spare CPUs take none away ...
    assert fitting(8, 8, 3.0, 16) == 8
    # ... a build on twelve of them leaves four, and once they are gone again, the count comes back
    assert fitting(8, 8, 12.0, 16) == 4 and fitting(4, 8, 12.0, 16) == 4 and fitting(4, 8, 0.0, 16) == 8


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_others_load_counts_other_programs_and_not_this_one():
    """A loop in another process is counted; the same loop in this process is not."""
    others = OthersLoad()
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1.5)
        beside = others(1, 2)
    finally:
        child.kill()
        child.wait()
    time.sleep(0.3)
    others(1, 2)                            # (the look from here on leaves the child out)
    _spin(1.5)
    alone = others(1, 2)
    assert beside is not None and alone is not None
    assert beside - alone > 0.6, (beside, alone)
    assert others(1, 2) is None             # (too soon after the last look to say)


@pytest.fixture(scope="module")
def pair(test_model_path):
    with ModelPair.load(test_model_path, None, LoadOptions(n_ctx=512)) as p:
        yield p


def test_a_pair_loaded_with_automatic_threads_follows_the_load_and_one_with_a_count_does_not(
        pair, test_model_path):
    assert pair.decoder.threads.follow_load and pair.decoder.threads.most == physical_cores()
    assert pair.target_ctx.n_threads == physical_cores()
    with ModelPair.load(test_model_path, None, LoadOptions(n_ctx=256, n_threads=1)) as fixed:
        threads = fixed.decoder.threads
        assert not threads.follow_load and threads.most == threads.current == 1
        assert fixed.target_ctx.n_threads == 1
        assert threads.adjust(force=True) == 1 and threads.others is None   # (never looks)


def test_a_reply_runs_on_one_thread_fewer_while_a_cpu_is_busy_and_says_why(pair):
    """The count others call for is set on the context before the reply's first pass, the reply's
    statistics and the panel's sentence say it, and the next reply on a quiet machine has it back."""
    wanted = []
    saved = pair.decoder.threads
    pair.decoder.threads = ThreadCount([pair.target_ctx], 2, True, others=lambda threads, cpus: wanted.pop(0),
                                       n_cpus=2)
    try:
        prompt = prompt_tokens(pair.target)
        wanted.append(1.0)
        _, tokens, busy = run(pair, prompt, GREEDY, max_tokens=8, enabled=False)
        assert pair.target_ctx.n_threads == 1
        assert (busy.stats.threads, busy.stats.threads_most, busy.stats.others_cpus) == (1, 2, 1.0)
        assert len(tokens) == 8
        assert ("Other programs were using about 1.0 of this machine's CPUs, so this reply ended on 1 thread of 2"
                in explain(busy.stats))
        wanted.append(0.0)
        _, _, quiet = run(pair, prompt, GREEDY, max_tokens=8, enabled=False)
        assert pair.target_ctx.n_threads == 2 and (quiet.stats.threads, quiet.stats.threads_most) == (2, 2)
        assert "Other programs" not in explain(quiet.stats)
        assert quiet.tokens == busy.tokens       # (one thread or two: the same greedy text)
    finally:
        pair.decoder.threads = saved
        pair.target_ctx.set_threads(saved.current)
