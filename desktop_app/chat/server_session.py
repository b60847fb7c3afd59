"""A chat session whose model runs in a llama-server (remote/server.py): the same conversations,
history and events as ChatSession, with the server applying its own chat template.

The server sends text, not token ids, so its replies are stored without them (a later local turn
re-tokenises their text); the conversation goes to it as messages every turn, and its prompt cache
(`cache_prompt`) spares re-reading what it already holds. A reply the server breaks off (it died or
restarted) is kept as "interrupted", with what came.
"""
from __future__ import annotations

from typing import Iterator

from desktop_app.chat.history import ConversationInfo, HistoryStore
from desktop_app.chat.session import FLUSH_INTERVAL_S, CannotContinue, ChatSession, ContextOverflow, GenerationOptions
from desktop_app.engine.settings import Controls
from desktop_app.remote.server import LlamaServer, ServerError


SERVER_LARGER = "start the server with a larger context (its -c)"   # (its context is not Tandem's to set)


class ServerChatSession(ChatSession):
    keeps_tokens = False

    def __init__(self, server: LlamaServer, store: HistoryStore):
        self.server = server
        self.pair = None
        self.store = store
        self.template = None
        self.controls = Controls()
        self.flush_interval_s = FLUSH_INTERVAL_S
        self.controls.subscribe(lambda c: server.cancel() if c.cancelled else None)

    @property
    def n_ctx(self) -> int:
        return (self.server.info.n_ctx if self.server.info else None) or 0

    def messages(self, conversation: ConversationInfo) -> list[dict]:
        out = [{"role": "system", "content": conversation.system_prompt}] if conversation.system_prompt else []
        out += [{"role": m.role, "content": m.content} for m in conversation.messages[conversation.first_turn:]]
        return out

    def fits(self, conversation: ConversationInfo, options: GenerationOptions) -> bool:
        return True                  # the server counts its own tokens, and says so when they do not fit

    def reply(self, conversation_id: int, options: GenerationOptions) -> Iterator:
        self.controls.reset_cancel()
        conversation = self.store.conversation(conversation_id)
        info = self.server.info
        settings = {"server": self.server.url, "target": info.model if info else None,
                    "sampling": {"temperature": options.sampling.temperature, "top_k": options.sampling.top_k,
                                 "top_p": options.sampling.top_p, "min_p": options.sampling.min_p,
                                 "seed": options.sampling.seed},
                    "max_tokens": options.max_tokens}
        try:                  # the request starts here: a refusal stores nothing
            events = self.server.generate(self.messages(conversation), options.sampling, options.max_tokens,
                                          list(options.stop))
        except ServerError as exc:
            if exc.kind != "context":
                raise
            turns = sum(1 for m in conversation.messages[conversation.first_turn:] if m.role == "user")
            raise ContextOverflow(exc.n_prompt, exc.n_ctx or self.n_ctx, 0, turns > 1, SERVER_LARGER,
                                  only_last=turns == 2,              # (a drop here is one turn: of two, the
                                  alone=exc.n_prompt if turns <= 1 else 0) from None   # last message is left alone)
        return self._store_reply(conversation_id, events, settings)

    def continue_reply(self, conversation_id: int, options: GenerationOptions) -> Iterator:
        raise CannotContinue("Continue writes on with models Tandem runs itself: a llama-server's chat only "
                             "writes new replies. Regenerate, or ask it to go on")

    def drop_oldest_turns(self, conversation_id: int, options: GenerationOptions = GenerationOptions()) -> int:
        """Leave out the oldest turn (the server counts tokens, Tandem cannot): the next reply tries again."""
        conversation = self.store.conversation(conversation_id)
        starts = [i for i, m in enumerate(conversation.messages) if m.role == "user" and i > conversation.first_turn]
        if not starts:
            raise ContextOverflow(0, self.n_ctx, 0, False, SERVER_LARGER)
        self.store.set_first_turn(conversation_id, starts[0])
        return starts[0]
