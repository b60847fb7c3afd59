"""Tandem through a real llama-server (built from the pinned llama-cpp-python sdist's llama.cpp, cached:
scripts/build_llama_tools.py), on 127.0.0.1 with the SmolLM2 pair and --spec-type draft-simple.

The rounds rebuilt from the streamed timings must be possible rounds (0 <= k <= d <= n_max), add up to
the server's own final timings and to its /metrics counters (per draft position too), and the greedy
text must be the local engine's plain greedy text (up to a near-tie of the target's two best tokens,
which batched and single-token passes round differently). Every failure gives its message and keeps
what was received."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from desktop_app.chat.compare import NEAR_TIE
from desktop_app.engine.events import FinishEvent, RoundEvent, TokenEvent, TokenKind
from desktop_app.engine.sampling import SamplingParams
from desktop_app.remote.server import LlamaServer, ServerError
from llama_tools import KEY, N_MAX, Server, free_port

pytestmark = [pytest.mark.network, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "Write a Python function that reverses a string, and explain it in two sentences."
GREEDY = SamplingParams(temperature=0.0, top_k=40, top_p=0.95, min_p=0.05, seed=1)
MESSAGES = [{"role": "user", "content": PROMPT}]


def _reply(server: LlamaServer, n: int = 64, params: SamplingParams = GREEDY):
    events = list(server.generate(MESSAGES, params, n))
    rounds = [e for e in events if isinstance(e, RoundEvent)]
    [finish] = [e for e in events if isinstance(e, FinishEvent)]
    return rounds, finish


def test_rebuilt_rounds_add_up_to_the_server_s_timings_and_metrics(spec_server):
    server = LlamaServer(spec_server.url, KEY)
    info = server.connect()
    assert info.speculative is True and info.metrics
    rounds, finish = _reply(server)
    assert "draft-simple" in server.info.spec_types          # /slots names it once a slot has run
    assert not finish.message, finish.message
    timings, reply = server.last_reply.final_timings, server.last_reply
    drafted = [r.gamma for r in rounds]
    kept = [r.accepted for r in rounds]
    assert all(0 <= k <= d <= N_MAX for d, k in zip(drafted, kept)), list(zip(drafted, kept))
    assert sum(drafted) == timings["draft_n"] and sum(kept) == timings["draft_n_accepted"]
    eos = finish.stop_reason.value == "eos"              # the end-of-generation token: in a round, not the count
    assert sum(len(r.emitted_text) for r in rounds) == timings["predicted_n"] == finish.stats.n_tokens + eos
    assert "".join(t for r in rounds for t in r.emitted_text) == finish.text
    # /metrics: the same totals, the number of verify steps, and kept drafts per position
    m = reply.metrics_delta
    assert m["spec_decode_num_draft_tokens_total"] == sum(drafted)
    assert m["spec_decode_num_accepted_tokens_total"] == sum(kept)
    assert m["spec_decode_num_drafts_total"] == sum(1 for d in drafted if d)
    assert reply.accepted_per_pos == [sum(1 for k in kept if k > i) for i in range(len(reply.accepted_per_pos))]
    assert len(reply.accepted_per_pos) == N_MAX and server.info.n_max == N_MAX
    # kinds: k kept drafts, then the target's correction (k < d) or bonus (k == d); plain steps alone
    for r in rounds:
        if r.gamma:
            assert list(r.kinds[:r.accepted]) == [TokenKind.ACCEPTED] * r.accepted
            if len(r.kinds) > r.accepted:
                assert r.kinds[r.accepted] == (TokenKind.BONUS if r.accepted == r.gamma else TokenKind.CORRECTION)
            assert r.drafted_text[r.accepted:] == ("?",) * (r.gamma - r.accepted)
        else:
            assert r.kinds == (TokenKind.PLAIN,)
    assert sum(kept) > 0 and any(k < d for d, k in zip(drafted, kept))    # it drafted, kept and rejected
    # every drafting round but a last one cut by the end brought exactly its k kept drafts and one more
    assert all(len(r.emitted_text) == r.accepted + 1 for r in rounds[:-1] if r.gamma)
    # and the stats the panel shows agree with the rounds
    s = finish.stats
    assert (s.n_drafted, s.n_accepted) == (sum(drafted), sum(kept)) and s.c is None


def test_greedy_text_equals_the_local_plain_greedy_text(spec_server, test_model_path):
    server = LlamaServer(spec_server.url, KEY)
    _, finish = _reply(server, n=48)
    local = subprocess.run([sys.executable, "-m", "desktop_app", "generate", "-m", test_model_path, "-p", PROMPT,
                            "-n", "48", "--drafter", "none", "--temp", "0", "--json"],
                           capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert local.returncode == 0, local.stderr[-2000:]
    [sample] = json.loads(local.stdout)["samples"]
    if finish.text != sample["text"]:
        gap = _gap_where_they_part(test_model_path, sample["tokens"], finish.text)
        assert gap <= NEAR_TIE, f"the texts part where the target's top two logits are {gap:.4f} apart"


def test_a_reply_s_end_is_marked_and_counted_as_a_local_reply_s(spec_server, test_model_path):
    """The round that reaches the token limit carries the limit's marker when it is handed on (the
    server's "length" chunk that follows brings no token). A reply that ends with an end-of-generation
    token has it as its last round's last token, marked, but not in the text or the token count: as
    a local reply, whose count the same greedy reply matches."""
    server = LlamaServer(spec_server.url, KEY)
    rounds, finish = _reply(server, n=24)
    assert finish.stop_reason.value == "max_tokens" and finish.stats.n_tokens == 24
    assert rounds[-1].end == "max_tokens" and not any(r.end for r in rounds[:-1])
    prompt = "Answer with one word: is the sky blue?"
    events = list(server.generate([{"role": "user", "content": prompt}], GREEDY, 64))
    rounds = [e for e in events if isinstance(e, RoundEvent)]
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    [finish] = [e for e in events if isinstance(e, FinishEvent)]
    assert finish.stop_reason.value == "eos" and rounds[-1].end == "eos" and rounds[-1].emitted_text[-1] == ""
    predicted = server.last_reply.final_timings["predicted_n"]
    assert sum(len(r.emitted_text) for r in rounds) == predicted
    assert finish.stats.n_tokens == len(tokens) == predicted - 1
    local = subprocess.run([sys.executable, "-m", "desktop_app", "generate", "-m", test_model_path, "-p", prompt,
                            "-n", "64", "--drafter", "none", "--temp", "0", "--json"],
                           capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert local.returncode == 0, local.stderr[-2000:]
    [sample] = json.loads(local.stdout)["samples"]
    if sample["text"] == finish.text:                 # (they may part at a near-tie: see the test above)
        assert len(sample["tokens"]) == finish.stats.n_tokens
    # a stop string also ends with "stop", and its last token is a real one: counted, as locally
    events = list(server.generate(MESSAGES, GREEDY, 64, stop=["def"]))
    [finish] = [e for e in events if isinstance(e, FinishEvent)]
    assert finish.stats.n_tokens == server.last_reply.final_timings["predicted_n"] > 0
    local = subprocess.run([sys.executable, "-m", "desktop_app", "generate", "-m", test_model_path, "-p", PROMPT,
                            "-n", "64", "--drafter", "none", "--temp", "0", "--stop", "def", "--json"],
                           capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert local.returncode == 0, local.stderr[-2000:]
    [sample] = json.loads(local.stdout)["samples"]
    if sample["text"] == finish.text:
        assert len(sample["tokens"]) == finish.stats.n_tokens


def _gap_where_they_part(model_path: str, tokens: list[int], other: str) -> float:
    """The local target's top-two logit gap at the first local token the other text does not continue."""
    import numpy as np

    from desktop_app.chat.template import ChatTemplate, Message
    from desktop_app.engine import LoadOptions, ModelPair

    with ModelPair.load(model_path, None, LoadOptions(n_ctx=2048), LoadOptions(n_ctx=2048)) as pair:
        prompt = ChatTemplate(pair.target).tokenize([Message("user", PROMPT)])
        text, j = "", len(tokens)
        for i, t in enumerate(tokens):
            piece = pair.target.piece(t).decode("utf-8", "replace")
            if not other.startswith(text + piece):
                j = i
                break
            text += piece
        ctx = pair.target_ctx
        ctx.clear()
        ctx.eval(prompt + tokens[:j], logits="last")
        logits = np.sort(np.asarray(ctx.logits(-1)))[::-1]
        return float(logits[0] - logits[1])


def test_a_wrong_or_missing_key_is_refused_with_its_message(spec_server):
    with pytest.raises(ServerError) as wrong:
        LlamaServer(spec_server.url, "not-the-key").connect()
    assert wrong.value.kind == "auth" and "refused the API key" in str(wrong.value) and "--api-key" in str(wrong.value)
    with pytest.raises(ServerError) as missing:
        LlamaServer(spec_server.url).connect()
    assert missing.value.kind == "auth" and "needs one" in str(missing.value)


def test_an_unreachable_server_is_named_with_what_to_check():
    port = free_port()                                  # nothing listens there
    with pytest.raises(ServerError) as exc:
        LlamaServer(f"127.0.0.1:{port}").connect()
    assert exc.value.kind == "unreachable" and f"127.0.0.1:{port}" in str(exc.value)
    assert "nothing is listening there" in str(exc.value)


def test_a_server_without_speculation_is_said_and_decodes_plainly(llama_tools, test_model_path, tmp_path):
    plain = Server(llama_tools, "-m", test_model_path, log=tmp_path / "plain.log")
    try:
        server = LlamaServer(plain.url)
        info = server.connect()
        assert info.speculative is False and "not speculating" in info.describe()
        assert "--spec-type" in info.command_hint() and "-md" in info.command_hint()
        rounds, finish = _reply(server, n=16)
        assert rounds and all(r.gamma == 0 and r.kinds == (TokenKind.PLAIN,) for r in rounds)
        assert finish.text and not finish.message
        # each plain step is handed on as it comes: stopping after the first ends the reply there
        events = []
        for event in server.generate(MESSAGES, GREEDY, 200):
            events.append(event)
            if isinstance(event, RoundEvent) and len(events) == 1:
                server.cancel()
        [stopped] = [e for e in events if isinstance(e, FinishEvent)]
        assert stopped.stop_reason.value == "cancelled" and stopped.stats.n_tokens < 20
        cli = subprocess.run([sys.executable, "-m", "desktop_app", "generate", "--server", plain.url, "-p", "Hi",
                              "-n", "8"], capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert cli.returncode == 0 and "does not speculate" in cli.stderr, cli.stderr
        assert re.search(r"; stopped by (the token limit \(-n 8\)|its end \(the model's end token\))$", cli.stderr, re.M), cli.stderr
    finally:
        plain.stop()


def test_a_server_that_dies_mid_reply_leaves_the_partial_reply_and_says_so(llama_tools, test_model_path,
                                                                         q2k_draft_path, tmp_path, qtbot):
    doomed = Server(llama_tools, "-m", test_model_path, "-md", q2k_draft_path, "--spec-type", "draft-simple",
                    "--metrics", log=tmp_path / "doomed.log")       # (its /metrics is gone too when it dies)
    try:
        server = LlamaServer(doomed.url)
        server.connect()
        events = []
        for event in server.generate(MESSAGES, GREEDY, 400):
            events.append(event)
            if len([e for e in events if isinstance(e, RoundEvent)]) == 3:
                doomed.proc.kill()                    # as a crash or a restart would
        [finish] = [e for e in events if isinstance(e, FinishEvent)]
        assert "mid-reply" in finish.message and "kept" in finish.message
        assert finish.text and finish.stop_reason.value == "cancelled"
        assert finish.text == "".join(t for e in events if isinstance(e, RoundEvent) for t in e.emitted_text)
        from desktop_app.commands.remote import _stopped_by      # the summary's words: not "stopped by Ctrl+C"
        assert _stopped_by(finish, 400, False) == "stopped: the server broke off"
        from desktop_app.ui.spec_panel import SpecPanel                # the panel's words: not "stopped" either
        panel = SpecPanel()
        qtbot.addWidget(panel)
        panel.begin("t")
        panel.finish(finish.stats, finish.end_after_rounds, finish.broke_off)
        assert panel.header.text().endswith("(interrupted)")
    finally:
        doomed.stop()


def test_cancel_stops_the_stream_and_keeps_the_text(spec_server):
    server = LlamaServer(spec_server.url, KEY)
    events = []
    for event in server.generate(MESSAGES, GREEDY, 400):
        events.append(event)
        if len([e for e in events if isinstance(e, RoundEvent)]) == 2:
            threading.Thread(target=server.cancel).start()
    [finish] = [e for e in events if isinstance(e, FinishEvent)]
    assert finish.stop_reason.value == "cancelled" and finish.text and not finish.message
    assert finish.stats.n_tokens < 400


def test_generate_cli_through_the_server(spec_server):
    out = subprocess.run([sys.executable, "-m", "desktop_app", "generate", "--server", spec_server.url, "--api-key", KEY,
                          "-p", PROMPT, "-n", "32", "--json"], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={**os.environ})
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    [sample] = doc["samples"]
    assert doc["speculation"]["speculative"] and sample["text"]
    assert sum(len(r["drafted"]) for r in sample["rounds"]) == sample["server_timings"]["draft_n"]
    bad = subprocess.run([sys.executable, "-m", "desktop_app", "generate", "--server", spec_server.url, "-p", "x",
                          "--json"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert bad.returncode != 0 and "API key" in json.loads(bad.stdout)["error"]
    local_flag = subprocess.run([sys.executable, "-m", "desktop_app", "generate", "--server", spec_server.url,
                                 "-m", "x.gguf", "-p", "x"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert local_flag.returncode != 0 and "-m is for local models only" in local_flag.stderr
    # -n -1, llama.cpp's "no limit", reaches the server as its own (it was refused here), and the reply is not
    # taken to end at its first token by the limit
    unlimited = subprocess.run([sys.executable, "-m", "desktop_app", "generate", "--server", spec_server.url,
                                "--api-key", KEY, "-p", "Say hi.", "-n", "-1", "--json"], capture_output=True,
                               text=True, timeout=300, cwd=ROOT)
    assert unlimited.returncode == 0, unlimited.stderr
    [sample] = json.loads(unlimited.stdout)["samples"]
    assert sample["stats"]["n_tokens"] > 1 and sample["stats"]["stop_reason"] == "eos", sample["stats"]
    assert [r.get("end", "") for r in sample["rounds"]].count("") == len(sample["rounds"]) - 1


def test_bench_compares_the_server_with_local_decoding(spec_server, test_model_path, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(PROMPT)
    out = subprocess.run([sys.executable, "-m", "desktop_app", "bench", "-m", test_model_path, "--server", spec_server.url,
                          "--api-key", KEY, "--drafter", "lookup", "--draft-max", "4", "-n", "24", "--repeat", "1",
                          "--prompts", str(prompts), "--json", str(tmp_path / "bench.json"), "-q"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads((tmp_path / "bench.json").read_text())
    rows = {r["setting"]: r for r in doc["summary"]}
    assert {"plain", "lookup γ=4", "llama-server"} <= set(rows)
    server_row = rows["llama-server"]
    assert server_row["speedup"] and server_row["acceptance_rate"] is not None     # it drafted, and was timed
    assert "llama-server" in out.stdout and "speculating" in doc["meta"]["server"]


def test_a_conversation_the_server_cannot_hold_is_refused_and_adds_nothing(spec_server, tmp_path):
    """The server's context (2048 tokens) cannot hold this: the chat session says so as for local models
    (dropping turns offered when there are several), and stores no reply."""
    from desktop_app.chat.history import HistoryStore
    from desktop_app.chat.server_session import ServerChatSession
    from desktop_app.chat.session import ContextOverflow, GenerationOptions

    store = HistoryStore(tmp_path / "history.db")
    session = ServerChatSession(LlamaServer(spec_server.url, KEY), store)
    session.server.connect()
    cid = store.create_conversation()
    text = "Summarise this. " + "The quick brown fox jumps over the lazy dog. " * 250
    session.add_user_message(cid, text)
    with pytest.raises(ContextOverflow) as exc:
        session.reply(cid, GenerationOptions(sampling=GREEDY, max_tokens=16))
    assert "context holds" in str(exc.value) and exc.value.n_prompt > exc.value.n_ctx > 0
    assert str(exc.value).startswith(f"This message needs {exc.value.n_prompt} tokens")   # (a first message)
    assert "start the server with a larger context (its -c)" in str(exc.value)     # (not Tandem's setting)
    assert [m.role for m in store.messages(cid)] == ["user"]
    assert session.take_back(cid, text) and store.messages(cid) == []     # (the window's box gets it back)
    # after one earlier turn, leaving turns out (one at a time here) would leave the message alone: said so
    two = store.create_conversation()
    session.add_user_message(two, "Hello.")
    store.add_message(two, "assistant", "Hello! How can I help?")
    session.add_user_message(two, text)
    with pytest.raises(ContextOverflow) as exc:
        session.reply(two, GenerationOptions(sampling=GREEDY, max_tokens=16))
    assert exc.value.can_drop_turns and exc.value.only_last and "leave out every earlier turn" in str(exc.value)
    store.close()


def test_https_works_and_an_untrusted_certificate_is_named(spec_server, tmp_path, monkeypatch):
    from llama_tools import TlsProxy, self_signed_cert

    cert, key = self_signed_cert(tmp_path)
    proxy = TlsProxy(spec_server.port, cert, key)
    try:
        url = f"https://127.0.0.1:{proxy.port}"
        with pytest.raises(ServerError) as untrusted:            # not in the system's trust store
            LlamaServer(url, KEY).connect()
        assert untrusted.value.kind == "unreachable" and "certificate is not trusted" in str(untrusted.value)
        assert "SSL_CERT_FILE" in str(untrusted.value)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))          # trusted, as a user's own CA would be
        server = LlamaServer(url, KEY)
        assert server.connect().speculative is True
        rounds, finish = _reply(server, n=24)
        assert finish.text and not finish.message and sum(r.gamma for r in rounds) > 0
    finally:
        proxy.stop()
