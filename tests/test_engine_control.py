"""Refusals and stops on the real test model: bad files, incompatible pairs, cancel, stop strings,
a full context, and settings changed between rounds."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from desktop_app.engine import (GREEDY, Controls, FinishEvent, IncompatiblePair, LoadOptions, ModelLoadError, ModelPair,
                                PromptEvent, RoundEvent, SpecSettings, StopReason, check_pair)
from desktop_app.engine import backend
from desktop_app.engine.auto_policy import AUTO_GAMMA_MAX
from desktop_app.engine import decoding
from desktop_app.engine.drafters import ModelDrafter
from desktop_app.engine.explain import explain
from desktop_app.engine.number_text import duration_text
from desktop_app.engine.loading import LoadCancelled, load_model

from engine_helpers import prompt_tokens, run


@pytest.fixture(scope="module")
def pair(test_model_path, q2k_draft_path):
    with ModelPair.load(test_model_path, q2k_draft_path, LoadOptions(n_ctx=1024, n_threads=2)) as p:
        yield p


@pytest.mark.network
def test_incompatible_pair_is_refused_naming_the_difference(test_model_path, gemma_path):
    verdict = check_pair(test_model_path, gemma_path)
    assert not verdict.ok and verdict.reason == "the draft's tokenizer is llama-spm, the target's gpt2"
    with pytest.raises(IncompatiblePair, match="cannot draft for SmolLM2.*the draft's tokenizer is llama-spm, the target's gpt2"):
        ModelPair.load(test_model_path, gemma_path)


@pytest.mark.network
def test_compatible_pairs_pass(test_model_path, q2k_draft_path):
    assert check_pair(test_model_path, q2k_draft_path).ok
    assert check_pair(test_model_path, test_model_path).ok


@pytest.mark.network
def test_a_context_too_large_for_memory_says_so_and_what_to_do(test_model_path):
    """-c 999999999 gave llama.cpp's "llama_init_from_model: failed to initialize the context:
    std::bad_alloc" after the file's path twice (a new user's try)."""
    with pytest.raises(ModelLoadError) as caught:
        ModelPair.load(test_model_path, None, LoadOptions(n_ctx=999_999_999, n_threads=2))
    assert caught.value.reason == ("not enough memory for a context of 999,999,999 tokens: lower the context size "
                                   "(-c, or Settings ▸ Context size; 0 is the model's own length)")


@pytest.mark.network
def test_broken_files_are_refused_with_file_and_reason(tmp_path, test_model_path):
    text = tmp_path / "notes.gguf"
    text.write_text("this is not a model")
    with pytest.raises(ModelLoadError, match=r"notes.gguf: not a GGUF file"):
        ModelPair.load(str(text))
    with pytest.raises(ModelLoadError, match=r"missing.gguf: file not found"):
        ModelPair.load(str(tmp_path / "missing.gguf"))
    (tmp_path / "empty.gguf").write_bytes(b"")          # ("not a GGUF file" of it: a new user's try)
    with pytest.raises(ModelLoadError, match=r"empty.gguf: empty \(0 bytes\): a download or copy that did not finish"):
        ModelPair.load(str(tmp_path / "empty.gguf"))
    truncated = tmp_path / "truncated.gguf"
    with open(test_model_path, "rb") as src, open(truncated, "wb") as dst:
        dst.write(src.read(20_000_000))
    # (how far it runs, as the window's line said before Load: "file is truncated or damaged" after it)
    with pytest.raises(ModelLoadError, match=r"truncated.gguf: the file is cut short: its weights end at byte "
                                             r"[\d,]+, and it has 20,000,000 \(\d+ %; a download or copy"):
        ModelPair.load(str(truncated))
    # a broken draft is refused too, before any weights are loaded
    with pytest.raises(ModelLoadError, match=r"notes.gguf: not a GGUF file"):
        ModelPair.load(test_model_path, str(text))


@pytest.mark.network
def test_unknown_architecture_is_named(tmp_path, test_model_path):
    """The test model with its general.architecture value rewritten to one llama.cpp does not know."""
    data = bytearray(open(test_model_path, "rb").read())
    key = data.find(b"general.architecture")
    value = key + len(b"general.architecture") + 4 + 8        # after the type (u32) and length (u64)
    assert data[value:value + 5] == b"llama"
    data[value:value + 5] = b"zlama"
    odd = tmp_path / "odd.gguf"
    odd.write_bytes(bytes(data))
    with pytest.raises(ModelLoadError, match=r"odd.gguf: unsupported architecture \('?zlama'?\)"):
        ModelPair.load(str(odd))


@pytest.mark.network
def test_loading_reports_progress_and_can_be_cancelled(test_model_path, q2k_draft_path):
    seen = []
    with ModelPair.load(test_model_path, q2k_draft_path, LoadOptions(n_ctx=256),
                        progress=lambda what, f: seen.append((what, f))) as p:
        assert p.draft is not None
    fractions = [f for _, f in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert {"target", "draft", "ready"} <= {w for w, _ in seen}
    calls = []

    def cancel():
        calls.append(1)
        return len(calls) > 3

    with pytest.raises(LoadCancelled):
        load_model(test_model_path, cancel=cancel)


@pytest.mark.network
def test_the_draft_model_reads_the_prompt_with_the_target(pair, monkeypatch):
    """Prompt processing covers both models (as in llama.cpp's tools), so decoding speed and the first
    round's draft timing are not charged with the draft's prompt; plain decoding leaves it alone."""
    prompt = prompt_tokens(pair.target)
    pair.draft_ctx.clear()
    rounds, _, _ = run(pair, prompt, GREEDY, max_tokens=1, drafter="model", draft_max=4)
    assert [r.drafted for r in rounds] == [()]          # one token wanted: nothing was drafted
    assert pair.draft_ctx.tokens == prompt[:-1]
    pair.draft_ctx.clear()
    run(pair, prompt, GREEDY, max_tokens=3, drafter="none")
    assert pair.draft_ctx.tokens == []
    cancelled = Controls(SpecSettings(drafter="model", draft_max=4))
    cancelled.cancel()                                    # as if it landed during the target's prompt
    _, _, finish = run(pair, prompt, GREEDY, max_tokens=3, controls=cancelled)
    assert finish.stop_reason == StopReason.CANCELLED and pair.draft_ctx.tokens == []
    # the first round then evaluates only the prompt's last token before drafting
    pair.draft_ctx.clear()
    batches = []
    monkeypatch.setattr(pair.draft_ctx, "eval", lambda tokens, logits="last", stop=None, _eval=pair.draft_ctx.eval:
                        (batches.append(len(tokens)), _eval(tokens, logits, stop)))
    events = pair.generate(prompt, GREEDY, Controls(SpecSettings(drafter="model", draft_max=4)), 50)
    first_round = next(ev for ev in events if isinstance(ev, RoundEvent))
    events.close()
    assert first_round.gamma == 4
    assert batches == [len(prompt) - 1, 1, 1, 1, 1]     # prompt; its last token; x_1..x_3 (x_4 is not needed yet)


class _CancelDuringThePrompt(Controls):
    """Cancelled from its `reads`-th look on: the prompt pass looks between its operations."""

    def __init__(self, settings: SpecSettings, reads: int):
        super().__init__(settings)
        self.reads = reads

    @property
    def cancelled(self) -> bool:
        self.reads -= 1
        return self.reads < 0 or super().cancelled


@pytest.mark.network
def test_a_cancel_stops_a_long_prompt_pass_mid_way(pair):
    """Stop pressed while a long conversation is read: the pass ran to its end (9.7 s in a user's
    try) before the stop was seen. It stops between the pass's operations now, the cache keeps what
    it held before (llama.cpp drops an aborted batch), and the next reply reads on from there."""
    prompt = prompt_tokens(pair.target, "Repeat this list: " + ", ".join(f"item {i}" for i in range(150)))
    assert len(prompt) > 500                       # (more than one batch of 512)
    pair.target_ctx.clear()
    controls = _CancelDuringThePrompt(SpecSettings(drafter="model", draft_max=4), reads=700)
    rounds, tokens, finish = run(pair, prompt, GREEDY, max_tokens=8, controls=controls)
    assert finish.stop_reason == StopReason.CANCELLED and not rounds and not tokens
    held = len(pair.target_ctx.tokens)
    assert held < len(prompt) - 1 and pair.target_ctx.pos_max() == held - 1
    # how far the read got, and nothing "read before" (the cache was empty; a reviewer's run had the panel
    # say "640 tokens to read first (the other 1,053 had been read before)")
    s = finish.stats
    assert (s.n_prompt_evaluated, s.n_prompt_unread) == (held, len(prompt) - held)   # (the last token among
    assert explain(s) == (f"Stopped before the first token: nothing was written or drafted. It was stopped "  # them,
                          f"{duration_text(s.ttft_s)} into reading the conversation: {held:,} of "  # as the
                          f"{len(prompt):,} tokens read.")                      # progress and the stats count it)
    assert pair.draft_ctx.tokens == [] or len(pair.draft_ctx.tokens) < len(prompt) - 1
    _, tokens, finish = run(pair, prompt, GREEDY, max_tokens=4, drafter="model", draft_max=4)
    assert finish.stop_reason == StopReason.MAX_TOKENS and len(tokens) == 4
    assert pair.target_ctx.pos_max() == len(pair.target_ctx.tokens) - 1
    # the draft model's reads stop too (its prompt in fixed mode, its catch-up in auto mode)
    drafter = ModelDrafter(pair.draft_ctx, pair.target_ctx.n_vocab)
    pair.draft_ctx.clear()
    for read in (drafter.begin, drafter.catch_up):
        with pytest.raises(backend.Stopped):
            read(prompt, stop=lambda: True)
        assert pair.draft_ctx.tokens == [] and pair.draft_ctx.pos_max() == -1


@pytest.mark.network
def test_a_long_prompt_says_how_far_it_has_been_read_before_its_first_round(pair, monkeypatch):
    """A 1,100-token conversation read again after a restart showed "reading the prompt…" unchanged for
    13 s on a busy 2-core machine (a new user's try): a pass longer than a piece (about a second of
    reading, from PROMPT_PIECE_MIN tokens to a batch) says how far it is between its pieces. A prefix
    already in the cache is not read again, nor counted."""
    prompt = prompt_tokens(pair.target, "Repeat this list: " + ", ".join(f"item {i}" for i in range(150)))
    assert pair.decoder._prompt_piece() <= pair.target_ctx.n_batch     # (this fast model: a batch a second)
    monkeypatch.setattr(decoding, "PROMPT_PIECE_S", 1e-6)               # as a slow machine reads: the least
    piece = decoding.PROMPT_PIECE_MIN
    assert pair.decoder._prompt_piece() == piece
    pair.target_ctx.clear()
    events = list(pair.generate(prompt, GREEDY, Controls(SpecSettings(enabled=False)), 2))
    reading = [e for e in events if isinstance(e, PromptEvent)]
    first_round = next(i for i, e in enumerate(events) if isinstance(e, RoundEvent))
    passed = len(prompt) - 1                      # (the prompt pass reads all but the last, the first round that)
    assert [(e.done, e.total) for e in reading] == [(k, passed + 1) for k in range(piece, passed, piece)]
    assert len(reading) >= 2 and all(isinstance(e, PromptEvent) for e in events[:first_round])
    # the total it said is the count the panel then gives ("1,024 of 1,404" read on to "1,405 tokens … had
    # to be read first", a new user's try)
    assert events[-1].stats.n_prompt_evaluated == passed + 1 and len(pair.target_ctx.tokens) >= passed
    longer = prompt[:-1] + pair.target.tokenize(" and more", False) + prompt[-1:]   # the same start, read once:
    events = list(pair.generate(longer, GREEDY, Controls(SpecSettings(enabled=False)), 2))   # only the rest
    assert not any(isinstance(e, PromptEvent) for e in events) and events[-1].stats.n_prompt_evaluated < 10


@pytest.mark.network
def test_a_draft_ends_at_the_first_end_of_generation_token_it_proposes(pair):
    """Nothing after an end-of-generation token can be kept: the draft stops there (it drafted on through
    "<|im_end|>", a line break and "<|endoftext|>", a user's try)."""
    import numpy as np

    drafter = pair.decoder.drafters["model"]
    context = prompt_tokens(pair.target, "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n")
    for _ in range(100):                      # the draft's own greedy reply, up to where it would end it
        proposal = drafter.draft(context, 1, GREEDY, np.random.default_rng(0))
        if pair.target.is_eog(proposal.tokens[0]):
            break
        context = context + proposal.tokens
    else:
        pytest.fail("the draft model did not end its reply within 100 tokens")
    proposal = drafter.draft(context, 8, GREEDY, np.random.default_rng(0))
    assert len(proposal.tokens) == 1 and pair.target.is_eog(proposal.tokens[0]) and proposal.n_steps == 1
    before = context[-3:]                     # a draft that starts earlier stops there too
    proposal = drafter.draft(context[:-3], 8, GREEDY, np.random.default_rng(0))
    assert proposal.tokens == [*before, proposal.tokens[-1]] and pair.target.is_eog(proposal.tokens[-1])


@pytest.mark.network
def test_a_draft_short_because_it_ends_the_reply_is_not_dropped_by_draft_min(test_model_path):
    """The target as its own draft agrees with itself: its last draft is the reply's end, shorter than
    draft min. It is checked, and ends the reply in that round (dropped, the end came by plain steps)."""
    with ModelPair.load(test_model_path, test_model_path, LoadOptions(n_ctx=512, n_threads=2)) as same:
        prompt = prompt_tokens(same.target, "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n")
        rounds, _, finish = run(same, prompt, GREEDY, max_tokens=200, drafter="model", draft_max=8, draft_min=8)
    assert finish.stop_reason == StopReason.EOS
    assert all(r.gamma in (0, 8) for r in rounds[:-1])
    last = rounds[-1]                         # (its drafts shown up to the reply's end, the end token left out)
    assert last.end == "eos" and last.drafter == "model" and last.gamma < 8 and last.accepted == last.gamma


@pytest.mark.network
def test_cancel_is_honoured_within_one_round(pair):
    controls = Controls(SpecSettings(drafter="model", draft_max=4))
    rounds_after_cancel = 0
    finish = None
    for ev in pair.generate(prompt_tokens(pair.target), GREEDY, controls, max_tokens=500):
        if isinstance(ev, RoundEvent):
            if controls.cancelled:
                rounds_after_cancel += 1
            if ev.index == 3:
                controls.cancel()
        elif isinstance(ev, FinishEvent):
            finish = ev
    assert finish.stop_reason == StopReason.CANCELLED
    assert rounds_after_cancel == 0
    assert 4 <= len(finish.tokens) <= 4 * 5


@pytest.mark.network
def test_cancel_from_another_thread(pair):
    controls = Controls(SpecSettings(drafter="model", draft_max=4))
    cancelled_at = []

    first_round = threading.Event()

    def cancel_soon_after_the_first_round():
        first_round.wait(timeout=60)
        time.sleep(0.2)
        cancelled_at.append(time.monotonic())
        controls.cancel()

    canceller = threading.Thread(target=cancel_soon_after_the_first_round)
    canceller.start()
    received = []
    for ev in pair.generate(prompt_tokens(pair.target), GREEDY, controls, max_tokens=2000):
        received.append((time.monotonic(), ev))
        if isinstance(ev, RoundEvent):
            first_round.set()
    canceller.join()
    assert received[-1][1].stop_reason == StopReason.CANCELLED
    rounds = [ev for _, ev in received if isinstance(ev, RoundEvent)]
    assert rounds, "the cancel came before the first round; nothing was tested"
    # The generator only runs while the consumer asks for the next event, so a round whose
    # preceding event was received after the cancel began after it, and must not exist.
    # (The round in flight when the cancel lands may still finish.)
    begun_after = [ev for (t_prev, _), (_, ev) in zip(received, received[1:])
                   if isinstance(ev, RoundEvent) and t_prev > cancelled_at[0]]
    assert begun_after == []


@pytest.mark.network
def test_stop_string_spanning_tokens(pair):
    prompt = prompt_tokens(pair.target)
    _, tokens, full = run(pair, prompt, GREEDY, max_tokens=60, drafter="model")
    # a stop string that starts inside one token's text and ends inside a later one
    starts = [sum(len(t.text) for t in tokens[:i]) for i in range(len(tokens) + 1)]
    i = next(k for k in range(5, len(tokens) - 3) if len(tokens[k].text) >= 2 and len(tokens[k + 2].text) >= 2)
    begin, end = starts[i] + 1, starts[i + 2] + 1
    stop = full.text[begin:end]
    assert full.text.find(stop) == begin
    rounds, streamed, cut = run(pair, prompt, GREEDY, max_tokens=60, stop=[stop], drafter="model")
    assert cut.stop_reason == StopReason.STOP_STRING
    assert cut.text == full.text[:begin]
    assert "".join(t.text for t in streamed) + cut.tail == cut.text
    assert stop not in "".join(t.text for t in streamed)
    # the rounds go as far as the reply: the last ends at the token that completed the stop string, and
    # marks it (it showed the target's token after it, which the reply never had: a new user's try)
    assert rounds[-1].end == "stop_string" and not any(r.end for r in rounds[:-1])
    assert [t for r in rounds for t in r.emitted] == list(cut.tokens) == [t.token for t in streamed]
    assert cut.stats.n_tokens == sum(r.n_reply_tokens for r in rounds)


@pytest.mark.network
def test_a_reply_cut_inside_a_character_ends_before_it(pair):
    """The token limit between the tokens of an emoji: the reply ended in "�" (a new user's try)."""
    prompt = prompt_tokens(pair.target, "<|im_start|>user\nReply with only emoji: a fish, a cat and a dog.<|im_end|>\n"
                                        "<|im_start|>assistant\n")
    _, _, full = run(pair, prompt, GREEDY, max_tokens=12, drafter="none")
    pieces = [pair.target.piece(t) for t in full.tokens]
    cut_inside = [n for n in range(1, len(pieces))          # limits that cut a character in two
                  if not _decodes(b"".join(pieces[:n]))]
    assert cut_inside, [p for p in pieces]                  # (the reply is emoji of several tokens each)
    for n in cut_inside[:3]:
        _, tokens, cut = run(pair, prompt, GREEDY, max_tokens=n, drafter="none")
        whole = b"".join(pieces[:n]).decode("utf-8", errors="ignore")
        assert cut.text == whole and "\ufffd" not in cut.text, n
        assert "".join(t.text for t in tokens) + cut.tail == cut.text


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


@pytest.mark.network
def test_a_reply_decoded_plainly_is_one_times_plain_however_it_ends(pair):
    """Plain decoding is 1.00× of plain, whether the reply ends on an end-of-reply token (whose pass is
    in the reply's time but not in its tokens: short replies read 0.5-0.95× before) or at max tokens."""
    # a short answer that ends by itself: which question the test model answers briefly depends on
    # the machine's kernels (on an Intel Xeon with AMX, repacking off, "Name one animal." rambled on)
    for question in ("Name one animal.", "What is the capital of France?", "What is 2+2?"):
        prompt = prompt_tokens(pair.target, f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n")
        rounds, tokens, ended = run(pair, prompt, GREEDY, max_tokens=64, enabled=False)
        if ended.stop_reason == StopReason.EOS:
            break
    s = ended.stats
    assert ended.stop_reason == StopReason.EOS and s.n_rounds == len(rounds) == s.n_tokens + 1 == len(tokens) + 1
    # (to within the time the loop spends asking for no draft, which plain's rate leaves out: ~0.2 %)
    assert s.measured_speedup == pytest.approx(1.0, abs=0.005) and s.n_tokens < 50
    _, _, cut = run(pair, prompt, GREEDY, max_tokens=len(tokens) - 1, enabled=False)
    assert cut.stop_reason == StopReason.MAX_TOKENS and cut.stats.n_rounds == cut.stats.n_tokens
    assert cut.stats.measured_speedup == pytest.approx(1.0, abs=0.005)


@pytest.mark.network
def test_full_context_stops_with_a_reason(test_model_path, q2k_draft_path):
    with ModelPair.load(test_model_path, q2k_draft_path, LoadOptions(n_ctx=256, n_threads=2)) as small:
        n_ctx = small.target_ctx.n_ctx                  # llama.cpp may round the size up
        words = " ".join(f"item{i}" for i in range(400))
        long_prompt = small.target.tokenize(
            f"<|im_start|>user\nCount on from this list and never stop: {words}", add_special=True, parse_special=True)
        prompt = long_prompt[:n_ctx - 24]               # room for about 24 tokens
        _, _, finish = run(small, prompt, GREEDY, max_tokens=500, drafter="model", draft_max=8)
        assert finish.stop_reason == StopReason.CONTEXT_FULL
        assert f"the context of {n_ctx} tokens is full" in finish.message
        assert len(prompt) + len(finish.tokens) == n_ctx + 1    # every slot used; the last token needs none
        too_long = long_prompt[:n_ctx + 10]
        _, _, refused = run(small, too_long, GREEDY, max_tokens=10)
        assert refused.stop_reason == StopReason.CONTEXT_FULL and refused.tokens == ()
        assert f"the prompt has {len(too_long)} tokens but the context holds {n_ctx}" in refused.message
        # the pair is still usable afterwards
        _, _, again = run(small, prompt[:20], GREEDY, max_tokens=5)
        assert len(again.tokens) >= 1


@pytest.mark.network
def test_a_context_rounded_up_reads_a_prompt_longer_than_the_size_asked_for(test_model_path):
    """-c 300 makes a context of 512 tokens, but llama.cpp caps a batch at the 300 asked for: a 400-token
    prompt read as one batch aborted the process (GGML_ASSERT n_tokens_all <= n_batch), as `tandem
    generate -c 300` with a long prompt did in a new user's try. Run apart, since the failure is an abort."""
    code = f"""if True:
        import numpy as np
        from desktop_app.engine import backend
        from desktop_app.engine.loading import load_model
        from desktop_app.engine.load_options import LoadOptions
        model = load_model({test_model_path!r}, LoadOptions(n_ctx=300, n_threads=2))
        ctx = backend.Context(model, 300, 2)
        tokens = model.tokenize(" ".join(f"item{{i}}" for i in range(200)))[:400]
        ctx.eval(tokens)
        print(ctx.n_ctx, len(tokens), len(ctx.tokens), int(np.isfinite(ctx.logits()).all()))
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["512", "400", "400", "1"]


@pytest.mark.network
def test_settings_change_between_rounds(pair):
    controls = Controls(SpecSettings(drafter="model", draft_max=2))
    gammas = []
    for ev in pair.generate(prompt_tokens(pair.target), GREEDY, controls, max_tokens=80):
        if isinstance(ev, RoundEvent):
            gammas.append((ev.drafter, ev.gamma))
            if ev.index == 3:
                controls.update(draft_max=6)
            if ev.index == 7:
                controls.update(enabled=False)
    assert all(g <= 2 for _, g in gammas[:4])
    assert any(g > 2 for _, g in gammas[4:8])
    assert all(d == "none" and g == 0 for d, g in gammas[8:])


@pytest.mark.network
def test_draft_p_min_and_draft_min(pair):
    prompt = prompt_tokens(pair.target)
    rounds, _, _ = run(pair, prompt, GREEDY, max_tokens=60, drafter="model", draft_max=8, draft_p_min=0.9)
    assert all(all(q >= 0.9 for q in r.q) for r in rounds)
    assert any(0 < r.gamma < 8 for r in rounds)
    rounds, _, _ = run(pair, prompt, GREEDY, max_tokens=60, drafter="model", draft_max=8, draft_p_min=0.9,
                       draft_min=3)
    assert all(r.gamma == 0 or r.gamma >= 3 for r in rounds)


@pytest.mark.network
def test_auto_mode_runs_and_drafts_within_bounds(pair):
    rounds, _, finish = run(pair, prompt_tokens(pair.target), GREEDY, max_tokens=80, drafter="model",
                            draft_max=8, auto=True)
    assert all(0 <= r.gamma <= AUTO_GAMMA_MAX for r in rounds)
    assert rounds[0].gamma == 0 or 1 in pair.decoder.costs.verify_s
    assert len(finish.tokens) == 80 or finish.stop_reason == StopReason.EOS


def test_invalid_settings_are_refused():
    with pytest.raises(ValueError, match="--draft-max must be between 1 and 32"):
        SpecSettings(draft_max=0)
    with pytest.raises(ValueError, match="--draft-max must be between 1 and 32"):
        SpecSettings(draft_max=33)
    with pytest.raises(ValueError, match="drafter"):
        SpecSettings(drafter="magic")
    controls = Controls()
    with pytest.raises(ValueError):
        controls.update(draft_min=9)
    assert controls.settings == SpecSettings()


@pytest.mark.network
def test_a_smaller_draft_context_falls_back_to_plain_steps(test_model_path, q2k_draft_path):
    with ModelPair.load(test_model_path, q2k_draft_path, LoadOptions(n_ctx=1024, n_threads=2),
                        LoadOptions(n_ctx=256, n_threads=2)) as p:
        words = " ".join(f"item{i}" for i in range(300))
        prompt = p.target.tokenize(f"<|im_start|>user\nCount on: {words}", add_special=True, parse_special=True)[:300]
        rounds, _, finish = run(p, prompt, GREEDY, max_tokens=20, drafter="model", draft_max=4)
        assert len(finish.tokens) == 20 and all(r.gamma == 0 for r in rounds)
