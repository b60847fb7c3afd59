"""A chat session: one loaded model pair running the turns of stored conversations.

Prompts are rebuilt from the stored conversation every turn; the engine's contexts then evaluate
only what follows the longest prefix they already hold, so turn N costs only its new tokens, and an
edit or a regenerate re-evaluates from the first differing token. Replies keep their exact generated
tokens so that re-tokenising their text cannot break that prefix.
"""
from __future__ import annotations

import os
import random
import time
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Iterator

from desktop_app.chat.history import ConversationInfo, HistoryError, HistoryStore
from desktop_app.chat.history_rows import StoredMessage
from desktop_app.chat.rules import can_continue, can_regenerate, last_user_message, reply_status
from desktop_app.chat.template import ChatTemplate, Message

from desktop_app.engine.events import FinishEvent, GenerationStats, RoundEvent, StopReason, TokenEvent
from desktop_app.engine.metrics import continued, from_rounds
from desktop_app.engine.process.protocol import EngineCrashed
from desktop_app.engine.sampling import SamplingParams
from desktop_app.engine.settings import Controls, SpecSettings

if TYPE_CHECKING:               # a ModelPair in this process, or the engine process's RemotePair
    from desktop_app.engine.pair import ModelPair

FLUSH_INTERVAL_S = 0.25         # a streaming reply reaches the database at least this often (a kill -9
                                # lost the last second of it: 11 words on a busy machine, a user's try)
DEFAULT_TITLE = "New conversation"
TITLE_LENGTH = 48


class ContextOverflow(RuntimeError):
    """The conversation no longer fits in the context. `can_drop_turns` tells whether leaving out the
    oldest turns (the system prompt is always kept) would make room; otherwise the last message does
    not fit even alone, so a new conversation would not help either: only a shorter message or a
    larger context will do."""

    def __init__(self, n_prompt: int, n_ctx: int, reserve: int, can_drop_turns: bool,
                 larger: str = "use a larger context size", only_last: bool = False, alone: int = 0):
        self.n_prompt, self.n_ctx, self.reserve, self.can_drop_turns = n_prompt, n_ctx, reserve, can_drop_turns
        self.only_last = only_last       # leaving turns out leaves only the last message: said, so that no one
        if not can_drop_turns:           # sends "Now give it a title." alone unawares (a new user's try)
            choices = f"shorten the message, or {larger}"
        elif only_last:
            choices = ("leave out every earlier turn (only the last message fits: the model would not see the "
                       f"conversation before it; the system prompt stays), start a new conversation, or {larger}")
        else:
            choices = f"leave out the oldest turns (the system prompt stays), start a new conversation, or {larger}"
        reply = f" plus {reserve} to begin a reply" if reserve else ""
        # `alone`: the tokens of the last message with the system prompt, where it does not fit even so. "This
        # conversation needs …" of a first message read as if the conversation were the trouble (a new user's try)
        if alone and alone >= n_prompt:
            text = f"This message needs {n_prompt} tokens{reply}"
        elif alone:
            text = f"This conversation needs {n_prompt} tokens, and its last message alone {alone}{reply}"
        else:
            text = f"This conversation needs {n_prompt} tokens{reply}"
        super().__init__(f"{text}, but the context holds {n_ctx}: {choices}.")


class CannotContinue(ValueError):
    """The last reply cannot be continued (the message says why)."""


@dataclass
class GenerationOptions:
    sampling: SamplingParams = field(default_factory=SamplingParams)
    spec: SpecSettings = field(default_factory=SpecSettings)
    max_tokens: int = 1024
    stop: tuple[str, ...] = ()


class ChatSession:
    keeps_tokens = True             # replies keep their token ids (a remote server does not send them)

    def __init__(self, pair: "ModelPair", store: HistoryStore, flush_interval_s: float = FLUSH_INTERVAL_S):
        self.pair = pair
        self.store = store
        self.template = ChatTemplate(pair.target)
        self.controls = Controls()
        self.flush_interval_s = flush_interval_s

    @property
    def n_ctx(self) -> int:
        return self.pair.n_ctx

    # -- prompts
    def prompt_tokens(self, conversation: ConversationInfo, open_last: bool = False) -> list[int]:
        """The conversation's prompt, for a reply after it; `open_last`: for writing on its last reply
        (ChatTemplate.tokenize's)."""
        messages = [Message("system", conversation.system_prompt)] if conversation.system_prompt else []
        for m in conversation.messages[conversation.first_turn:]:
            tokens = tuple(m.token_ids) if (m.role == "assistant" and m.token_ids is not None
                                            and self._own_tokens(m.settings)) else None
            messages.append(Message(m.role, m.content, tokens))
        return self.template.tokenize(messages, open_last=open_last)

    def _own_tokens(self, settings: dict | None) -> bool:
        """Whether a reply made with `settings` has token ids this target reads as its text: made by a
        model of its vocabulary (or, stored before replies named theirs, by a file of its name). Another
        model's ids are other text to it: after a switch from SmolLM2 to the demo pair, the earlier
        replies' ids read as junk and the first reply began "\t\t\t\t\t\t\t\tres class stK" (a new user's
        try). Their text is tokenised afresh instead."""
        settings = settings or {}
        if "vocab" in settings:
            return settings["vocab"] == self.pair.target.vocab_id
        return settings.get("target") == os.path.basename(self.pair.target.path)

    def _reserve(self, options: GenerationOptions) -> int:
        return reply_room(self.n_ctx, options.max_tokens)

    def fits(self, conversation: ConversationInfo, options: GenerationOptions) -> bool:
        return len(self.prompt_tokens(conversation)) + self._reserve(options) <= self.n_ctx

    def drop_oldest_turns(self, conversation_id: int, options: GenerationOptions = GenerationOptions()) -> int:
        """Leave whole turns out of the prompt, oldest first, until the conversation fits (they stay in the
        history). Returns the index of the first message kept; raises ContextOverflow if even the last
        user message alone does not fit."""
        conversation = self.store.conversation(conversation_id)
        if conversation.messages and conversation.messages[-1].role == "assistant":   # (a regenerate's: the
            conversation.messages = conversation.messages[:-1]                       # reply it replaces is not read)
        starts = [i for i, m in enumerate(conversation.messages) if m.role == "user" and i >= conversation.first_turn]
        for start in starts:
            conversation.first_turn = start
            if self.fits(conversation, options):
                self.store.set_first_turn(conversation_id, start)
                return start
        n = len(self.prompt_tokens(conversation))         # (from the last message: the others left out)
        raise ContextOverflow(n, self.n_ctx, self._reserve(options), False, alone=n)

    def _alone(self, conversation: ConversationInfo) -> int:
        """The tokens of the conversation's last user message with the system prompt alone."""
        last = max((i for i, m in enumerate(conversation.messages) if m.role == "user"), default=None)
        return len(self.prompt_tokens(replace(conversation, first_turn=last))) if last is not None else 0

    # -- turns
    def send(self, conversation_id: int, text: str, options: GenerationOptions) -> Iterator:
        """Add the user's message and stream the reply (engine events)."""
        self.add_user_message(conversation_id, text)
        return self.reply(conversation_id, options)

    def add_user_message(self, conversation_id: int, text: str) -> None:
        """Store the user's message (a first message also names the conversation)."""
        conversation = self.store.conversation(conversation_id)
        if conversation.title == DEFAULT_TITLE and not conversation.messages:
            self.store.rename(conversation_id, _title_from(text))
        self.store.add_message(conversation_id, "user", text)

    def take_back(self, conversation_id: int, text: str) -> bool:
        """Remove the conversation's last message when it is the user's `text` with nothing after it: a
        message the context could not hold goes back to the box, not into the history (where it would
        sit unanswered, and the next message after it). A conversation it began and named is untitled
        again, and turns left out for it that would now leave nothing in the prompt come back (a
        llama-server's drop moves one turn at a time, onto this message too). False (nothing removed)
        when the history ends otherwise."""
        conversation = self.store.conversation(conversation_id)
        messages = conversation.messages
        if not messages or messages[-1].role != "user" or messages[-1].content != text:
            return False
        if len(messages) == 1 and conversation.title == _title_from(text):   # (a title the user gave stays)
            self.store.rename(conversation_id, DEFAULT_TITLE)
        self.store.delete_messages_from(conversation_id, messages[-1].position)
        # (and its place in the list: a send refused moved it to the top, a new user's try)
        self.store.set_updated_at(conversation_id, messages[-2].created_at if len(messages) > 1
                                  else conversation.created_at)
        last_user = max((i for i, m in enumerate(messages[:-1]) if m.role == "user"), default=0)
        if conversation.first_turn > last_user:
            self.store.set_first_turn(conversation_id, last_user)
        return True

    def regenerate(self, conversation_id: int, options: GenerationOptions) -> Iterator:
        """Write a new reply in place of the last one, which is kept as an earlier version (store.
        earlier_replies; a reply with no text is not). Where no reply can start (ContextOverflow: the
        context can no longer hold the conversation; a llama-server refusing), the newest reply kept
        there is back in place (it was lost: a reading of the code), as where the new one ends empty."""
        messages = self.store.messages(conversation_id)
        if not can_regenerate(messages):
            raise ValueError("there is no reply to regenerate")
        last = messages[-1]
        if last.content.strip():
            self.store.set_aside_reply(conversation_id, last.position)
        else:
            self.store.delete_messages_from(conversation_id, last.position)
        try:
            events = self.reply(conversation_id, options)
        except Exception:
            self.store.bring_back_reply(conversation_id, last.position)
            raise
        return self._unless_empty(conversation_id, events)

    def _unless_empty(self, conversation_id: int, events: Iterator) -> Iterator:
        """A regenerate's events; where its reply ends with no text (stopped before any, failed, the
        engine dead), the newest earlier reply takes its place again (store.drop_empty_reply)."""
        try:
            yield from events
        finally:
            try:
                self.store.drop_empty_reply(conversation_id)
            except HistoryError:
                pass                    # (what ended the reply is what gets reported)

    def edit_last_user_message(self, conversation_id: int, text: str, options: GenerationOptions) -> Iterator:
        """Change the last user message, drop what followed it, and answer again."""
        self.replace_last_user_message(conversation_id, text, options)
        return self.reply(conversation_id, options)

    def replace_last_user_message(self, conversation_id: int, text: str,
                                  options: GenerationOptions | None = None) -> None:
        """Store `text` in place of the last user message, dropping what followed it (a title made from
        it, where it is the first message, is made again from `text`). With `options`,
        an edited conversation the context cannot hold raises ContextOverflow first, with the history
        untouched: edited into one too long, the last exchange was gone for good and the new message
        sat unanswered (a new user's try). (Leaving out turns for it is not offered: that answers
        the history as stored.)"""
        conversation = self.store.conversation(conversation_id)
        last = last_user_message(conversation.messages)
        if last is None:
            raise ValueError("there is no message to edit")
        if options is not None:
            kept = [m for m in conversation.messages if m.position < last.position]
            edited = replace(conversation, messages=kept + [replace(last, content=text, token_ids=None)])
            if not self.fits(edited, options):
                raise ContextOverflow(len(self.prompt_tokens(edited)), self.n_ctx, self._reserve(options), False,
                                      alone=self._alone(edited))
        self.store.delete_messages_from(conversation_id, last.position)
        self.store.add_message(conversation_id, "user", text)
        first = all(m.role != "user" for m in conversation.messages if m.position < last.position)
        if first and conversation.title == _title_from(last.content):   # (it named Australia's capital over
            self.store.rename(conversation_id, _title_from(text))          # New Zealand's: a new user's try)

    def reply(self, conversation_id: int, options: GenerationOptions) -> Iterator:
        """Generate the assistant's reply to the conversation as stored, writing it as it streams."""
        conversation = self.store.conversation(conversation_id)
        prompt = self.prompt_tokens(conversation)
        reserve = self._reserve(options)
        if len(prompt) + reserve > self.n_ctx:
            starts = [i for i, m in enumerate(conversation.messages) if m.role == "user" and i > conversation.first_turn]
            def fits_from(i: int) -> bool:
                return self.fits(replace(conversation, first_turn=i), options)
            can_drop = bool(starts) and fits_from(starts[-1])                # (the last turn alone fits;
            only_last = can_drop and (len(starts) == 1 or not fits_from(starts[-2]))   # only it, or more)
            raise ContextOverflow(len(prompt), self.n_ctx, reserve, can_drop, only_last=only_last,
                                  alone=0 if can_drop else self._alone(conversation))
        return self._stream(conversation_id, prompt, options)

    def continue_reply(self, conversation_id: int, options: GenerationOptions) -> Iterator:
        """Write on where the last reply ended (rules.can_continue: stopped, interrupted, failed, or cut
        off at Max tokens), into the same message: the model reads the conversation with that reply's
        turn left open, and what it writes, its tokens and its rounds are added to the reply's, with
        statistics over both runs (metrics.continued). Max tokens allows as many again."""
        conversation = self.store.conversation(conversation_id)
        last = conversation.messages[-1] if conversation.messages else None
        if last is not None and isinstance(last.settings, dict) and last.settings.get("server"):
            raise CannotContinue("This reply was written by a llama-server: connect to it again to continue it, "
                                 "or regenerate it here")         # (its statistics are a server's)
        if not can_continue(conversation.messages):
            raise CannotContinue("The last reply ended by itself (or there is none): there is nothing to continue")
        # The prompt ends with the reply's own ids where this target reads them, else with its text's tokens.
        # Not with ids kept as it broke off (no statistics) where stop strings apply: its last tokens' text
        # may have been held back for one, and lost with it.
        kept = self._kept_tokens(last)
        if kept is not None and last.stats is None and self.template.stops(options.stop):
            kept = None
        if kept is None:
            conversation.messages[-1] = replace(last, token_ids=None)
        prompt = self.prompt_tokens(conversation, open_last=True)
        if len(prompt) >= self.n_ctx:       # (with room for a few tokens, it goes on until the context is full)
            raise CannotContinue(f"The conversation with this reply fills the context ({len(prompt)} of {self.n_ctx} "
                                 "tokens): there is no room to continue it. Raise the context size in Settings "
                                 "(Apply and reload), or start a new conversation")
        return self._stream(conversation_id, prompt, options, into=last, kept=kept,   # (the engine reads at most
                            primed=len(kept) if kept is not None else len(last.content))   # PRIMER of them)

    def _stream(self, conversation_id: int, prompt: list[int], options: GenerationOptions,
                into: StoredMessage | None = None, kept: list[int] | None = None, primed: int = 0) -> Iterator:
        self.controls.reset_cancel()
        self.controls.set(options.spec)
        sampling = options.sampling           # (a seed drawn here is stored with the reply, which can then be
        if sampling.seed is None and not sampling.greedy:    # made again: "random seed" could not, a user's try)
            sampling = replace(sampling, seed=random.randrange(2**31))
        settings = {"target": os.path.basename(self.pair.target.path), "vocab": self.pair.target.vocab_id,
                    "draft": os.path.basename(self.pair.draft.path) if self.pair.draft else None,
                    "sampling": asdict(sampling), "spec": asdict(options.spec),
                    "max_tokens": options.max_tokens}
        events = self.pair.generate(prompt, sampling, self.controls, options.max_tokens,
                                    self.template.stops(options.stop), primed)
        return self._store_reply(conversation_id, events, settings, into, kept)

    def _store_reply(self, conversation_id: int, events: Iterator, settings: dict,
                     into: StoredMessage | None = None, kept: list[int] | None = None) -> Iterator:
        """Write the reply as `events` stream it (at least every flush interval), and keep what came
        when it ends early; yields the events on. `into`: the reply continued (continue_reply), `kept`
        its token ids where they go on (None: its text was read): the new text, tokens and rounds are
        added to its own, and its FinishEvent is of the whole reply. A run that adds nothing, stopped
        or failed before a token, leaves the reply exactly as it was; one whose model ends the reply
        at once ends it."""
        keeps_tokens = self.keeps_tokens and (into is None or kept is not None)
        if into is None:
            message = self.store.add_message(conversation_id, "assistant", "", status="streaming",
                                             token_ids=[] if keeps_tokens else None, settings=settings)
            text, tokens, rounds = "", [], []
        else:
            message = into
            self.store.update_message(into.id, status="streaming")
            text, tokens, rounds = into.content, list(kept) if keeps_tokens else [], list(into.rounds or [])
            settings = _continued_settings(into.settings, settings)
        n_before = len(tokens)
        wrote = False                  # a token came (a continued reply then is no longer as it was)
        last_flush = time.monotonic()
        finished = False
        try:
            for event in events:
                if isinstance(event, TokenEvent):
                    if into is not None and not wrote:      # (its statistics, and ids not read, no longer tell it)
                        self.store.update_message(into.id, stats=None, **({} if keeps_tokens else {"token_ids": None}))
                    text += event.text
                    tokens.append(event.token)
                    wrote = True
                    if time.monotonic() - last_flush >= self.flush_interval_s:
                        self.store.update_message(message.id, content=text,
                                                  token_ids=tokens if keeps_tokens else None)
                        last_flush = time.monotonic()
                elif isinstance(event, RoundEvent):
                    rounds.append(event.to_record())
                elif isinstance(event, FinishEvent) and into is not None and not wrote and event.stop_reason not in (
                        StopReason.EOS, StopReason.STOP_STRING):
                    event = self._as_it_was(event, into)
                    finished = True
                elif isinstance(event, FinishEvent):
                    status = reply_status(event.stop_reason, event.broke_off)
                    if rounds and event.end_after_rounds and not rounds[-1].get("end"):   # (the strip's mark)
                        rounds[-1]["end"] = event.end_after_rounds
                    if into is not None:              # (the whole reply, as the history now holds it)
                        event = self._whole(event, into, rounds, tokens[:n_before], keeps_tokens)
                    # after a stop string the last tokens hold text that was cut: re-tokenise next turn
                    keep_tokens = keeps_tokens and event.stop_reason != StopReason.STOP_STRING
                    changed = self._changed_while_running(settings)
                    self.store.update_message(message.id, content=event.text, status=status,
                                              token_ids=list(event.tokens) if keep_tokens else None,
                                              stats=event.stats.to_json(), rounds=rounds,
                                              **(changed or ({"settings": settings} if into is not None else {})))
                    finished = True
                yield event
        except HistoryError:           # the history refused a write (a full disk): nothing more to try
            raise
        except BaseException as exc:   # (walked away from: GeneratorExit; the engine died: EngineCrashed)
            if not finished:
                status = ("cancelled" if isinstance(exc, GeneratorExit) else
                          "interrupted" if isinstance(exc, EngineCrashed) else "error")
                if into is not None and not wrote:
                    self._as_it_was(None, into)
                else:
                    self._keep(message.id, text, tokens if keeps_tokens else None, rounds, status,
                               settings if into is not None else None)
            raise

    def _as_it_was(self, event: FinishEvent | None, into: StoredMessage) -> FinishEvent | None:
        """A continued reply's run that added no token (stopped before one, failed, the engine dead): the
        reply is stored as it was, status, statistics and settings included; `event` (its FinishEvent)
        made the reply's as it was."""
        try:
            self.store.update_message(into.id, content=into.content, status=into.status, token_ids=into.token_ids,
                                      stats=into.stats, rounds=into.rounds, settings=into.settings)
        except HistoryError:
            pass                       # (what ended the reply is what gets reported)
        if event is None:
            return None
        return replace(event, text=into.content, tokens=tuple(into.token_ids or ()), stats=_stats_of(into))

    def _kept_tokens(self, message: StoredMessage) -> list[int] | None:
        """A reply's token ids where this target reads them as its text (_own_tokens), else None."""
        return message.token_ids if message.token_ids is not None and self._own_tokens(message.settings) else None

    def _changed_while_running(self, settings: dict) -> dict:
        """{"settings": …} with the speculation settings the reply ended with ("spec_end"), where the user
        changed them while it ran; {} otherwise. The footer named the drafter chosen at Send, "draft model ·
        γ 2", under a reply that auto wrote with copies (a new user's try)."""
        end = asdict(self.controls.settings)
        if not isinstance(settings.get("spec"), dict) or end == settings["spec"]:
            return {}
        return {"settings": {**settings, "spec_end": end}}

    def _keep(self, message_id: int, text: str, tokens: list[int] | None, rounds: list, status: str,
              settings: dict | None = None) -> None:
        """Save a reply that ended early, as far as the history lets us (the error that ended it is
        what gets reported); `settings`: a continued reply's, now that it was written on."""
        try:
            self.store.update_message(message_id, content=text, status=status, token_ids=tokens, rounds=rounds,
                                      **({"settings": settings} if settings is not None else {}))
        except HistoryError:
            pass

    @staticmethod
    def _whole(event: FinishEvent, into: StoredMessage, rounds: list, tokens_before: list[int],
               keeps_tokens: bool) -> FinishEvent:
        """A continuation's FinishEvent made the whole reply's: the text and tokens it had before first,
        and statistics over both runs."""
        records = [RoundEvent.from_record(i, r) for i, r in enumerate(rounds)]
        tokens = (*tokens_before, *event.tokens)
        return replace(event, text=into.content + event.text, tokens=tokens,
                       stats=continued(_stats_of(into), event.stats, records, tokens if keeps_tokens else None))


def _stats_of(message: StoredMessage) -> GenerationStats:
    """A stored reply's statistics, or where it has none (the engine died as it was written) what its
    rounds say (metrics.from_rounds)."""
    return GenerationStats.from_json(message.stats) or from_rounds(
        [RoundEvent.from_record(i, r) for i, r in enumerate(message.rounds or [])])


def reply_room(n_ctx: int, max_tokens: int) -> int:
    """The tokens a prompt must leave free in a context of `n_ctx` for its reply to begin: an eighth of
    the context (16 at least), no more than the reply may write."""
    return min(max_tokens, max(16, n_ctx // 8))


def _continued_settings(before: dict | None, now: dict) -> dict:
    """The settings of a reply continued: this run's (`now`), with "parts" (in how many runs it was
    written) one more, and where its speculation settings differ from those it began with, those first
    and this run's as "spec_end" (the footer then says "draft model, then auto", as of settings changed
    while a reply ran)."""
    before = before if isinstance(before, dict) else {}
    parts = before.get("parts")
    out = {**now, "parts": (parts if isinstance(parts, int) and parts > 0 else 1) + 1}
    if isinstance(before.get("spec"), dict) and before["spec"] != now["spec"]:
        out["spec"], out["spec_end"] = before["spec"], now["spec"]
    return out


def _title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_LENGTH else line[:TITLE_LENGTH - 1].rstrip() + "…"
