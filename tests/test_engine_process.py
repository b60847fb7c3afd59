"""The engine in its own process, on the real test pair: the same events as in-process, controls that
land mid-reply, and a death that is reported in words and survived by starting again."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from desktop_app.chat.template import ChatTemplate, Message
from desktop_app.engine import GREEDY, LoadOptions, ModelLoadError, ModelPair, PromptEvent, SamplingParams
from desktop_app.engine.events import FinishEvent, RoundEvent, StopReason, TokenEvent
from desktop_app.engine.process.client import EngineProcess
from desktop_app.engine.process.protocol import EngineCrashed, describe_death
from desktop_app.engine.settings import Controls, SpecSettings

from engine_helpers import run

pytestmark = pytest.mark.network

OPTIONS = LoadOptions(n_ctx=1024, n_threads=2)
LONG = "Write a long story about a dragon who learns to code. Make it at least five paragraphs."


@pytest.fixture(scope="module")
def engine(test_model_path, q2k_draft_path):
    deaths = []
    e = EngineProcess(on_death=deaths.append)
    e.deaths = deaths
    e.pair = e.load(test_model_path, q2k_draft_path, OPTIONS, OPTIONS)
    yield e
    e.shutdown()


@pytest.fixture(scope="module")
def local(test_model_path, q2k_draft_path):
    with ModelPair.load(test_model_path, q2k_draft_path, OPTIONS) as p:
        yield p


def prompt(pair, text="Write a Python function that adds two numbers."):
    return ChatTemplate(pair.target).tokenize([Message("system", "Be brief."), Message("user", text)])


def test_the_engine_process_gives_what_the_engine_gives_in_process(engine, local):
    remote = engine.pair
    assert (remote.n_ctx, remote.target.n_vocab, remote.target.bos, remote.target.eos) == \
           (local.n_ctx, local.target.n_vocab, local.target.bos, local.target.eos)
    assert remote.draft.path == local.draft.path
    assert prompt(remote) == prompt(local)               # the template tokenised through the pipe, in one trip
    for spec in (dict(drafter="model", draft_max=4), dict(drafter="lookup", draft_max=8), dict(enabled=False)):
        r_rounds, r_tokens, r_finish = run(remote, prompt(remote), GREEDY, max_tokens=60, **spec)
        l_rounds, l_tokens, l_finish = run(local, prompt(local), GREEDY, max_tokens=60, **spec)
        assert r_finish.tokens == l_finish.tokens and r_finish.text == l_finish.text
        assert [(t.token, t.text) for t in r_tokens] == [(t.token, t.text) for t in l_tokens]
        if spec.get("drafter") != "lookup":          # (lookup sizes its copies by measured costs)
            assert [(r.drafted, r.accepted, r.emitted, r.kinds) for r in r_rounds] == \
                   [(r.drafted, r.accepted, r.emitted, r.kinds) for r in l_rounds]
            assert [t.kind for t in r_tokens] == [t.kind for t in l_tokens]
        assert r_finish.stats.n_tokens == len(r_tokens) and r_finish.stop_reason == l_finish.stop_reason
    sampled = SamplingParams(temperature=1.0, seed=7)
    assert run(remote, prompt(remote), sampled, 30, drafter="model")[2].tokens == \
           run(local, prompt(local), sampled, 30, drafter="model")[2].tokens
    long = "Repeat this list: " + ", ".join(f"item {i}" for i in range(150))   # read in pieces: how far
    fixed = Controls(SpecSettings(drafter="model", draft_max=4))             # (then the draft model reads it too)
    reads = [[(e.done, e.total, e.model) for e in p.generate(prompt(p, long), GREEDY, fixed, 2)
              if isinstance(e, PromptEvent)] for p in (remote, local)]      # crosses the pipe too
    assert reads[0] and {r[1:] for r in reads[0]} == {r[1:] for r in reads[1]}   # (each piece is about a second
    assert all(0 < d < t for d, t, model in reads[0] if model == "target")      # of the rate each measured)
    assert reads[0][-1][0] == 0 and reads[0][-1][2] == "draft"


def test_cancel_and_new_settings_reach_a_running_reply(engine):
    pair = engine.pair
    controls = Controls(SpecSettings(drafter="model", draft_max=4))
    rounds, finish = [], None
    for ev in pair.generate(prompt(pair, LONG), GREEDY, controls, max_tokens=1000):
        if isinstance(ev, RoundEvent):
            rounds.append(ev)
            if ev.index == 3:
                controls.set(SpecSettings(drafter="none"))
            if ev.index == 8:
                controls.cancel()
        elif isinstance(ev, FinishEvent):
            finish = ev
    assert finish.stop_reason == StopReason.CANCELLED
    transfer = pair.last_transfer
    assert transfer.rounds == len(rounds) and transfer.messages <= len(rounds) + 1
    # The engine logged how many rounds were complete when each control arrived (it may run ahead of
    # its reader, so that is what counts). Settings are read at the start of a round: the round in
    # progress when they arrive keeps the old ones, every later round has the new.
    (spec_kind, spec_at), (cancel_kind, cancel_at) = transfer.controls
    assert (spec_kind, cancel_kind) == ("spec", "cancel") and 4 <= spec_at <= cancel_at
    assert all(r.drafter == "model" for r in rounds[:spec_at])
    assert all(r.drafter == "none" for r in rounds[spec_at + 1:])
    # A cancel lands within one round: only the round in progress when it arrived was finished.
    assert len(rounds) - cancel_at <= 1, f"{len(rounds) - cancel_at} rounds after the cancel arrived"
    # a cancel sent before the reply reached the engine still lands
    early = Controls(SpecSettings(drafter="model"))
    early.cancel()
    events = list(pair.generate(prompt(pair), GREEDY, early, max_tokens=100))
    assert events[-1].stop_reason == StopReason.CANCELLED and not any(isinstance(e, TokenEvent) for e in events)


def test_a_reply_abandoned_early_is_stopped_and_the_next_request_works(engine):
    pair = engine.pair
    events = pair.generate(prompt(pair, LONG), GREEDY, Controls(SpecSettings(drafter="model")), max_tokens=1000)
    for ev in events:
        if isinstance(ev, TokenEvent) and ev.index == 5:
            break
    started = time.monotonic()
    events.close()                                   # the engine is told, and its reply read to the end
    assert time.monotonic() - started < 5
    assert run(pair, prompt(pair), GREEDY, 5, drafter="none")[2].stats.n_tokens == 5


def test_load_errors_come_back_as_themselves_and_the_old_pair_stays(engine, tmp_path):
    text = tmp_path / "notes.gguf"
    text.write_text("not a model")
    with pytest.raises(ModelLoadError, match="notes.gguf: not a GGUF file"):
        engine.load(str(text), None, OPTIONS, OPTIONS)
    assert run(engine.pair, prompt(engine.pair), GREEDY, 5, drafter="model")[2].stats.n_tokens == 5


def test_a_killed_engine_is_reported_in_words_and_a_new_one_starts(test_model_path):
    deaths = []
    engine = EngineProcess(on_death=deaths.append)
    try:
        pair = engine.load(test_model_path, None, OPTIONS, OPTIONS)
        with pytest.raises(EngineCrashed) as caught:
            for ev in pair.generate(prompt(pair, LONG), GREEDY, Controls(SpecSettings(drafter="none")), 1000):
                if isinstance(ev, TokenEvent) and ev.index == 10:
                    engine.kill()                    # as the system's OOM killer does
        crash = caught.value
        assert crash.exitcode == -signal.SIGKILL and "generating a reply (after round" in crash.stage
        assert "was killed [SIGKILL] while generating a reply" in str(crash) and "memory" in str(crash)
        deadline = time.monotonic() + 10
        while not deaths and time.monotonic() < deadline:
            time.sleep(0.05)
        assert deaths == [crash]                     # the watcher reports the same death, once
        assert not engine.alive
        pair = engine.load(test_model_path, None, OPTIONS, OPTIONS)        # a fresh process
        assert engine.alive and run(pair, prompt(pair), GREEDY, 5, drafter="none")[2].stats.n_tokens == 5
        # a fault while idle is noticed too, and named
        os.kill(engine.pid, signal.SIGSEGV)
        deadline = time.monotonic() + 10
        while len(deaths) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(deaths) == 2 and "crashed (segmentation fault) [SIGSEGV] while idle" in str(deaths[1])
        assert "--no-repack" in str(deaths[1])
    finally:
        engine.shutdown()
    assert deaths[-1].exitcode == -signal.SIGSEGV


def test_deaths_are_described_for_a_user():
    abort = describe_death(-signal.SIGABRT, "loading the draft model (40 %)", "GGML_ASSERT(n <= 64) failed")
    assert abort.startswith("The model engine stopped on an internal error (abort) [SIGABRT] while loading "
                            "the draft model (40 %).")
    assert "“GGML_ASSERT(n <= 64) failed”" in abort and "Your conversation is saved" in abort
    assert "illegal instruction" in describe_death(-signal.SIGILL, "reading the prompt")
    assert "exited unexpectedly with code 3 while idle" in describe_death(3, "")


def test_the_parent_never_loads_llama_cpp(test_model_path):
    """The window's side of the engine (client, chat session, template) and the window's modules run
    without llama.cpp: a native fault can only ever end the engine process."""
    code = f"""
import sys
import desktop_app.ui.main_window, desktop_app.ui.app
from desktop_app.engine.process.client import EngineProcess
from desktop_app.engine.load_options import LoadOptions
from desktop_app.chat.session import ChatSession
from desktop_app.chat.template import ChatTemplate, Message
from desktop_app.engine.sampling import GREEDY
e = EngineProcess()
pair = e.load({test_model_path!r}, None, LoadOptions(n_ctx=512, n_threads=2), LoadOptions(n_ctx=512, n_threads=2))
tokens = ChatTemplate(pair.target).tokenize([Message("user", "Hi")])
text = [ev for ev in pair.generate(tokens, GREEDY, None, 3)][-1].text
e.shutdown()
print(len(tokens), bool(text), "llama_cpp" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    n, has_text, loaded = out.stdout.split()
    assert int(n) > 3 and has_text == "True" and loaded == "False"
