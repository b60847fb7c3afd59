"""Repacked weights with AMX kept out (engine/amx.py), where llama.cpp's AMX kernels fault (#20824):
the filter itself, llama.cpp's layouts under it, and the probe's second try. The filter cannot be
lifted from a process, so every test that installs it does so in a child."""
from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from desktop_app import machine
from desktop_app.child import child_environment
from desktop_app.engine import amx, repack

x86_64_linux = pytest.mark.skipif(sys.platform != "linux" or platform.machine() != "x86_64",
                                 reason="the filter is for x86-64 Linux")


@pytest.fixture
def unfiltered():
    """The filter is inherited: these tests need a test process that has not installed it (a model loaded
    here with AMX kept out installs it, and this file runs before any)."""
    if amx.kept_out_here():
        pytest.skip("this test process keeps AMX out already (a model was loaded here before)")


# Asks the kernel for AMX tile permission as ggml does, and prints the errno (0: granted, or a CPU
# without AMX says so with its own errno; EPERM = 1: the filter refused it), then the result of a
# second, harmless arch_prctl (ARCH_GET_XCOMP_PERM: 0, or -1 on a kernel older than 5.16).
ASK = ("import ctypes; libc = ctypes.CDLL(None, use_errno=True); mask = ctypes.c_uint64(); "
       "got = libc.syscall(158, 0x1022, ctypes.byref(mask)); "
       "r = libc.syscall(158, 0x1023, 18); print(0 if r == 0 else ctypes.get_errno(), got)")


def _child(code: str, *, wrapped: bool = False, env: dict | None = None) -> str:
    cmd = [sys.executable, "-c", code]
    done = subprocess.run(amx.command(cmd) if wrapped else cmd, capture_output=True, text=True, timeout=120,
                          env={**child_environment(), **(env or {})})
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\n")[-2]


@x86_64_linux
def test_the_filter_refuses_amx_permission_and_nothing_else(unfiltered):
    """Under `tandem --without-amx` the request fails with EPERM; the other arch_prctl answers as
    without the filter; and without it the answer is the kernel's own (granted on a CPU with AMX)."""
    refused, other = _child(ASK, wrapped=True).split()
    plain, other_plain = _child(ASK).split()
    assert refused == "1" and other == other_plain
    assert plain != "1"
    if amx.possible():
        assert plain == "0"


@x86_64_linux
def test_kept_out_llama_cpp_lists_no_amx_layout(unfiltered):
    """In a process that keeps AMX out before llama.cpp lists its layouts, AMX is not among them; on a
    CPU with AMX it is without the filter (so the filter is what takes it out). Where llama.cpp has
    listed AMX first, keep_out says it came too late, and installs no filter (llama.cpp would ask for
    AMX again at every matrix product, and print each refusal)."""
    listed = json.loads(_child("import json; from desktop_app.engine import amx; "
                               "print(json.dumps(amx.extra_buffer_types()))"))
    kept = json.loads(_child("import json; from desktop_app.engine import amx; ok = amx.keep_out(); "
                             "print(json.dumps([ok, amx.extra_buffer_types()]))"))
    late = json.loads(_child("import json; from desktop_app.engine import amx; amx.extra_buffer_types(); "
                             "print(json.dumps([amx.keep_out(), amx.kept_out_here()]))"))
    assert kept[0] is True and "AMX" not in kept[1]
    assert set(kept[1]) == set(listed) - {"AMX"}
    if "AMX" in listed:
        assert late == [False, False]
    if amx.possible() and machine.llama_build()["backends"].get("CPU", {}).get("AMX_INT8") == "1":
        assert "AMX" in listed


@x86_64_linux
def test_where_repacked_weights_fail_with_amx_the_probe_tries_again_without(tmp_path, monkeypatch, unfiltered):
    """A probe child that faults unless AMX permission is refused to it, as on the Xeons of #20824:
    the decision is repacking on with AMX kept out, remembered so; the notice stays empty (the user
    loses nothing), the reason names the fault. A model then loads repacked in a child process."""
    monkeypatch.setenv(repack.CACHE_DIR_ENV, str(tmp_path))
    monkeypatch.delenv(repack.NO_REPACK_ENV, raising=False)
    monkeypatch.setattr(amx, "possible", lambda: True)
    faults_with_amx = ("import ctypes, json, sys; libc = ctypes.CDLL(None, use_errno=True); "
                       "libc.syscall(158, 0x1023, 18); refused = ctypes.get_errno() == 1; "
                       "print('step: decoding a batch of 40 tokens with repacked weights', file=sys.stderr, "
                       "flush=True); "
                       "refused or ctypes.string_at(0); "
                       "print(json.dumps({'ok': True, 'buffers': ['CPU', 'CPU_REPACK'], 'kernels': ['q4_0_8x8']}))")
    calls = []
    monkeypatch.setattr(repack, "probe_command",
                        lambda model: calls.append(model) or [sys.executable, "-c", faults_with_amx])
    decision = repack.decide()
    assert len(calls) == 2
    assert decision.enabled is True and decision.amx is False and decision.notice == ""
    assert "AMX kept out" in decision.reason and "SIGSEGV" in decision.reason and "#20824" in decision.reason
    record = repack.remembered()
    assert record["enabled"] is True and record["amx"] is False
    again = repack.decide()
    assert again.source == repack.REMEMBERED and again.amx is False and len(calls) == 2
    assert repack.decide(True).amx is False                  # the setting "On" keeps AMX out too
    assert repack.llama_cpp_tool(["llama-server", "-m", "x"])[-4:] == ["--without-amx", "llama-server", "-m", "x"]

    # Loading a model: AMX kept out of the loading process, the weights repacked (CPU_REPACK where the
    # CPU has those kernels), and it evaluates.
    from desktop_app.engine.probe_model import probe_model_path

    model = probe_model_path(tmp_path)
    repacked, layouts, finite = json.loads(_child(
        "import json, numpy as np; from desktop_app.engine import amx, backend, repack; "
        "from desktop_app.engine.loading import load_model, open_context; "
        "from desktop_app.engine.load_options import LoadOptions; "
        f"m = load_model({str(model)!r}); ctx = open_context(m, LoadOptions(n_ctx=128, n_threads=2)); "
        "ctx.eval(list(range(3, 43)), logits='last'); "
        "print(json.dumps([repack.use_extra_bufts(True), amx.extra_buffer_types(), "
        "bool(np.isfinite(ctx.logits(-1)).all())]))"))
    assert repacked is True and "AMX" not in layouts and finite is True
    if machine.llama_build()["backends"].get("CPU", {}).get("REPACK") == "1" and "avx2" in machine.cpu_flags():
        assert "CPU_REPACK" in layouts


def test_where_amx_was_in_use_before_it_could_be_kept_out_the_pair_says_so(tmp_path):
    """A process that decoded unrepacked before this machine's verdict said to keep AMX out (the
    window's engine, loaded with repacking Off, then set to Auto) cannot keep it out any more: the pair
    loads unrepacked, and says why, rather than claim repacked weights. (In a child: a decode lists
    llama.cpp's layouts for the life of the process.)"""
    from desktop_app.engine.probe_model import probe_model_path

    record = {"enabled": True, "amx": False, "outcome": repack.PASSED, "detail": "with AMX, SIGILL", "info": {}}
    (tmp_path / repack.VERDICTS_FILE).write_text(json.dumps({"machines": {machine.machine_key(): record}}))
    reason, calls = json.loads(_child(
        "import json; from desktop_app.engine import LoadOptions, ModelPair, amx, backend; "
        "amx.keep_out = lambda: False; calls = []; real = backend.load_model_ptr; "
        "backend.load_model_ptr = lambda *a, **k: calls.append(k.get('use_extra_bufts')) or real(*a, **k); "
        f"pair = ModelPair.load({str(probe_model_path(tmp_path))!r}, None, LoadOptions(n_ctx=128, n_threads=1)); "
        "print(json.dumps([pair.repack.reason if not pair.repack.enabled else '', calls]))",
        env={repack.CACHE_DIR_ENV: str(tmp_path)}))
    assert repack.TOO_LATE in reason and calls == [False]


def test_a_failure_remembered_before_the_second_try_is_probed_again_on_a_cpu_with_amx(tmp_path, monkeypatch):
    monkeypatch.setenv(repack.CACHE_DIR_ENV, str(tmp_path))
    old = {"enabled": False, "outcome": repack.CRASHED, "detail": "the probe process was killed by SIGSEGV"}
    (tmp_path / repack.VERDICTS_FILE).write_text(json.dumps({"machines": {machine.machine_key(): old}}))
    monkeypatch.setattr(amx, "possible", lambda: False)
    assert repack.remembered() == old
    monkeypatch.setattr(amx, "possible", lambda: True)
    assert repack.remembered() is None
    both_failed = {**old, "amx": True}
    (tmp_path / repack.VERDICTS_FILE).write_text(json.dumps({"machines": {machine.machine_key(): both_failed}}))
    assert repack.remembered()["amx"] is True                  # (both tries failed: a verdict)


def test_llama_cpp_s_tools_load_as_tandem_does(monkeypatch):
    tool = ["llama-bench", "-m", "x"]
    for enabled, with_amx, expected in ((False, True, [*tool, "--repack", "0"]), (True, True, tool),
                                        (True, False, amx.command(tool))):
        monkeypatch.setattr(repack, "decide", lambda e=enabled, a=with_amx: repack.RepackDecision(e, "", amx=a))
        assert repack.llama_cpp_tool(tool, off=("--repack", "0")) == expected
