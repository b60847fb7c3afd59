"""The benchmark's arithmetic and plumbing (medians, ratios, interleaving, outputs); no timing is asserted."""
from __future__ import annotations

from collections import Counter
import dataclasses
import json
import re
import statistics
import subprocess
import sys

import pytest
from PySide6.QtGui import QImage

from desktop_app.bench.prompts import BUILTIN, load_prompts
from desktop_app.bench.report import busy_runs, summarize, speedup_ratios, to_markdown
from desktop_app.bench.runner import BenchSetting, RunResult, interleaved_order, make_settings, williams_row


def result(prompt, setting, repeat, tok_s, alpha=None, index=-1):
    return RunResult(prompt, setting, repeat, 10, tok_s, 0.1, alpha, alpha, None, None, 0.0, 1.0, None, None, None,
                     "max_tokens", index)


def test_settings_put_plain_first_for_each_temperature():
    s = make_settings(["model", "lookup"], [2, 4], [0.0, 1.0], auto=True, has_draft_model=True)
    names = [x.name for x in s]
    assert names[:6] == ["plain", "model γ=2", "model γ=4", "auto (model, lookup)", "lookup γ=2", "lookup γ=4"]
    assert names[7] == "plain T=1" and len(names) == 14
    assert [x.name for x in make_settings(["model", "lookup"], [3], [0.0], False, False)] == ["plain", "lookup γ=3"]


def test_the_lookup_ceiling_copies_as_far_as_the_longest_setting_benched_auto_included():
    """Auto drafts up to 32 whatever --draft-max says: capped at the --draft-max of 4, the "ceiling" was
    1.24× beside auto's 1.27× (a new user's try)."""
    from desktop_app.bench.runner import ceiling_draft_max
    from desktop_app.engine.auto_policy import AUTO_GAMMA_MAX
    assert ceiling_draft_max(make_settings(["lookup"], [3, 8], [0.0], auto=False, has_draft_model=False)) == 8
    assert ceiling_draft_max(make_settings(["model"], [4], [0.0], auto=True, has_draft_model=True)) == AUTO_GAMMA_MAX
    assert ceiling_draft_max(make_settings([], [], [0.0], auto=False, has_draft_model=False)) == 16   # plain alone


def test_runs_are_interleaved_between_plain_runs():
    order = interleaved_order(["a", "b"], ["plain", "x", "y"], 2)
    assert order[:5] == [(0, "a", "plain"), (0, "a", "x"), (0, "a", "plain"), (0, "a", "y"), (0, "a", "plain")]
    assert order[5:10] == [(0, "b", "plain"), (0, "b", "x"), (0, "b", "plain"), (0, "b", "y"), (0, "b", "plain")]
    # the next repeat takes the settings the other way round
    assert order[10:15] == [(1, "a", "plain"), (1, "a", "y"), (1, "a", "plain"), (1, "a", "x"), (1, "a", "plain")]
    assert len(order) == 20
    # each temperature has its own plain baseline
    two = interleaved_order(["a"], ["plain", "x", "plain T=1", "x T=1"], 1,
                            {"x": "plain", "plain T=1": "plain T=1", "x T=1": "plain T=1"})
    assert [s for _, _, s in two] == ["plain", "x", "plain", "plain T=1", "x T=1", "plain T=1"]


@pytest.mark.parametrize("n", [2, 3, 5, 6, 7])
def test_williams_rows_balance_places_and_predecessors(n):
    """scripts/compare_auto_ngram.py orders its runs so: over n repeats (2n for odd n) every run takes
    every place equally often and follows every other run equally often."""
    rows = [williams_row(n, r) for r in range(n if n % 2 == 0 else 2 * n)]
    assert all(sorted(row) == list(range(n)) for row in rows)
    per_place = len(rows) // n
    assert all(sorted(col) == sorted(list(range(n)) * per_place) for col in zip(*rows))
    follows = Counter((row[j], row[j + 1]) for row in rows for j in range(n - 1))
    assert set(follows) == {(a, b) for a in range(n) for b in range(n) if a != b}
    assert set(follows.values()) == {len(rows) // n}


def test_speedups_compare_each_run_with_the_plain_runs_either_side():
    # run order: plain 10, x 15, plain 20, y 30, plain 40 (the machine speeding up as it goes)
    plain = [result("a", "plain", 0, t, index=i) for i, t in ((0, 10.0), (2, 20.0), (4, 40.0))]
    x, y = result("a", "x", 0, 15.0, index=1), result("a", "y", 0, 30.0, index=3)
    assert speedup_ratios([x], plain) == [1.0]                     # 15 / mean(10, 20)
    assert speedup_ratios([y], plain) == [1.0]                     # 30 / mean(20, 40)
    # a plain run of another repeat is never a baseline; without places in the order, the repeat's plain runs
    other = [result("a", "plain", 1, 99.0, index=2)]
    assert speedup_ratios([result("a", "x", 0, 15.0, index=3)], plain[:1] + other) == [1.5]
    assert speedup_ratios([result("a", "x", 0, 15.0)], [result("a", "plain", 0, 10.0)]) == [1.5]


def test_summary_medians_and_ratio_ranges():
    settings = [BenchSetting("none"), BenchSetting("lookup", 4)]
    runs = [result("a", "plain", r, t) for r, t in enumerate([10.0, 12.0, 8.0])] + \
           [result("a", "lookup γ=4", r, t, a) for r, (t, a) in enumerate([[15.0, 0.5], [12.0, 0.7], [16.0, 0.6]])]
    plain_row, spec_row = summarize(runs, settings)
    assert plain_row.tokens_per_s == 10.0 and plain_row.speedup == 1.0
    assert spec_row.tokens_per_s == 15.0 and spec_row.alpha == 0.6
    assert spec_row.speedup == statistics.median([1.5, 1.0, 2.0]) == 1.5
    assert (spec_row.speedup_min, spec_row.speedup_max) == (1.0, 2.0)
    md = to_markdown([plain_row, spec_row], {"repeats": 3, "n_tokens": 10})
    assert "| a | lookup γ=4 | 15.0 |" in md and "1.50 (1.00–2.00)" in md
    # copies take no draft step: their c reads "none", as the panel and `generate -h` say (it read 0.00)
    copies = dataclasses.replace(spec_row, c=0.0)
    model = dataclasses.replace(spec_row, setting="model γ=4", drafter="model", c=0.52)
    md = to_markdown([plain_row, copies, model], {"repeats": 3, "n_tokens": 10})
    assert "| none | 1.50 (1.00–2.00) |" in md and "| 0.52 | 1.50 (1.00–2.00) |" in md
    # the columns a new user asked about: plain's tok/s over all its runs, c's "none", predicted's "flat"
    assert "(plain's: all of its runs); c is one draft-model step" in md and "(none: copies, no model step)" in md
    assert "flat as if a check cost one single pass" in md
    # plain decoding is the baseline: its prediction is "–" as every empty cell (it was blank), and its passes
    # are the target's, as the panel's Draft / target time counts them (under "verify s", they read as checks)
    assert "| 1 (baseline) | – |" in md and "| draft s | target s |" in md
    # a setting that never drafted says so: its bare "–" read like the "0.00 | 0%" of drafts all rejected
    idle = dataclasses.replace(spec_row, alpha=None, acceptance_rate=None, mean_accepted=None, c=None)
    rejected = dataclasses.replace(spec_row, setting="lookup γ=8", alpha=0.0, acceptance_rate=0.0, c=0.0)
    md = to_markdown([plain_row, idle, rejected], {"repeats": 3, "n_tokens": 10})
    assert "| a | lookup γ=4 | 15.0 | 100 | not drafted | – | – |" in md
    assert "| a | lookup γ=8 | 15.0 | 100 | 0.00 | 0% |" in md and "| a | plain | 10.0 | 100 | – | – |" in md


def test_auto_is_reported_against_the_best_fixed_setting_of_each_prompt():
    from desktop_app.bench.report import auto_verdicts

    settings = [BenchSetting("none"), BenchSetting("lookup", 4), BenchSetting("lookup", 8),
                BenchSetting("lookup", 8, auto=True)]
    runs = []
    for prompt, (lk4, lk8, auto) in {"a": (12.0, 15.0, 14.0), "b": (9.0, 8.0, 10.0)}.items():
        runs += [result(prompt, "plain", 0, 10.0, index=0), result(prompt, "lookup γ=4", 0, lk4, index=1),
                 result(prompt, "plain", 0, 10.0, index=2), result(prompt, "lookup γ=8", 0, lk8, index=3),
                 result(prompt, "plain", 0, 10.0, index=4), result(prompt, "auto (lookup)", 0, auto, index=5),
                 result(prompt, "plain", 0, 10.0, index=6)]
    rows = summarize(runs, settings)
    a, b = auto_verdicts(rows)
    assert (a.prompt, a.best_fixed, a.speedup, a.best_speedup) == ("a", "lookup γ=8", 1.4, 1.5)
    assert a.vs_best == pytest.approx(1.4 / 1.5) and a.ttft_vs_plain == 1.0
    assert (b.best_fixed, b.best_speedup) == ("plain", 1.0) and b.vs_best == pytest.approx(1.0)
    md = to_markdown(rows, {"repeats": 1, "n_tokens": 10})
    assert "| a | auto (lookup) 1.40× | lookup γ=8 1.50× | 0.93 | 1.00 |" in md
    assert "ended before" not in md                        # (every reply had its 10 tokens)


def test_replies_that_end_before_the_tokens_asked_for_are_named():
    """A prompt whose replies end early ("List three fruits.": about 6 of 32 tokens) had its speed-ups
    stand beside the header's "× 32 tokens" with nothing to say they rest on fewer (a new user's try)."""
    settings = [BenchSetting("none"), BenchSetting("lookup", 4)]
    runs = []
    for prompt, n in (("fruits", 6), ("code", 32)):
        for k, name in enumerate(("plain", "lookup γ=4", "plain")):
            runs.append(dataclasses.replace(result(prompt, name, 0, 10.0, index=k), n_tokens=n + (k == 1)))
    md = to_markdown(summarize(runs, settings), {"repeats": 1, "n_tokens": 32})
    assert ("Replies that ended before the 32 tokens asked for (median over repeats), whose speeds rest on fewer "
            "tokens: fruits 6–7 tokens.") in md


def test_prompt_files(tmp_path):
    assert [p.name for p in load_prompts("builtin")] == ["code", "edit", "summary", "story"]
    j = tmp_path / "p.json"
    j.write_text(json.dumps(["first", {"name": "two", "prompt": "second"}]))
    assert [(p.name, p.text) for p in load_prompts(str(j))] == [("p1", "first"), ("two", "second")]
    t = tmp_path / "p.txt"
    t.write_text("one\nline\n---\ntwo\n")
    assert [p.text for p in load_prompts(str(t))] == ["one\nline", "two"]
    assert "```python" in BUILTIN[1].text                     # the edit prompt carries code to copy


def test_memory_budget_of_a_damaged_header_is_left_out_not_raised(tmp_path, capsys):
    """The header is read after the whole run: a damaged one must not lose the results."""
    import struct

    from desktop_app.commands.bench import memory_budget
    from desktop_app.engine.probe_model import write_probe_model

    good = tmp_path / "good.gguf"
    write_probe_model(good)
    budget = memory_budget([str(good)], 256, 50_000_000, 60_000_000)
    assert budget["model_files_mb"] == pytest.approx(good.stat().st_size / 1e6) and budget["kv_caches_mb"] > 0
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(good.read_bytes()[:8] + struct.pack("<Q", 2**62) + good.read_bytes()[16:])
    assert memory_budget([str(good), str(bad)], 256, 50_000_000, 60_000_000) is None
    assert "no memory budget: the header claims" in capsys.readouterr().err
    assert "Memory:" not in to_markdown([], {"memory": None})
    halves = {"rss_loaded_mb": 1800.2, "rss_peak_mb": 1900.4, "model_files_mb": 1609.4, "kv_caches_mb": 167.4,
              "budget_base_mb": 1776.8, "overhead_mb": 123.6}            # (each shown rounded: their sums too)
    assert ("peak 1900 MB; model files 1609 MB + KV caches 167 MB = 1776 MB (peak − that = +124 MB)"
            in to_markdown([], {"memory": halves}))


@pytest.mark.network
def test_bench_command_end_to_end(tmp_path, test_model_path):
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps([{"name": "copy", "prompt": "Repeat exactly: one two three four five six."},
                                   {"name": "free", "prompt": "Say something."}]))
    out = subprocess.run([sys.executable, "-m", "desktop_app", "bench", "-m", test_model_path, "--prompts", str(prompts),
                          "--drafter", "lookup", "--draft-max", "2,3", "-n", "8", "--repeat", "2", "-c", "512", "-q",
                          "--json", str(tmp_path / "b.json"), "--markdown", str(tmp_path / "b.md"),
                          "--plot", str(tmp_path / "b.png")], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads((tmp_path / "b.json").read_text())
    runs = doc["runs"]
    assert [(r["repeat"] - 1, r["prompt"], r["setting"]) for r in runs] == interleaved_order(   # (1-based, as the
        ["copy", "free"], ["plain", "lookup γ=2", "lookup γ=3"], 2)                               # progress lines)
    for row in doc["summary"]:
        mine = [r for r in runs if r["prompt"] == row["prompt"] and r["setting"] == row["setting"]]
        at = {r["index"]: r for r in runs}
        assert row["tokens_per_s"] == pytest.approx(statistics.median(r["tokens_per_s"] for r in mine))
        if row["setting"] == "plain":
            assert row["speedup"] == 1.0
            assert row["lookup_ceiling"] == pytest.approx(statistics.median(r["lookup_ceiling"] for r in mine))
            continue
        assert row["lookup_ceiling"] is None and all(r["lookup_ceiling"] is None for r in mine)
        # every speculative run sits between two plain runs of its prompt and repeat
        for r in mine:
            assert at[r["index"] - 1]["setting"] == at[r["index"] + 1]["setting"] == "plain"
            assert at[r["index"] - 1]["prompt"] == at[r["index"] + 1]["prompt"] == r["prompt"]
        ratios = [r["tokens_per_s"] / ((at[r["index"] - 1]["tokens_per_s"] + at[r["index"] + 1]["tokens_per_s"]) / 2)
                  for r in mine]
        assert row["speedup"] == pytest.approx(statistics.median(ratios))
        assert row["speedup_min"] == pytest.approx(min(ratios)) and row["speedup_max"] == pytest.approx(max(ratios))
    mem = doc["meta"]["memory"]
    assert mem["model_files_mb"] == pytest.approx(98.362432) and mem["kv_caches_mb"] > 0
    assert mem["rss_peak_mb"] >= mem["rss_loaded_mb"] > 0
    md = (tmp_path / "b.md").read_text()
    assert md.count("\n| copy |") == 3 and "Memory: resident" in md
    ceiling = {row["prompt"]: row["lookup_ceiling"] for row in doc["summary"] if row["setting"] == "plain"}
    assert ceiling["copy"] > 1.0 and doc["meta"]["lookup_ceiling_draft_max"] == 3   # the reply repeats the prompt
    assert f"copy {ceiling['copy']:.2f}×" in md and f"free {ceiling['free']:.2f}×" in md
    image = QImage(str(tmp_path / "b.png"))
    assert image.width() == 1100 and image.height() == 650


@pytest.mark.network
def test_bench_replays_auto_under_every_cost_profile(tmp_path, test_model_path, q2k_draft_path):
    from desktop_app.engine.trace import TraceSet

    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps([{"name": "copy", "prompt": "Repeat exactly: one two three four five six."}]))
    out = subprocess.run(_bench(test_model_path, prompts, "-md", q2k_draft_path, "--draft-max", "2", "--auto",
                                "--drafter", "model,lookup",
                                "--replay", "--save-traces", str(tmp_path / "t.json"), "--json", str(tmp_path / "b.json")),
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads((tmp_path / "b.json").read_text())
    verdicts = doc["meta"]["replay"]["verdicts"]
    assert {v["profile"] for v in verdicts} == {"steep", "xeon", "gpu", "avx2", "h200", "here"}
    assert all(v["prompt"] == "copy" and v["vs_best"] > 0 and v["vs_plain"] > 0 for v in verdicts)
    assert {a["prompt"] for a in doc["auto"]} == {"copy"}
    traces = TraceSet.load(str(tmp_path / "t.json"))
    assert traces.draft and [t.name for t in traces.traces] == ["copy"] and len(traces.here.verify_ms) == 33
    assert traces.ends == {0, 2, 4} and traces.traces[0].ends == traces.ends   # SmolLM2's end tokens, kept
    assert "| here | copy |" in out.stdout and "Auto against the best fixed setting" in out.stdout
    runs = [line for line in out.stderr.splitlines() if line.startswith("[") and " tok/s" in line]
    assert any("auto (model, lookup)" in line for line in runs)
    assert len({line.index(" tok/s") for line in runs}) == 1, runs     # (auto's name had pushed its speed on)


def test_a_plot_qt_cannot_save_is_an_error_not_silence(tmp_path, qapp):
    # qapp: the widget tests that follow need a QApplication, not the QGuiApplication plot would make
    from desktop_app.bench.plot import plot_speedups

    with pytest.raises(OSError, match="Qt could not save a .nosuchformat image there"):
        plot_speedups([], str(tmp_path / "b.nosuchformat"))
    assert not (tmp_path / "b.nosuchformat").exists()


def test_the_plot_draws_auto_and_the_prediction_at_a_single_gamma(tmp_path, qapp):
    """With one γ benched the plot was a column of dots: the predictions the legend named were drawn only
    between two γ, and auto not at all (a new user's try). Auto is a level across the plot in its prompt's
    colour, and each prediction a dash at its γ."""
    from PySide6.QtGui import QImage
    from desktop_app.bench.plot import plot_speedups
    from desktop_app.bench.report import Row

    def row(setting, gamma, auto, speedup, predicted):
        return Row("edit", setting, "model", gamma, auto, 0.0, 1, 10.0, 0.1, None, None, None, 0.0, 1.0, None,
                   speedup, speedup, speedup, None, predicted)

    def widest_blue_row(rows) -> int:          # the first series' colour, #1f77b4, as blended into white
        plot_speedups(rows, str(tmp_path / "p.png"))
        image = QImage(str(tmp_path / "p.png"))
        def blue(x, y):
            c = image.pixelColor(x, y)
            return c.blue() > c.red() + 40 and c.blue() > c.green() + 20
        return max(sum(blue(x, y) for x in range(81, 839)) for y in range(51, 589))   # inside the frame

    fixed = row("model γ=4", 4, False, 0.66, None)
    assert widest_blue_row([fixed]) < 16                                    # a dot and its bar
    assert widest_blue_row([dataclasses.replace(fixed, predicted_speedup_measured=0.9)]) >= 20   # and a dash
    assert widest_blue_row([fixed, row("auto (model, lookup)", 4, True, 1.27, None)]) > 300     # and a level


def _bench(model: str, prompts_file, *args: str) -> list[str]:
    return [sys.executable, "-m", "desktop_app", "bench", "-m", model, "--prompts", str(prompts_file),
            "--drafter", "lookup", "--draft-max", "2", "-n", "8", "--repeat", "3", "-c", "512", *args]


@pytest.mark.network
def test_runs_beside_other_work_are_marked_and_the_table_says_they_are_not_like_for_like(tmp_path, test_model_path):
    """A lookup run measured at 0.01x plain while another process took the CPUs, and the table said
    nothing (a new user's try; `generate` says so of its replies). Beside a process that spins, every
    run is marked, the short ones too (shorter than the decoder's interval between looks at the load)."""
    prompts = tmp_path / "p.txt"
    prompts.write_text("Say something about cats.")
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        out = subprocess.run(_bench(test_model_path, prompts, "--repeat", "1", "-n", "16", "--json", str(tmp_path / "b.json")),
                             capture_output=True, text=True, timeout=600)
    finally:
        spin.kill()
    assert out.returncode == 0, out.stderr
    progress = [line for line in out.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == 3 and all(re.search(r"  \(other work: \d+\.\d CPUs\)$", line) for line in progress), progress
    assert "**Not like for like:** other work took CPUs the threads needed during 3 of the 3 runs" in out.stdout
    runs = json.loads((tmp_path / "b.json").read_text())["runs"]
    assert all(r["busy"] and r["others_cpus"] > 0 for r in runs)
    # on a machine with CPUs to spare (a 16-core desktop, 8 threads) a browser's 2 CPUs take none they need
    from desktop_app.engine.threads import crowded

    assert crowded(2, 0.6, 2) and not crowded(2, 0.3, 2) and not crowded(8, 2.0, 16) and crowded(8, 8.6, 16)
    quiet = [dataclasses.replace(RunResult("a", "plain", 0, 10, 10.0, 0.1, None, None, None, None, 0.0, 1.0, None,
                                           None, None, "max_tokens", 0), others_cpus=0.1)]
    assert "Not like for like" not in to_markdown(summarize(quiet, [BenchSetting("none")]), {"busy_runs": busy_runs(quiet)})


@pytest.mark.network
def test_a_prompt_the_context_cannot_hold_is_refused_not_measured_at_0_tokens(tmp_path, test_model_path):
    prompts = tmp_path / "p.txt"
    prompts.write_text("Say something.\n---\nAdd these up: " + ", ".join(map(str, range(1, 180))))
    out = subprocess.run(_bench(test_model_path, prompts, "-n", "8"), capture_output=True, text=True, timeout=600)
    assert out.returncode == 1 and out.stdout == "", out.stdout
    said = out.stderr.splitlines()[-1]
    assert re.fullmatch(r"tandem: error: the prompt p2 has \d+ tokens and the context holds 512, which leaves no "
                        r"room for a reply: shorten it or raise -c", said), out.stderr
    roomy = subprocess.run(_bench(test_model_path, prompts, "--repeat", "1", "-c", "1024"), capture_output=True,
                           text=True, timeout=600)     # (the last -c counts)
    assert roomy.returncode == 0, roomy.stderr


@pytest.mark.network
def test_an_unwritable_output_is_refused_before_the_run(tmp_path, test_model_path):
    prompts = tmp_path / "p.txt"
    prompts.write_text("Say something.")
    out = subprocess.run(_bench(test_model_path, prompts, "--markdown", str(tmp_path / "no-such-dir" / "b.md")),
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == f"tandem: error: --markdown {tmp_path}/no-such-dir/b.md: cannot be written " \
                         f"(No such file or directory)\n"            # one line, and not one run made


@pytest.mark.network
def test_an_output_that_fails_after_the_run_loses_nothing(tmp_path, test_model_path):
    """The folder of --json goes away during the run: the table is printed all the same, the other
    outputs are written, and the failure is one line with exit code 1."""
    import shutil

    prompts = tmp_path / "p.txt"
    prompts.write_text("Say something.")
    doomed, kept = tmp_path / "doomed", tmp_path / "kept"
    doomed.mkdir()
    kept.mkdir()
    proc = subprocess.Popen(_bench(test_model_path, prompts, "--json", str(doomed / "b.json"),
                                   "--markdown", str(kept / "b.md")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stderr.readline()
    assert first.replace(" ", "").startswith("[1/"), first      # the run is under way
    shutil.rmtree(doomed)
    stdout, rest = proc.communicate(timeout=600)
    assert proc.returncode == 1, rest
    assert (kept / "b.md").read_text() in stdout                 # the table, printed before any file
    errors = [line for line in rest.splitlines() if line.startswith("tandem: error:")]
    assert errors == [f"tandem: error: --json {doomed}/b.json: cannot be written (No such file or directory) "
                      f"(the table above has the results)"]


@pytest.mark.network
def test_ctrl_c_during_the_runs_keeps_the_runs_that_finished(tmp_path, test_model_path):
    """Ctrl-C after some runs of a long bench: the table (printed and written) has the runs that
    finished, says it was interrupted, and the command exits 130 with one line; nothing is lost
    of what was measured. Pressed at once after a run ends, it falls in the next run's prompt pass
    (most of a run here), whose abort callback once swallowed it: the bench went on to its end."""
    import signal

    prompts = tmp_path / "p.txt"
    prompts.write_text("Add these up: " + ", ".join(map(str, range(1, 180))))   # a long prompt pass, a short reply
    proc = subprocess.Popen([sys.executable, "-m", "desktop_app", "bench", "-m", test_model_path, "--prompts",
                             str(prompts), "--drafter", "lookup", "--draft-max", "2", "-n", "8", "--repeat", "50",
                             "-c", "1024", "--json", str(tmp_path / "b.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))   # (as from a terminal)
    try:
        lines = [proc.stderr.readline()]
        while lines[-1] and not lines[-1].startswith("[  3/"):   # (after any note: lines; the count is padded to
            lines.append(proc.stderr.readline())                # the total's width, 150)
        assert lines[-1].startswith("[  3/") and " 0.0 tok/s" not in lines[-1], lines   # three runs done, the fourth begun
        proc.send_signal(signal.SIGINT)
        stdout, rest = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 130, rest
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["meta"]["interrupted"] == "runs"
    done = len(doc["runs"])
    assert 3 <= done < 10 and [r["index"] for r in doc["runs"]] == list(range(done))
    assert all(r["n_tokens"] == 8 for r in doc["runs"])
    assert "**Interrupted** (Ctrl-C) during the runs" in stdout and "\n| p1 | plain |" in stdout, stdout
    assert rest.splitlines()[-1] == f"tandem: interrupted: the table above has the {done} runs that finished", rest
    assert "Traceback" not in rest and "Exception ignored" not in rest, rest
