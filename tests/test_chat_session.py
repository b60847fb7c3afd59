"""Multi-turn chat on the real test pair: KV reuse, regenerate, edit, context limits, streaming writes, and
Continue (a reply that ended before its end written on, into the same message)."""
from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from desktop_app.chat.history import HistoryStore
from desktop_app.chat.rules import can_continue
from desktop_app.chat.server_session import ServerChatSession
from desktop_app.chat.session import (DEFAULT_TITLE, CannotContinue, ChatSession, ContextOverflow,
                                      GenerationOptions)
from desktop_app.engine import GREEDY, FinishEvent, LoadOptions, ModelPair, RoundEvent, SpecSettings, StopReason
from desktop_app.engine.events import TokenEvent

pytestmark = pytest.mark.network      # every test here needs a fetched model

OPTIONS = GenerationOptions(sampling=GREEDY, spec=SpecSettings(drafter="model", draft_max=4), max_tokens=24)


@pytest.fixture(scope="module")
def pair(test_model_path, q2k_draft_path):
    with ModelPair.load(test_model_path, q2k_draft_path, LoadOptions(n_ctx=2048, n_threads=2)) as p:
        yield p


@pytest.fixture
def session(pair, tmp_path):
    store = HistoryStore(tmp_path / "history.db")
    yield ChatSession(pair, store, flush_interval_s=0.0)
    store.close()


class Counted:
    """Evaluated-token counts of both contexts at the moment the first round happened."""

    def __init__(self, pair):
        self.pair = pair
        self.before = (pair.target_ctx.n_evaluated, pair.draft_ctx.n_evaluated)
        self.at_first_round = None
        self.first_round = None
        self.finish = None

    def run(self, events):
        for ev in events:
            if isinstance(ev, RoundEvent) and self.first_round is None:
                self.first_round = ev
                self.at_first_round = (self.pair.target_ctx.n_evaluated - self.before[0],
                                       self.pair.draft_ctx.n_evaluated - self.before[1])
            elif isinstance(ev, FinishEvent):
                self.finish = ev
        return self

    def prompt_evaluated(self) -> tuple[int, int]:
        """Prompt tokens each model evaluated before its first round's own work: the target's verify
        batch (1 + γ) and the draft's γ - 1 extra steps are subtracted."""
        g = self.first_round.gamma
        return self.at_first_round[0] - (1 + g), self.at_first_round[1] - max(0, g - 1)


def test_each_turn_evaluates_only_its_new_tokens(session, pair):
    """Turn N's prompt starts with turn N-1's prompt and reply, token for token, and both models
    evaluate only what comes after (the draft perhaps also the reply's last token, which it never saw)."""
    cid = session.store.create_conversation(system_prompt="You are a helpful assistant.")
    first = Counted(pair).run(session.send(cid, "What is the capital of France?", OPTIONS))
    assert first.finish.text
    assert session.store.conversation(cid).title == "What is the capital of France?"
    for turn, question in enumerate(["And of Italy?", "And of Spain? Answer in one word.", "Thanks!"], start=2):
        conv = session.store.conversation(cid)
        reply_tokens = conv.messages[-1].token_ids
        before = session.prompt_tokens(_without_last_reply(conv)) + reply_tokens
        counted = Counted(pair).run(session.send(cid, question, OPTIONS))
        prompt = session.prompt_tokens(_without_last_reply(session.store.conversation(cid)))
        assert prompt[:len(before)] == before, f"turn {turn}: the previous turn's tokens changed"
        new = len(prompt) - len(before)
        target_new, draft_new = counted.prompt_evaluated()
        # (a reply that ended on an end-of-turn token the draft had guessed may leave that token and the
        # template's next one in the caches already, so the count can be a little below `new`)
        assert 1 <= target_new <= new, f"turn {turn}: target evaluated {target_new}, {new} are new"
        assert 1 <= draft_new <= new + 1, f"turn {turn}: draft evaluated {draft_new}, {new} are new"
        assert counted.finish.stats.n_prompt_evaluated == target_new + 1


def _without_last_reply(conv):
    conv.messages = conv.messages[:-1]
    return conv


def test_regenerate_reevaluates_nothing_of_the_prompt(session, pair):
    cid = session.store.create_conversation()
    Counted(pair).run(session.send(cid, "Name a colour.", OPTIONS))
    before = session.store.messages(cid)
    counted = Counted(pair).run(session.regenerate(cid, GenerationOptions(
        sampling=GREEDY, spec=SpecSettings(enabled=False), max_tokens=24)))
    after = session.store.messages(cid)
    assert len(after) == len(before) and after[-1].created_at > before[-1].created_at
    assert counted.finish.stats.n_prompt_evaluated == 1        # only the last prompt token, in the verify batch
    assert after[-1].content == before[-1].content             # greedy: the same reply again
    [kept] = session.store.earlier_replies(cid, after[-1].position)    # the one it replaced stays within reach
    assert (kept.content, kept.created_at, kept.token_ids) == (before[-1].content, before[-1].created_at,
                                                               before[-1].token_ids)
    # stopped before its first token, a regenerate gives the place back: an empty reply was the newest version
    events = session.regenerate(cid, OPTIONS)
    assert isinstance(next(events), RoundEvent)              # (a round comes before its tokens: no text yet)
    events.close()
    assert session.store.messages(cid)[-1].created_at == after[-1].created_at
    assert session.store.last_reply_versions(cid) == [kept.id, None]


def test_edit_reevaluates_from_the_first_differing_token(session, pair):
    cid = session.store.create_conversation(system_prompt="Answer briefly.")
    Counted(pair).run(session.send(cid, "What is two plus two?", OPTIONS))
    Counted(pair).run(session.send(cid, "What is three plus three?", OPTIONS))
    conv = session.store.conversation(cid)
    old_prompt = session.prompt_tokens(_without_last_reply(conv))
    counted = Counted(pair).run(session.edit_last_user_message(cid, "What is three times three?", OPTIONS))
    conv = session.store.conversation(cid)
    assert [m.content for m in conv.messages if m.role == "user"] == ["What is two plus two?",
                                                                      "What is three times three?"]
    new_prompt = session.prompt_tokens(_without_last_reply(conv))
    common = next(i for i, (a, b) in enumerate(zip(old_prompt, new_prompt)) if a != b)
    assert counted.finish.stats.n_prompt_evaluated == len(new_prompt) - common
    assert conv.title == "What is two plus two?"              # (the second message edited: the title stays)


def test_a_title_made_from_the_first_message_follows_its_edit(session):
    """Edited from Australia to New Zealand, the conversation stayed "What is the capital of Australia?" (a
    new user's try); a title the user gave stays."""
    store = session.store
    cid = store.create_conversation()
    session.add_user_message(cid, "What is the capital of Australia?")
    store.add_message(cid, "assistant", "Canberra.")
    session.replace_last_user_message(cid, "What is the capital of New Zealand?")
    assert store.conversation(cid).title == "What is the capital of New Zealand?"
    store.rename(cid, "Capitals")
    session.replace_last_user_message(cid, "What is the capital of Chile?")
    assert store.conversation(cid).title == "Capitals"


def test_switching_conversations_reuses_the_shared_prefix(session, pair):
    a = session.store.create_conversation(system_prompt="You answer in French.")
    b = session.store.create_conversation(system_prompt="You answer in French.")
    Counted(pair).run(session.send(a, "Hello!", OPTIONS))
    counted = Counted(pair).run(session.send(b, "Good morning!", OPTIONS))
    prompt_b = session.prompt_tokens(_without_last_reply(session.store.conversation(b)))
    prompt_a = session.prompt_tokens(_without_last_reply(session.store.conversation(a)))
    common = next(i for i, (x, y) in enumerate(zip(prompt_a, prompt_b)) if x != y)
    assert common > 5
    assert counted.finish.stats.n_prompt_evaluated == len(prompt_b) - common


def test_full_conversation_offers_to_drop_old_turns(test_model_path, tmp_path):
    with ModelPair.load(test_model_path, None, LoadOptions(n_ctx=512, n_threads=2)) as small:
        store = HistoryStore(tmp_path / "h.db")
        chat = ChatSession(small, store)
        options = GenerationOptions(sampling=GREEDY, spec=SpecSettings(enabled=False), max_tokens=40)
        cid = store.create_conversation(system_prompt="SYSTEM-RULES")
        for i in range(12):                                   # long turns, written directly
            store.add_message(cid, "user", f"Question {i}: " + "tell me more " * 12)
            store.add_message(cid, "assistant", f"Answer {i}: " + "here is more " * 12)
        store.add_message(cid, "user", "Last question?")
        with pytest.raises(ContextOverflow) as info:
            list(chat.reply(cid, options))
        assert info.value.can_drop_turns and "leave out the oldest turns" in str(info.value)
        assert not info.value.only_last                        # (a few of the latest turns fit)
        assert len(store.messages(cid)) == 25                  # nothing lost, nothing half-written
        # where only the last message fits, leaving turns out leaves it alone, and that is said (a new
        # user's try: "Now give it a title." after a long story, sent alone; the model named another story)
        story = store.create_conversation()
        store.add_message(story, "user", "Write a long story about a cat.")
        store.add_message(story, "assistant", "Once upon a time " * 130)
        store.add_message(story, "user", "Now give it a title.")
        with pytest.raises(ContextOverflow) as info:
            list(chat.reply(story, options))
        assert info.value.can_drop_turns and info.value.only_last
        assert "leave out every earlier turn (only the last message fits" in str(info.value)
        assert "use a larger context size" in str(info.value)
        first = chat.drop_oldest_turns(cid, options)
        assert first > 0 and store.messages(cid)[first].role == "user"
        events = list(chat.reply(cid, options))
        assert isinstance(events[-1], FinishEvent) and events[-1].stop_reason != StopReason.CONTEXT_FULL
        prompt_text = small.target.detokenize(chat.prompt_tokens(store.conversation(cid)))
        assert "SYSTEM-RULES" in prompt_text and "Question 0:" not in prompt_text
        assert len(store.messages(cid)) == 26                  # the history keeps every turn
        # an edit into a message the context cannot hold is refused before it changes the history
        kept = [(m.role, m.content) for m in store.messages(cid)]
        with pytest.raises(ContextOverflow) as info:
            list(chat.edit_last_user_message(cid, "word " * 700, options))
        assert "shorten the message" in str(info.value) and [(m.role, m.content) for m in store.messages(cid)] == kept
        # one message longer than the context: only a new conversation or a shorter message helps
        huge = store.create_conversation()
        store.add_message(huge, "user", "word " * 700)
        with pytest.raises(ContextOverflow) as info:
            list(chat.reply(huge, options))
        assert not info.value.can_drop_turns and "use a larger context size" in str(info.value)
        assert str(info.value).startswith(f"This message needs {info.value.n_prompt} tokens plus 40 to begin a reply, "
                                          "but the context holds 512")      # (not "This conversation needs")
        store.add_message(huge, "assistant", "An answer from a larger context.")    # a regenerate that cannot fit
        with pytest.raises(ContextOverflow):                                         # keeps the reply in place
            list(chat.regenerate(huge, options))
        assert store.messages(huge)[-1].content == "An answer from a larger context."
        assert store.earlier_replies(huge, 1) == []
        # nor when earlier turns could go but the last message alone is too long
        store.add_message(cid, "assistant", "Short answer.")
        store.add_message(cid, "user", "word " * 700)
        with pytest.raises(ContextOverflow) as info:
            list(chat.reply(cid, options))
        assert not info.value.can_drop_turns and "shorten the message" in str(info.value)
        alone = len(chat.prompt_tokens(dataclasses.replace(store.conversation(cid), first_turn=len(store.messages(cid)) - 1)))
        assert 512 - 40 < alone < info.value.n_prompt
        assert f"This conversation needs {info.value.n_prompt} tokens, and its last message alone {alone} plus 40" in str(info.value)
        # a message sent into a context that cannot hold it is taken back (the window puts it in the box):
        # the history is as before, and a conversation it began is untitled again
        first = store.create_conversation()
        chat.add_user_message(first, "Too long " * 300)
        assert store.conversation(first).title != DEFAULT_TITLE
        with pytest.raises(ContextOverflow):
            list(chat.reply(first, options))
        assert chat.take_back(first, "Too long " * 300)
        assert store.messages(first) == [] and store.conversation(first).title == DEFAULT_TITLE
        assert not chat.take_back(cid, "word " * 700 + "?")       # only the last message, and only the user's
        assert chat.take_back(cid, "word " * 700) and store.messages(cid)[-1].content == "Short answer."
        # (and its place in the list is as before: a send refused moved it to the top, a new user's try)
        assert store.conversation(cid).updated_at == store.messages(cid)[-1].created_at
        assert not chat.take_back(cid, "Short answer.")
        named = store.create_conversation()                        # a title the user gave stays
        store.rename(named, "My question")
        chat.add_user_message(named, "Too long " * 300)
        assert chat.take_back(named, "Too long " * 300) and store.conversation(named).title == "My question"
        # turns left out onto the message taken back come back (a llama-server's drop moves one at a time)
        n = len(store.messages(cid))
        chat.add_user_message(cid, "One more?")
        store.set_first_turn(cid, n)
        assert chat.take_back(cid, "One more?")
        kept = store.conversation(cid)
        assert kept.first_turn < len(kept.messages) and kept.messages[kept.first_turn].role == "user"
        store.close()


def test_cancelled_reply_is_kept_and_marked(session):
    cid = session.store.create_conversation()
    events = session.send(cid, "Write a long story about a dragon.", GenerationOptions(
        sampling=GREEDY, spec=SpecSettings(drafter="model"), max_tokens=400))
    for ev in events:
        if isinstance(ev, RoundEvent) and ev.index == 4:
            session.controls.cancel()
        if isinstance(ev, FinishEvent):
            assert ev.stop_reason == StopReason.CANCELLED
    reply = session.store.messages(cid)[-1]
    assert reply.status == "cancelled" and reply.content and reply.stats["stop_reason"] == "cancelled"
    assert len(reply.rounds) == 5
    assert reply.rounds[-1]["end"] == "cancelled" and not any("end" in r for r in reply.rounds[:-1])   # (its strip's mark)


def test_walking_away_from_the_stream_keeps_the_partial_reply(session):
    cid = session.store.create_conversation()
    events = session.send(cid, "Write a long story about a dragon.", GenerationOptions(
        sampling=GREEDY, spec=SpecSettings(enabled=False), max_tokens=400))
    for i, _ in enumerate(events):
        if i == 20:
            break
    events.close()
    reply = session.store.messages(cid)[-1]
    assert reply.status == "cancelled" and reply.content and len(reply.token_ids) >= 5


KILLED_CHILD = textwrap.dedent("""
    import sys
    from desktop_app.chat.history import HistoryStore
    from desktop_app.chat.session import ChatSession, GenerationOptions
    from desktop_app.engine import GREEDY, LoadOptions, ModelPair, SpecSettings
    pair = ModelPair.load(sys.argv[1], None, LoadOptions(n_ctx=2048, n_threads=1))
    store = HistoryStore(sys.argv[2])
    chat = ChatSession(pair, store, flush_interval_s=0.05)
    cid = store.create_conversation()
    options = GenerationOptions(sampling=GREEDY, spec=SpecSettings(enabled=False), max_tokens=1500)
    for _ in chat.send(cid, "Write a very long story about a dragon, at least two thousand words.", options):
        pass
""")


def test_killed_process_leaves_the_partial_reply(test_model_path, tmp_path):
    db = tmp_path / "history.db"
    child = subprocess.Popen([sys.executable, "-c", KILLED_CHILD, test_model_path, str(db)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and child.poll() is None:
            if db.exists():
                try:
                    store = HistoryStore(db)
                    rows = store._db.execute("SELECT length(content) FROM messages WHERE role='assistant'").fetchall()
                    store.close()
                except Exception:
                    rows = []
                if rows and rows[0][0] and rows[0][0] > 40:
                    break
            time.sleep(0.05)
        assert child.poll() is None, child.stderr.read().decode()
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()
    store = HistoryStore(db)
    [conversation] = store.list_conversations()
    reply = store.messages(conversation.id)[-1]
    assert reply.role == "assistant" and len(reply.content) > 40
    assert reply.status == "interrupted" and not reply.complete
    store.close()


def test_a_reply_keeps_the_speculation_settings_it_ended_with_where_they_changed_while_it_ran(session):
    """The footer named the drafter chosen at Send under a reply the user switched to Auto while it ran (a
    new user's try): the settings it ended with are kept beside those it began with, and only then."""
    from dataclasses import asdict, replace
    store = session.store
    cid = store.create_conversation()
    auto = replace(OPTIONS.spec, auto=True)
    for event in session.send(cid, "Count from one to ten.", OPTIONS):
        if isinstance(event, RoundEvent) and session.controls.settings != auto:
            session.controls.set(auto)                        # (as the window's bar does, mid-reply)
    settings = store.messages(cid)[-1].settings
    assert settings["spec"] == asdict(OPTIONS.spec) and settings["spec_end"] == asdict(auto)
    Counted(session.pair).run(session.send(cid, "And back?", OPTIONS))
    assert "spec_end" not in store.messages(cid)[-1].settings


def test_a_reply_another_vocabulary_wrote_is_read_as_its_text(session, pair):
    """A reply's stored token ids are read back only by a model of the vocabulary that wrote them: after a
    switch from SmolLM2 to the demo pair in one conversation, the earlier replies' ids were junk to the new
    target, and its reply began "\\t\\t\\t\\t\\t\\t\\t\\tres class stK" (a new user's try). Another vocabulary's
    reply is tokenised afresh from its text; this one's keeps its ids (KV reuse); one stored before replies
    named their vocabulary keeps them where it names this target's file."""
    cid = session.store.create_conversation()
    Counted(pair).run(session.send(cid, "Name a colour.", OPTIONS))
    own = session.store.conversation(cid).messages[-1]
    assert own.settings["vocab"] == pair.target.vocab_id and own.token_ids
    name = os.path.basename(pair.target.path)
    junk = [7] * 5                                         # (another model's ids for the same text)
    for settings, read_as_text in (({"vocab": "0" * 16, "target": name}, True),
                                   ({"target": "Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf"}, True),
                                   ({"vocab": pair.target.vocab_id, "target": "renamed.gguf"}, False),
                                   ({"target": name}, False)):
        asked = session.store.add_message(cid, "user", "Another?")
        session.store.add_message(cid, "assistant", "Blue.", token_ids=junk, settings=settings)
        conv = session.store.conversation(cid)
        prompt = session.prompt_tokens(conv)
        n = len(own.token_ids)
        assert any(prompt[i:i + n] == own.token_ids for i in range(len(prompt)))   # (this vocabulary's: as made)
        conv.messages[-1].token_ids = None
        assert (prompt == session.prompt_tokens(conv)) == read_as_text, settings
        assert any(prompt[i:i + len(junk)] == junk for i in range(len(prompt))) != read_as_text
        session.store.delete_messages_from(cid, asked.position)


def test_a_sampled_reply_stores_the_seed_that_makes_it_again(session, pair):
    """Sampled with no seed set, a reply's footer said "random seed" and could not be made again (a new
    user's try): the seed drawn for it is stored with it, and a reply with that seed is the same."""
    from dataclasses import replace

    from desktop_app.engine import SamplingParams
    sampled = replace(OPTIONS, sampling=SamplingParams(temperature=0.9, seed=None), max_tokens=16)
    cid = session.store.create_conversation()
    first = Counted(pair).run(session.send(cid, "Name a colour.", sampled)).finish
    seed = session.store.conversation(cid).messages[-1].settings["sampling"]["seed"]
    assert isinstance(seed, int)
    again = Counted(pair).run(session.regenerate(cid, replace(sampled, sampling=SamplingParams(temperature=0.9,
                                                                                               seed=seed)))).finish
    assert again.tokens == first.tokens
    Counted(pair).run(session.regenerate(cid, sampled))                 # (none set: another seed, drawn anew)
    assert session.store.conversation(cid).messages[-1].settings["sampling"]["seed"] not in (seed, None)


# -- Continue

PLAIN = SpecSettings(enabled=False)
PROMPT = "Write a short poem about the sea."


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
