"""Calibration after loading, and the verify timings remembered across loads (calibration_store)."""
import json
import os
import statistics
from dataclasses import replace

import pytest

from desktop_app.engine import calibration, calibration_store, repack
from desktop_app.engine.calibration import REMEMBERED_ENOUGH, VERIFY_SIZES
from desktop_app.engine.load_options import LoadOptions
from desktop_app.engine.pair import ModelPair
from desktop_app.engine.sampling import GREEDY
from engine_helpers import prompt_tokens, run


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


def _ratios(pair: ModelPair) -> dict[int, float]:
    v = pair.decoder.costs.verify_s
    return {k: v[k] / v[1] for k in v if k != 1}


def test_later_loads_price_verify_passes_at_the_median_of_remembered_loads(cache, test_model_path, monkeypatch):
    options = LoadOptions(n_ctx=512, n_threads=2)
    stored = []
    for n in range(1, REMEMBERED_ENOUGH + 1):
        with ModelPair.load(test_model_path, target_options=options) as pair:
            loads = calibration_store.remembered(calibration_store.key(test_model_path,
                                                                       replace(options, repack=pair.repack.enabled)))
            assert len(loads) == n                                       # every load so far is kept
            assert set(loads[-1]) == set(VERIFY_SIZES) and all(r > 0 for r in loads[-1].values())
            for k, ratio in _ratios(pair).items():                       # priced at the median over them
                assert ratio == pytest.approx(statistics.median(load[k] for load in loads), rel=1e-3)
            stored = loads
    before = (cache / calibration_store.FILE).read_text()

    def not_again(*args):
        raise AssertionError("verify batches timed although enough loads are remembered")

    with monkeypatch.context() as patch:
        patch.setattr(calibration, "_time_verify_batches", not_again)
        pair = ModelPair.load(test_model_path, target_options=options)
    with pair:
        # enough remembered: no batch is timed, the file is untouched, the prices are the remembered median
        assert (cache / calibration_store.FILE).read_text() == before
        assert set(_ratios(pair)) == set(VERIFY_SIZES)
        for k, ratio in _ratios(pair).items():
            assert ratio == pytest.approx(statistics.median(load[k] for load in stored), rel=1e-3)
        _, tokens, finish = run(pair, prompt_tokens(pair.target), GREEDY, max_tokens=8, drafter="lookup", auto=True)
        assert tokens and finish.stats.n_tokens == len(tokens)
    # another load option is another machine as far as timings go: timed afresh
    with ModelPair.load(test_model_path, target_options=replace(options, n_threads=1)) as pair:
        assert (cache / calibration_store.FILE).read_text() != before


def test_store_keys_keeps_and_survives_bad_files(cache, test_model_path, tmp_path):
    options = LoadOptions(n_threads=2, repack=False)
    key = calibration_store.key(test_model_path, options)
    assert key != calibration_store.key(test_model_path, replace(options, n_threads=3))
    assert key != calibration_store.key(test_model_path, replace(options, n_gpu_layers=99))
    other = tmp_path / "copy.gguf"
    other.write_bytes(b"GGUF" + b"\0" * 100)
    assert key != calibration_store.key(str(other), options)

    for i in range(calibration_store.KEEP + 2):
        assert calibration_store.remember(key, {2: 1.5 + i, 33: 10.0 + i}, "m.gguf")
    loads = calibration_store.remembered(key)
    assert [load[2] for load in loads] == [1.5 + i for i in range(2, calibration_store.KEEP + 2)]   # the newest
    assert calibration_store.remembered("another") == []

    path = cache / calibration_store.FILE
    data = json.loads(path.read_text())
    data["targets"][key]["loads"].append({"2": -1.0})                 # a damaged entry is skipped
    path.write_text(json.dumps(data))
    assert len(calibration_store.remembered(key)) == calibration_store.KEEP
    path.write_text("{ not json")                                      # a damaged file counts as empty
    assert calibration_store.remembered(key) == []
    assert calibration_store.remember(key, {2: 1.5})                   # and is replaced
    assert calibration_store.remembered(key) == [{2: 1.5}]


def test_an_unwritable_cache_loses_nothing_but_the_memory(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(repack.CACHE_DIR_ENV, str(blocker / "cache"))       # a folder under a file
    assert calibration_store.remember("k", {2: 1.5}) is False
    assert calibration_store.remembered("k") == []
    assert not os.path.exists(blocker / "cache")
