"""Weight repacking: the CPU probe in a child process, its remembered verdict, the overrides, and
exact generation with repacking off. Every test here uses a temporary cache folder."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from desktop_app.engine import GREEDY, LoadOptions, ModelPair
from desktop_app import machine
from desktop_app.engine import amx, backend, repack
from desktop_app.engine.backend import Context
from desktop_app.engine.probe_model import probe_model_path

from engine_helpers import CODE_PROMPT, prompt_tokens, run

# A probe child that faults for real (a segmentation fault) once it is at the repacked weights, as
# the AMX kernels of llama.cpp #20824 do.
CRASH = [sys.executable, "-c", "import ctypes, sys; print('step: decoding a batch of 40 tokens with repacked "
         "weights', file=sys.stderr, flush=True); ctypes.string_at(0)"]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(repack.CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(repack.NO_REPACK_ENV, raising=False)
    repack._unsaved.clear()
    return tmp_path / "cache"


@pytest.fixture
def no_probe(monkeypatch):
    """Fail any test that would start the probe."""
    def refuse(model):
        raise AssertionError(f"the probe ran for {model}")
    monkeypatch.setattr(repack, "probe_command", refuse)


@pytest.fixture
def load_calls(monkeypatch):
    """Record use_extra_bufts of every llama.cpp model load."""
    calls = []
    real = backend.load_model_ptr

    def spy(*args, **kwargs):
        calls.append(kwargs.get("use_extra_bufts"))
        return real(*args, **kwargs)
    monkeypatch.setattr(backend, "load_model_ptr", spy)
    return calls


def test_a_crashing_probe_turns_repacking_off_remembers_it_and_tells_once(cache, monkeypatch, load_calls):
    monkeypatch.setattr(repack, "probe_command", lambda model: CRASH)
    model = probe_model_path(cache)          # the probe model doubles as a tiny user model here
    with ModelPair.load(str(model), None, LoadOptions(n_ctx=128, n_threads=1)) as pair:
        decision = pair.repack
        pair.target_ctx.eval([5, 6, 7])                     # it loaded, and it evaluates
        assert np.isfinite(pair.target_ctx.logits(-1)).all()
    assert decision.enabled is False and decision.source == repack.PROBED
    assert load_calls == [False]
    assert "#20824" in decision.notice and "--reprobe" in decision.notice
    assert "Weight repacking" in decision.notice                    # the setting that overrides it
    if os.name == "posix":
        assert "SIGSEGV" in decision.reason and "SIGSEGV" in decision.notice
    record = json.loads((cache / repack.VERDICTS_FILE).read_text())["machines"][machine.machine_key()]
    assert record["enabled"] is False and record["outcome"] == repack.CRASHED
    assert record["machine"]["cpu"] == machine.cpu_model()

    # The next load, in this process or another, uses the remembered verdict: no probe, no notice.
    monkeypatch.setattr(repack, "probe_command", lambda model: pytest.fail("the probe ran again"))
    with ModelPair.load(str(model), None, LoadOptions(n_ctx=128, n_threads=1)) as again:
        assert again.repack.enabled is False and again.repack.notice == ""
        assert again.repack.source == repack.REMEMBERED and "#20824" in again.repack.reason
    assert load_calls == [False, False]
    out = subprocess.run([sys.executable, "-c", "from desktop_app.engine import repack; d = repack.decide(probe=False); "
                          "print(d.enabled, d.source, repr(d.notice))"],
                         capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert out.stdout.split() == ["False", "remembered", "''"], out.stderr

    # --reprobe's forget() lets the probe run again.
    repack.forget()
    assert repack.decide(probe=False) is None


def test_a_probe_that_hangs_turns_repacking_off_for_now_without_a_verdict(cache, monkeypatch):
    """A probe past its time limit (a busy machine) says nothing about repacking: off in this process,
    nothing remembered, no notice blaming AMX."""
    monkeypatch.setattr(repack, "probe_command", lambda model: [sys.executable, "-c", "import time; time.sleep(30)"])
    monkeypatch.setattr(repack, "PROBE_TIMEOUT_S", 1.0)
    result = repack.run_probe(timeout=1.0)
    assert result.outcome == repack.TIMEOUT and "1 s" in result.detail
    decision = repack.decide()
    assert decision.enabled is False and decision.notice == "" and "no verdict" in decision.reason
    assert "did not finish within 1 s" in decision.reason
    assert not (cache / repack.VERDICTS_FILE).exists()


def test_a_probe_that_dies_before_it_tries_repacked_weights_is_no_verdict(cache, monkeypatch):
    """A crash while the probe runs plain weights (a build for another CPU, the OOM killer) is not
    blamed on repacking."""
    monkeypatch.setattr(repack, "probe_command", lambda model: [
        sys.executable, "-c", "import ctypes, sys; print('step: loading the probe model plain', file=sys.stderr, "
        "flush=True); ctypes.string_at(0)"])
    result = repack.run_probe()
    assert result.outcome == repack.UNAVAILABLE and "while loading the probe model plain" in result.detail
    assert repack.decide().notice == "" and not (cache / repack.VERDICTS_FILE).exists()


def test_a_probe_whose_repacked_logits_are_wrong_turns_repacking_off(monkeypatch):
    monkeypatch.setattr(repack, "probe_command", lambda model: [
        sys.executable, "-c", "import sys; print('repacked weights give different logits', file=sys.stderr); sys.exit(5)"])
    decision = repack.decide()
    assert decision.enabled is False and "different logits" in decision.reason and "#20824" in decision.notice


def test_a_probe_that_cannot_run_is_no_verdict(cache, monkeypatch):
    monkeypatch.setattr(repack, "probe_command", lambda model: [
        sys.executable, "-c", "import sys; print('the probe could not run: ImportError', file=sys.stderr); sys.exit(3)"])
    decision = repack.decide()
    assert decision.enabled is False and decision.notice == "" and "could not run" in decision.reason
    assert not (cache / repack.VERDICTS_FILE).exists()          # the next process probes again


def test_an_unwritable_cache_folder_still_probes_once_per_process(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(repack.CACHE_DIR_ENV, str(blocker / "cache"))
    calls = []
    passes = ("import json, os, sys; assert os.path.getsize(sys.argv[1]) > 100_000; "
              "print(json.dumps({'ok': True, 'buffers': [], 'kernels': []}))")
    monkeypatch.setattr(repack, "probe_command",
                        lambda model: calls.append(model) or [sys.executable, "-c", passes, str(model)])
    first = repack.decide()
    assert first.enabled is True and first.source == repack.PROBED, first.reason
    assert not calls[0].exists()                      # the scratch copy of the probe model is gone
    second = repack.decide()
    assert second.enabled is True and second.source == repack.REMEMBERED and len(calls) == 1


def test_the_real_probe_passes_on_this_machine(cache):
    """Passes wherever repacked weights work. On a CPU with AMX it may instead crash, as on the
    virtualised Xeons of llama.cpp #20824: then it must pass with AMX kept out (engine/amx.py), on
    the AVX2/AVX-512 kernels, and the decision must say so."""
    t0 = time.monotonic()
    result = repack.run_probe()
    elapsed = time.monotonic() - t0
    with_amx = not amx.kept_out_here()      # (the probe child of a process that keeps AMX out keeps it out too)
    crashed = with_amx and result.outcome in (repack.CRASHED, repack.FAILED) and amx.possible()
    if crashed:
        print(f"with AMX: {result.detail}")
        result, with_amx = repack.run_probe(with_amx=False), False
        assert "AMX" not in result.info.get("buffers", [])
    assert result.outcome == repack.PASSED, result.detail
    assert result.info["max_abs_diff"] <= 1e-3
    build = machine.llama_build()
    if build["backends"].get("CPU", {}).get("REPACK") == "1" and "avx2" in machine.cpu_flags():
        # The probe model really goes through the repacked kernels here (else it would prove nothing).
        assert "CPU_REPACK" in result.info["buffers"]
        assert {"q4_0_8x8", "q4_K_8x8"} <= set(result.info["kernels"])
    print(f"probe: {elapsed:.2f} s, {result.info}")
    decision = repack.decide()
    assert decision.enabled is True and decision.notice == "" and decision.source == repack.PROBED
    assert decision.amx is with_amx and ("#20824" in decision.reason) is crashed
    assert repack.remembered()["outcome"] == repack.PASSED


def test_overrides_turn_repacking_off_without_probing(cache, monkeypatch, no_probe):
    monkeypatch.setenv(repack.NO_REPACK_ENV, "1")
    decision = repack.decide()
    assert decision.enabled is False and repack.NO_REPACK_ENV in decision.reason and decision.source == repack.OVERRIDE
    assert repack.decide(True).enabled is False                   # off beats a forced on
    monkeypatch.setenv(repack.NO_REPACK_ENV, "0")
    assert repack.decide(False).enabled is False
    assert repack.decide(True).enabled is True
    monkeypatch.delenv(repack.NO_REPACK_ENV)
    assert repack.decide(False).source == repack.OVERRIDE
    assert not (cache / repack.VERDICTS_FILE).exists()


def test_the_setting_maps_to_load_options():
    from desktop_app.chat.settings_file import DEFAULTS
    from desktop_app.ui.settings_panel import load_options

    assert DEFAULTS["loading"]["repack"] == "auto"
    for setting, expected in (("auto", None), ("off", False), ("on", True)):
        target, draft = load_options({**DEFAULTS["loading"], "repack": setting})
        assert target.repack is expected and draft.repack is expected


def test_the_settings_panel_round_trips_the_repack_choice(qtbot):
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QPushButton

    from desktop_app.chat.settings_file import DEFAULTS
    from desktop_app.ui.settings_panel import SettingsPanel, load_options

    panel = SettingsPanel(DEFAULTS["generation"], {**DEFAULTS["loading"], "repack": "off"})
    qtbot.addWidget(panel)
    assert panel.loading()["repack"] == "off"
    panel.repack.setCurrentIndex(panel.repack.findData("on"))
    apply = next(b for b in panel.findChildren(QPushButton) if b.text() == "Apply and reload")
    with qtbot.waitSignal(panel.reloadRequested) as blocker:
        qtbot.mouseClick(apply, Qt.LeftButton)
    assert blocker.args[0]["repack"] == "on"
    assert load_options(blocker.args[0])[0].repack is True


def test_no_repack_flag_reaches_the_loader(cache):
    """`tandem generate --no-repack` loads without repacking and never probes (no verdict written)."""
    model = probe_model_path(cache)
    cmd = [sys.executable, "-m", "desktop_app", "generate", "-m", str(model), "-p", "hello", "--raw", "-n", "2",
           "-t", "1", "-c", "128", "--json"]
    env = {**os.environ, repack.CACHE_DIR_ENV: str(cache)}
    done = subprocess.run(cmd + ["--no-repack"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True
    assert not (cache / repack.VERDICTS_FILE).exists()
    from desktop_app.cli import build_parser

    for argv in (["--no-repack"], ["gui", "--no-repack"], ["bench", "-m", "x", "--no-repack"], ["doctor", "--no-repack"]):
        assert build_parser().parse_args(argv).no_repack is True


# --- repacking off is exact -------------------------------------------------------------------------


def _logits_along(model, tokens, head):
    """Logits after each token from `head` on, evaluated as plain decoding does (a batch, then one by one)."""
    ctx = Context(model, 512, 1)
    ctx.eval(tokens[:head], logits="none")
    out = []
    for t in tokens[head:]:
        ctx.eval([t], logits="last")
        out.append(ctx.logits(-1).copy())
    ctx.close()
    return np.array(out)


@pytest.mark.network
@pytest.mark.parametrize("which", ["test_model_path", "q2k_draft_path"])
def test_greedy_output_without_repacking_equals_with_it_up_to_rounding(request, which):
    """The same greedy text with and without repacked weights. Repacked kernels may round
    differently, so the texts may part only where the top-2 logit gap is within twice the largest
    logit difference between the two, measured on a different text (the code prompt and an answer)."""
    if not repack.decide().enabled:        # (in a child: where repacked weights crash, this process would)
        pytest.skip("repacked weights do not work on this machine, so there is nothing to compare")
    path = request.getfixturevalue(which)
    prompt_text = "<|im_start|>user\nList five facts about the Moon.<|im_end|>\n<|im_start|>assistant\n"
    pairs = {flag: ModelPair.load(path, None, LoadOptions(n_ctx=512, n_threads=1, repack=flag)) for flag in (True, False)}
    try:
        if repack.TOO_LATE in pairs[True].repack.reason:      # (AMX in use in this process before it could be
            pytest.skip(pairs[True].repack.reason)             # kept out: an earlier test decoded here first)
        assert pairs[True].repack.enabled and not pairs[False].repack.enabled
        on, off = pairs[True].target, pairs[False].target
        reference = prompt_tokens(on) + on.tokenize(" def fib(n):\n    a, b = 0, 1\n    for _ in range(n):", False)
        head = len(prompt_tokens(on, CODE_PROMPT)) - 1
        deviation = float(np.abs(_logits_along(on, reference, head) - _logits_along(off, reference, head)).max())
        if which == "q2k_draft_path" and machine.llama_build()["backends"].get("CPU", {}).get("REPACK") == "1" \
                and "avx2" in machine.cpu_flags():
            assert deviation > 0, "Q2_K weights are repacked on this CPU: turning repacking off must change kernels"
        prompt = prompt_tokens(on, prompt_text)
        outputs = {flag: run(p, prompt, GREEDY, max_tokens=64, enabled=False)[2].tokens for flag, p in pairs.items()}
    finally:
        for p in pairs.values():
            p.close()
    same = outputs[True] == outputs[False]
    print(f"{which}: largest logit difference with/without repacking {deviation:.4f}; same text: {same}")
    if same:
        return
    first = next(i for i, (a, b) in enumerate(zip(outputs[True], outputs[False])) if a != b)
    with ModelPair.load(path, None, LoadOptions(n_ctx=512, n_threads=1, repack=True)) as pair:
        logits = _logits_along(pair.target, prompt + list(outputs[True][:first]), len(prompt) - 1)[-1]
    top2 = np.sort(logits)[-2:]
    assert top2[1] - top2[0] <= 2 * deviation + 1e-6, (
        f"outputs differ at token {first} where the top-2 gap is {top2[1] - top2[0]:.4f}, more than the "
        f"kernels' rounding explains ({deviation:.4f})")


def test_two_first_runs_at_once_probe_only_once(cache, tmp_path):
    """The window's engine and a `tandem doctor` starting together: one probes, the other waits for
    its verdict instead of probing beside it."""
    runs = tmp_path / "runs"
    code = f"""
import sys, time
from desktop_app.engine import repack
passes = "import json, time; open({str(runs)!r}, 'a').write('x'); time.sleep(1.5); print(json.dumps({{'ok': True, 'buffers': [], 'kernels': []}}))"
repack.probe_command = lambda model: [sys.executable, "-c", passes]
print(repack.decide().source)
"""
    env = {**os.environ, repack.CACHE_DIR_ENV: str(cache)}
    children = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
                for _ in range(2)]
    sources = sorted(child.communicate(timeout=120)[0].strip() for child in children)
    assert runs.read_text() == "x" and sources == [repack.PROBED, repack.REMEMBERED]
