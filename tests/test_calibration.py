"""Calibration after loading, and the verify timings remembered across loads (calibration_store)."""
import hashlib
import json
import os
import statistics
import time
from dataclasses import replace

import numpy as np
import pytest

from desktop_app import machine
from desktop_app.engine import backend, calibration, calibration_store, repack
from desktop_app.engine.calibration import RETIME_PER_LOAD, VERIFY_SIZES
from desktop_app.engine.calibration_store import KEEP, Remembered
from desktop_app.engine.cost_profiles import AVX2
from desktop_app.engine.load_options import LoadOptions
from desktop_app.engine.pair import ModelPair
from desktop_app.engine.replay import _Clock, calibrated
from desktop_app.engine.sampling import GREEDY
from engine_helpers import prompt_tokens, run

OPTIONS = LoadOptions(n_ctx=512, n_threads=2)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache folder of this test's own, with the session's repack verdict (no probe runs again)."""
    folder = tmp_path / "cache"
    folder.mkdir()
    verdicts = repack.verdicts_path()
    if verdicts.exists():
        (folder / repack.VERDICTS_FILE).write_bytes(verdicts.read_bytes())
    monkeypatch.setenv(repack.CACHE_DIR_ENV, str(folder))
    return folder


@pytest.fixture
def timed_sizes(monkeypatch):
    """The batch sizes each load times, load by load."""
    loads = []
    real = calibration._time_verify_batches

    def spy(ctx, token, sizes):
        loads.append(tuple(sizes))
        return real(ctx, token, sizes)

    monkeypatch.setattr(calibration, "_time_verify_batches", spy)
    return loads


def _ratios(pair: ModelPair) -> dict[int, float]:
    v = pair.decoder.costs.verify_s
    return {k: v[k] / v[1] for k in v if k != 1}


def _remembered(model_path, pair) -> Remembered:
    return calibration_store.remembered(calibration_store.key(model_path, replace(OPTIONS, repack=pair.repack.enabled)))


@pytest.mark.skipif(machine.llama_build()["gpu_offload"], reason="timings are remembered for CPU-only builds")
def test_loads_price_each_size_at_the_median_of_its_last_timings(cache, test_model_path, timed_sizes):
    for n in range(1, KEEP + 1):                     # the first loads time every size
        with ModelPair.load(test_model_path, target_options=OPTIONS) as pair:
            known = _remembered(test_model_path, pair)
            assert timed_sizes[-1] == VERIFY_SIZES and known.loads == n
            assert set(known.ratios) == set(VERIFY_SIZES) and all(len(v) == n for v in known.ratios.values())
            for k, ratio in _ratios(pair).items():
                assert ratio == pytest.approx(statistics.median(known.ratios[k]), rel=1e-3)
    seen = set()
    for n in range(KEEP + 1, KEEP + 4):              # then a few sizes a load, in turn
        before = _remembered(test_model_path, pair)
        with ModelPair.load(test_model_path, target_options=OPTIONS) as pair:
            after = _remembered(test_model_path, pair)
            due = timed_sizes[-1]
            assert len(due) == RETIME_PER_LOAD and not seen & set(due)
            seen |= set(due)
            assert after.loads == n
            for k in VERIFY_SIZES:
                assert len(after.ratios[k]) == KEEP
                assert (after.ratios[k] == before.ratios[k]) == (k not in due)      # only the timed ones rolled
                assert after.ratios[k][:-1] == before.ratios[k][1:] or k not in due
            for k, ratio in _ratios(pair).items():
                assert ratio == pytest.approx(statistics.median(after.ratios[k]), rel=1e-3)
            _, tokens, finish = run(pair, prompt_tokens(pair.target), GREEDY, max_tokens=8, drafter="lookup", auto=True)
            assert tokens and finish.stats.n_tokens == len(tokens)
    # other load options: another machine as far as timings go, timed afresh
    with ModelPair.load(test_model_path, target_options=replace(OPTIONS, n_threads=1)) as pair:
        assert timed_sizes[-1] == VERIFY_SIZES
    # and the list of remembered targets (`tandem doctor`, About) tells the two apart
    _, targets = calibration_store.summary()
    assert [t["model"] for t in targets] == [os.path.basename(test_model_path)] * 2
    repack = "on" if pair.repack.enabled else "off"
    build = machine.llama_build()
    digest = hashlib.sha256(build["system_info"].encode()).hexdigest()[:6]
    built = f"llama-cpp-python {build['version']} build {digest}"
    assert [t["setup"] for t in targets] == [f"1 thread, batch {OPTIONS.n_batch}, repacking {repack}, {built}",
                                             f"{OPTIONS.n_threads} threads, batch {OPTIONS.n_batch}, repacking {repack}, {built}"]


@pytest.mark.skipif(machine.llama_build()["gpu_offload"], reason="timings are remembered for CPU-only builds")
def test_a_load_on_fewer_threads_times_every_size_and_remembers_none(cache, test_model_path, timed_sizes,
                                                                      monkeypatch):
    """Automatic threads on two CPUs: a load on a quiet machine is remembered; a load while other work
    keeps one CPU busy calibrates the one thread replies will start on, times every size (the
    remembered timings are of two) and keeps nothing for later loads."""
    wanted = [0.0]

    class Others:                                     # (threads.OthersLoad, reading what the test says)
        def mark(self):
            pass

        def __call__(self, threads, cpus, window_s=None):
            return wanted[0]

    monkeypatch.setattr("desktop_app.engine.pair.OthersLoad", Others)
    monkeypatch.setattr("desktop_app.engine.threads.cpus", lambda: 2)
    monkeypatch.setattr("desktop_app.engine.load_options.physical_cores", lambda: 2)
    automatic = LoadOptions(n_ctx=512)
    for _ in range(KEEP):                             # (from here on a quiet load would time a few sizes)
        with ModelPair.load(test_model_path, target_options=automatic) as pair:
            assert (pair.decoder.threads.current, pair.target_ctx.n_threads) == (2, 2)
            key = calibration_store.key(test_model_path, replace(automatic, repack=pair.repack.enabled))
    assert calibration_store.remembered(key).loads == KEEP
    wanted[0] = 1.0
    with ModelPair.load(test_model_path, target_options=automatic) as pair:
        assert (pair.decoder.threads.current, pair.decoder.threads.most, pair.target_ctx.n_threads) == (1, 2, 1)
        assert timed_sizes[-1] == VERIFY_SIZES
    assert calibration_store.remembered(key).loads == KEEP


def test_one_file_under_two_llama_cpp_builds_reads_as_two(monkeypatch):
    # the key differs (machine.machine_key holds the build); the line `tandem doctor` shows must too
    built = machine.llama_build()
    lines = [calibration_store.setup(OPTIONS)]
    monkeypatch.setattr(machine, "llama_build", lambda: {**built, "system_info": built["system_info"] + " AVX512 = 1"})
    lines.append(calibration_store.setup(OPTIONS))
    assert lines[0] != lines[1] and lines[0].split(", llama-cpp-python")[0] == lines[1].split(", llama-cpp-python")[0]
    assert f"llama-cpp-python {built['version']} build " in lines[1]


def test_a_failing_store_is_no_store(cache, test_model_path, timed_sizes, monkeypatch):
    def broken(*args):
        raise OSError("gone")

    monkeypatch.setattr(calibration_store, "key", broken)
    with ModelPair.load(test_model_path, target_options=OPTIONS) as pair:
        assert timed_sizes[-1] == VERIFY_SIZES and set(_ratios(pair)) == set(VERIFY_SIZES)
    assert not (cache / calibration_store.FILE).exists()


def test_only_cpu_only_loads_are_remembered():
    cpu_build = not machine.llama_build()["gpu_offload"]
    assert calibration_store.rememberable(OPTIONS) == cpu_build
    assert not calibration_store.rememberable(replace(OPTIONS, n_gpu_layers=99))
    assert not calibration_store.rememberable(replace(OPTIONS, rpc_servers=("127.0.0.1:50052",)))


def test_store_keys_keeps_and_survives_bad_files(cache, test_model_path, tmp_path):
    options = LoadOptions(n_threads=2, repack=False)
    key = calibration_store.key(test_model_path, options)
    for other in (replace(options, n_threads=3), replace(options, n_batch=256), replace(options, repack=True)):
        assert calibration_store.key(test_model_path, other) != key
    assert calibration_store.key(test_model_path, replace(options, n_ctx=8192)) == key
    copy = tmp_path / os.path.basename(test_model_path)
    copy.write_bytes(b"GGUF" + b"\0" * 100)                      # same name, other size
    assert calibration_store.key(str(copy), options) != key

    for i in range(KEEP + 2):
        assert calibration_store.remember(key, {2: 1.1 + i / 8, 33: 10.0 + i} if i % 2 == 0 else {2: 1.1 + i / 8}, "m.gguf")
    known = calibration_store.remembered(key)
    assert known.loads == KEEP + 2
    assert known.ratios == {2: [1.1 + i / 8 for i in range(2, KEEP + 2)], 33: [10.0, 12.0, 14.0]}   # the newest of each
    assert calibration_store.remembered("another") == Remembered()

    path = cache / calibration_store.FILE
    data = json.loads(path.read_text())
    data["targets"][key]["sizes"]["2"] += [-1.0, "x"]             # damaged values are skipped,
    data["targets"][key]["sizes"]["33"].insert(0, 9.0)
    data["targets"][key]["sizes"]["33"].append(float("inf"))
    data["targets"][key]["sizes"]["1000"] = [2.0]                 # and so are sizes no round checks
    path.write_text(json.dumps(data).replace('"x"', '"x", true, 1' + "0" * 400))   # (a number no float holds)
    assert calibration_store.remembered(key).ratios == known.ratios
    assert calibration_store.remember(key, {2: 1.9}) and calibration_store.remembered(key).ratios[2][-1] == 1.9
    # a pass over k tokens costs from one to k single passes: beyond, the machine was busy (a 3-token check
    # remembered at 8.6 single passes): so it is remembered within those bounds, and read back so from a file
    assert calibration_store.remember(key, {3: 8.65, 9: 0.3}) and calibration_store.remembered(key).ratios[3] == [3.0]
    assert calibration_store.remembered(key).ratios[9] == [1.0]
    data = json.loads(path.read_text())
    data["targets"][key]["sizes"]["3"] = [8.65, 21.2, 2.4]
    path.write_text(json.dumps(data))
    assert calibration_store.remembered(key).ratios[3] == [3.0, 3.0, 2.4]
    for i in range(calibration_store.TARGETS_KEPT + 3):            # the least recently updated keys go
        assert calibration_store.remember(f"other {i}", {2: 1.5})
    kept = json.loads(path.read_text())["targets"]
    assert len(kept) == calibration_store.TARGETS_KEPT and f"other {calibration_store.TARGETS_KEPT + 2}" in kept
    path.write_text("{ not json")                                 # a damaged file counts as empty
    assert calibration_store.remembered(key) == Remembered()
    assert calibration_store.remember(key, {2: 1.5})              # and is replaced
    assert calibration_store.remembered(key).ratios == {2: [1.5]}
    path.write_text(json.dumps({"version": calibration_store.VERSION + 1, "targets": {}}))
    assert calibration_store.remembered(key) == Remembered()      # a newer Tandem's file is not read
    assert not calibration_store.remember(key, {2: 1.5})          # nor overwritten
    assert json.loads(path.read_text())["version"] == calibration_store.VERSION + 1


def test_an_unwritable_cache_loses_nothing_but_the_memory(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(repack.CACHE_DIR_ENV, str(blocker / "cache"))       # a folder under a file
    assert calibration_store.remember("k", {2: 1.5}) is False
    assert calibration_store.remembered("k") == Remembered()
    assert not os.path.exists(blocker / "cache")


def test_sizes_due_roll_through_every_size():
    full = Remembered(loads=0, ratios={k: [1.0] * KEEP for k in VERIFY_SIZES})
    assert calibration.verify_batches_due(VERIFY_SIZES, Remembered()) == VERIFY_SIZES
    assert calibration.verify_batches_due(VERIFY_SIZES, replace(full, ratios={**full.ratios, 9: [1.0]})) == (9,)
    seen = [calibration.verify_batches_due(VERIFY_SIZES, replace(full, loads=n)) for n in range(len(VERIFY_SIZES))]
    assert all(len(s) == RETIME_PER_LOAD for s in seen)
    assert {k for s in seen for k in s} == set(VERIFY_SIZES)


def test_replay_models_the_kth_load():
    first = calibrated(_Clock(AVX2, 0.2, seed=3))
    clock = _Clock(AVX2, 0.2, seed=3)                              # the same draws, taken by hand
    assert first.verify_s[1] == clock.verify(1)
    assert [first.verify_s[k] for k in VERIFY_SIZES] == [clock.verify(k) for k in VERIFY_SIZES]
    third = calibrated(_Clock(AVX2, 0.2, seed=3), loads=5)
    clock = _Clock(AVX2, 0.2, seed=3)
    loads = []
    for _ in range(KEEP):
        single = clock.verify(1)
        loads.append((single, {k: clock.verify(k) / single for k in VERIFY_SIZES}))
    for k in VERIFY_SIZES:
        assert third.verify_s[k] == pytest.approx(loads[-1][0] * np.median([r[k] for _, r in loads]))


def test_single_passes_disturbed_at_load_are_timed_again(cache, test_model_path, monkeypatch):
    """A load whose single-token passes ran while the machine was swamped (45× slow here) would price
    every pass by them: where a batch then times faster than one token, they are timed again."""
    real, calls = calibration._single_pass_s, []

    def disturbed(ctx, steps):
        calls.append(ctx)
        seconds = real(ctx, steps)
        return 45 * seconds if len(calls) == 1 else seconds

    monkeypatch.setattr(calibration, "_single_pass_s", disturbed)
    with ModelPair.load(test_model_path, target_options=OPTIONS) as pair:
        assert calls[0] is calls[1] is pair.target_ctx               # the target's, timed twice
        assert min(_ratios(pair).values()) >= 0.8, _ratios(pair)    # no batch priced below one token
    known = calibration_store.remembered(calibration_store.key(test_model_path, replace(OPTIONS, repack=pair.repack.enabled)))
    assert min(min(v) for v in known.ratios.values()) >= 0.8          # nor remembered so


def test_each_size_is_timed_against_single_passes_beside_it(cache, test_model_path, monkeypatch):
    """A load whose single-token passes ran while other work slowed the machine (1.8× here: too little
    for any batch to time faster than one token) and whose batches ran after it stopped: each size's
    price in single passes is what a quiet load gives, not 1.8 times too cheap."""
    with ModelPair.load(test_model_path, target_options=OPTIONS) as pair:
        quiet = _ratios(pair)
    real = calibration._single_pass_s
    monkeypatch.setattr(calibration, "_single_pass_s", lambda ctx, steps: 1.8 * real(ctx, steps))
    (cache / calibration_store.FILE).unlink()                       # (timed afresh, not remembered)
    with ModelPair.load(test_model_path, target_options=OPTIONS) as pair:
        busy = _ratios(pair)
    assert statistics.median(busy[k] / quiet[k] for k in VERIFY_SIZES) > 0.8, (quiet, busy)


def test_a_draft_step_is_priced_against_target_passes_beside_it(cache, test_model_path, q2k_draft_path, monkeypatch):
    """Other work that starts on the machine once the target's timings are done (every pass 3× slow from
    the draft's first timing on) leaves a draft step's price in target passes as a quiet load gives it,
    and a token of its prompt pass (auto's catch-up) too: timed apart, they were 3× too dear (a new
    user's try priced the demo's 0.5B draft's step at 1.73 passes of its 1.5B target, where its rounds
    took 0.5-0.7), and auto never drafted with it to learn better."""
    def price(pair: ModelPair) -> tuple[float, float]:
        costs = pair.decoder.costs
        return costs.draft_step_s["model"] / costs.verify_s[1], costs.prefill_s["model"] / costs.verify_s[1]

    with ModelPair.load(test_model_path, q2k_draft_path, target_options=OPTIONS) as pair:
        quiet = price(pair)
    busy, seen = [], []
    real_eval, real_single = backend.Context.eval, calibration._single_pass_s

    def slowed_eval(self, tokens, logits="last", stop=None):
        t0 = time.perf_counter()
        real_eval(self, tokens, logits, stop)
        if busy:
            time.sleep(2 * (time.perf_counter() - t0))

    def single(ctx, steps):
        if seen and ctx is not seen[0]:
            busy.append(True)                        # the draft's turn: the machine gets busy from here on
        seen.append(ctx)
        return real_single(ctx, steps)

    monkeypatch.setattr(backend.Context, "eval", slowed_eval)
    monkeypatch.setattr(calibration, "_single_pass_s", single)
    with ModelPair.load(test_model_path, q2k_draft_path, target_options=OPTIONS) as pair:
        assert busy and seen[-1] is pair.draft_ctx
        loaded = price(pair)
    assert 0.6 < loaded[0] / quiet[0] < 1.5 and 0.6 < loaded[1] / quiet[1] < 1.5, (quiet, loaded)


@pytest.mark.network
def test_a_prompt_pass_is_priced_beyond_its_model_s_single_pass(cache, test_model_path, q2k_draft_path, monkeypatch):
    """A read's price per token is what its pass cost beyond a single pass (CostModel.prefill_cost), so
    each model's single pass must be priced before its prompt pass is timed at load: the target's was
    timed first, and its price held the whole pass's share (a review)."""
    from desktop_app.engine.costs import CostModel
    seen = {}
    real = CostModel.record_prefill

    def record(self, model, n_tokens, seconds):
        seen.setdefault(model, self.single_pass(model))
        return real(self, model, n_tokens, seconds)

    monkeypatch.setattr(CostModel, "record_prefill", record)
    with ModelPair.load(test_model_path, q2k_draft_path, target_options=OPTIONS) as pair:
        costs = pair.decoder.costs
        assert seen["target"] > 0 and seen["model"] > 0, seen
        assert 0 < costs.prefill_s["target"] < costs.verify_s[1] and 0 < costs.prefill_s["model"]
