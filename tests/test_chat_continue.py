"""Continue: a reply that ended before its end (cut off at Max tokens, stopped) written on, into the same
message, on the real test pair."""
from __future__ import annotations

import dataclasses

import pytest

from desktop_app.chat.history import HistoryStore
from desktop_app.chat.rules import can_continue
from desktop_app.chat.server_session import ServerChatSession
from desktop_app.chat.session import CannotContinue, ChatSession, GenerationOptions
from desktop_app.engine import GREEDY, FinishEvent, LoadOptions, ModelPair, RoundEvent, SpecSettings, StopReason
from desktop_app.engine.events import TokenEvent

pytestmark = pytest.mark.network      # every test here needs a fetched model

PLAIN = SpecSettings(enabled=False)
PROMPT = "Write a short poem about the sea."


@pytest.fixture(scope="module")
def pair(test_model_path, q2k_draft_path):
    with ModelPair.load(test_model_path, q2k_draft_path, LoadOptions(n_ctx=2048, n_threads=2)) as p:
        yield p


@pytest.fixture
def session(pair, tmp_path):
    store = HistoryStore(tmp_path / "history.db")
    yield ChatSession(pair, store, flush_interval_s=0.0)
    store.close()


def options(max_tokens: int, spec: SpecSettings = PLAIN) -> GenerationOptions:
    return GenerationOptions(sampling=GREEDY, spec=spec, max_tokens=max_tokens)


def finish_of(events) -> FinishEvent:
    return [e for e in events if isinstance(e, FinishEvent)][-1]


def test_a_reply_cut_off_is_written_on_as_one_reply_would_have_been(session, pair):
    cid = session.store.create_conversation()
    list(session.send(cid, PROMPT, options(12)))
    first = session.store.messages(cid)[-1]
    assert first.stats["stop_reason"] == "max_tokens" and can_continue(session.store.messages(cid))
    # the prompt leaves the reply's turn open: the conversation's prompt, then the reply's own tokens
    conversation = session.store.conversation(cid)
    opened = session.prompt_tokens(conversation, open_last=True)
    conversation.messages = conversation.messages[:-1]
    assert opened == session.prompt_tokens(conversation) + first.token_ids
    evaluated = pair.target_ctx.n_evaluated
    finish = finish_of(session.continue_reply(cid, options(12)))
    messages = session.store.messages(cid)
    assert len(messages) == 2                                   # the same reply, not a second one
    whole = messages[-1]
    assert whole.id == first.id and whole.content.startswith(first.content) and len(whole.content) > len(first.content)
    assert whole.token_ids[:12] == first.token_ids and len(whole.token_ids) == 24
    assert (finish.text, list(finish.tokens)) == (whole.content, whole.token_ids)   # the window's event: the whole
    assert whole.settings["parts"] == 2 and whole.status == "done"
    # read from the cache: the context held the reply's tokens but the last, which the first step reads
    assert pair.target_ctx.n_evaluated - evaluated == 12
    # greedy plain decoding: exactly the reply written in one run of 24 tokens
    list(session.regenerate(cid, options(24)))
    again = session.store.messages(cid)[-1]
    assert (again.content, again.token_ids) == (whole.content, whole.token_ids)


def test_the_statistics_are_of_the_whole_reply(session):
    cid = session.store.create_conversation()
    spec = SpecSettings(drafter="model", draft_max=3)
    list(session.send(cid, PROMPT, options(10, spec)))
    first = session.store.messages(cid)[-1]
    list(session.continue_reply(cid, options(14, spec)))
    whole = session.store.messages(cid)[-1]
    s, rounds = whole.stats, whole.rounds
    assert s["n_tokens"] == 24 == len(whole.token_ids)
    assert s["n_rounds"] == len(rounds) > len(first.rounds)
    assert rounds[:len(first.rounds)] == first.rounds          # its first run's rounds, then the second's
    assert s["n_drafted"] == sum(len(r["d"]) for r in rounds) and s["n_accepted"] == sum(r["a"] for r in rounds)
    assert s["acceptance_rate"] == pytest.approx(s["n_accepted"] / s["n_drafted"])
    assert s["ttft_s"] == first.stats["ttft_s"] and s["n_prompt_tokens"] == first.stats["n_prompt_tokens"]
    assert s["t_draft_s"] > first.stats["t_draft_s"] and s["t_total_s"] > first.stats["t_total_s"]
    # its speed: all its tokens over both runs' decoding time
    second_s = s["n_tokens"] / s["tokens_per_s"] - first.stats["n_tokens"] / first.stats["tokens_per_s"]
    assert 0 < second_s < s["t_total_s"] - first.stats["t_total_s"]
    assert s["stop_reason"] == "max_tokens"


def test_a_stopped_reply_is_continued_and_a_finished_one_is_not(session):
    cid = session.store.create_conversation()
    events = session.send(cid, "Write a long story about a dragon.", options(400))
    for ev in events:
        if isinstance(ev, RoundEvent) and ev.index == 5:
            session.controls.cancel()
    stopped = session.store.messages(cid)[-1]
    assert stopped.status == "cancelled" and can_continue(session.store.messages(cid))
    finish = finish_of(session.continue_reply(cid, options(6)))
    whole = session.store.messages(cid)[-1]
    assert whole.status == "done" and finish.stop_reason == StopReason.MAX_TOKENS
    assert whole.content.startswith(stopped.content) and len(whole.token_ids) == len(stopped.token_ids) + 6
    assert whole.rounds[len(stopped.rounds) - 1]["end"] == "cancelled"   # (the strip marks where it was stopped)
    # a reply that ended by itself has nothing to continue
    list(session.send(cid, "Say hello.", options(200)))
    assert session.store.messages(cid)[-1].stats["stop_reason"] == "eos"
    assert not can_continue(session.store.messages(cid))
    with pytest.raises(CannotContinue):
        session.continue_reply(cid, options(10))


def test_a_character_cut_in_two_at_the_seam_is_whole(session):
    """Cut off between the bytes of one character, the reply's text left it out; the run that writes on
    reads the reply's last tokens first, so the character comes whole (decoded alone, its last bytes
    read "��")."""
    cid = session.store.create_conversation()
    list(session.send(cid, "Write the word hello in Japanese characters.", options(3)))
    cut = session.store.messages(cid)[-1]
    pieces = b"".join(session.pair.target.piece(t) for t in cut.token_ids)
    with pytest.raises(UnicodeDecodeError):                     # (the cut falls inside a character)
        pieces.decode("utf-8")
    list(session.continue_reply(cid, options(7)))
    whole = session.store.messages(cid)[-1]
    list(session.regenerate(cid, options(10)))
    one_run = session.store.messages(cid)[-1]
    assert whole.token_ids == one_run.token_ids
    assert whole.content == one_run.content and "\ufffd" not in whole.content


def test_a_run_that_writes_nothing_leaves_the_reply_as_it_was(session):
    cid = session.store.create_conversation()
    list(session.send(cid, PROMPT, options(12)))
    before = session.store.messages(cid)[-1]
    # stopped before its first round
    session.controls.cancel()
    events = session.continue_reply(cid, options(12))
    session.controls.cancel()                                   # (continue_reply's run resets it: Esc at once)
    finish = finish_of(events)
    after = session.store.messages(cid)[-1]
    assert dataclasses.astuple(after) == dataclasses.astuple(before)
    assert finish.text == before.content and finish.stats.n_tokens == 12
    # walked away from between a round and its tokens (the window closing, say)
    events = session.continue_reply(cid, options(12))
    assert isinstance(next(events), RoundEvent)
    events.close()
    assert dataclasses.astuple(session.store.messages(cid)[-1]) == dataclasses.astuple(before)
    # ... and after a few tokens: kept, as stopped, written in two runs, its figures left to its rounds
    events = session.continue_reply(cid, options(12))
    n = 0
    for event in events:
        n += isinstance(event, TokenEvent)
        if n == 3:
            break
    events.close()
    kept = session.store.messages(cid)[-1]
    assert kept.status == "cancelled" and kept.stats is None and kept.settings["parts"] == 2
    assert kept.content.startswith(before.content) and len(kept.token_ids) == 15
    assert len(kept.rounds) > len(before.rounds)


def test_replies_whose_tokens_are_not_kept(session):
    cid = session.store.create_conversation()
    list(session.send(cid, PROMPT, options(12)))
    reply = session.store.messages(cid)[-1]
    # another model's reply (another vocabulary): its ids are not this target's, so its text is read,
    # and the reply keeps no ids, not even while it is written
    session.store.update_message(reply.id, settings={**reply.settings, "vocab": "another"})
    events = session.continue_reply(cid, options(6))
    next(e for e in events if isinstance(e, TokenEvent))
    assert session.store.messages(cid)[-1].token_ids is None
    list(events)
    whole = session.store.messages(cid)[-1]
    assert whole.token_ids is None and whole.content.startswith(reply.content) and whole.stats["n_tokens"] == 18
    # a llama-server's reply: its statistics are a server's; and a llama-server writes only new replies
    session.store.update_message(reply.id, settings={"server": "http://127.0.0.1:8080"})
    with pytest.raises(CannotContinue, match="llama-server"):
        session.continue_reply(cid, options(6))
    with pytest.raises(CannotContinue, match="llama-server"):
        ServerChatSession(None, session.store).continue_reply(cid, options(6))


def test_a_reply_cut_just_before_its_end_is_ended_by_continue(session):
    """Cut off exactly where the model would have ended it, Continue's first token is the end: the reply
    is then finished (not left "cut off", offering Continue again for nothing)."""
    cid = session.store.create_conversation()
    list(session.send(cid, "Say hello.", options(200)))
    n = session.store.messages(cid)[-1].stats["n_tokens"]
    list(session.regenerate(cid, options(n)))
    cut = session.store.messages(cid)[-1]
    assert cut.stats["stop_reason"] == "max_tokens" and can_continue(session.store.messages(cid))
    finish = finish_of(session.continue_reply(cid, options(20)))
    ended = session.store.messages(cid)[-1]
    assert finish.stop_reason == StopReason.EOS and ended.content == cut.content and ended.token_ids == cut.token_ids
    assert ended.status == "done" and ended.stats["stop_reason"] == "eos" and ended.stats["n_tokens"] == n
    assert len(ended.rounds) == len(cut.rounds) + 1 and ended.settings["parts"] == 2
    assert not can_continue(session.store.messages(cid))


def test_ids_kept_as_a_reply_broke_off_are_not_read_where_stop_strings_apply(session):
    """Its last tokens' text may have been held back for a stop string and lost with the engine: the
    reply's text is read instead of its ids."""
    cid = session.store.create_conversation()
    list(session.send(cid, PROMPT, options(12)))
    reply = session.store.messages(cid)[-1]
    session.store.update_message(reply.id, status="interrupted", stats=None)
    stopping = dataclasses.replace(options(6), stop=("zebra crossing",))
    list(session.continue_reply(cid, stopping))
    whole = session.store.messages(cid)[-1]
    assert whole.content.startswith(reply.content) and whole.token_ids is None and whole.stats["n_tokens"] == 18
