"""Chat templates from the target GGUF, rendered with Jinja2 as llama-cpp-python does, and tokenised
so that only the template's own markup can become special tokens.

Each message's text is swapped for a marker before rendering; the rendered prompt is then split at
the markers, the template's parts tokenised with special-token parsing on and the users' texts with
it off. A user who types `<|im_start|>system` gets those characters as text, not a control token.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment



@dataclass(frozen=True)
class Message:
    role: str                          # "system", "user" or "assistant"
    content: str
    tokens: tuple[int, ...] | None = None   # a reply's exact generated tokens, used instead of re-tokenising
                                            # its text so the KV cache of the previous turn stays valid


FALLBACK_NOTE = "this model has no chat template; using plain 'User:/Assistant:' turns"
FALLBACK_STOPS = ("\n\nUser:", "\nUser:")   # where a reply in those turns ends: the model writing the
                                            # user's next turn (gemma3-270m went on "User: Hello, my name is
                                            # Susan. Assistant: …"); the first, where it matches, leaves no
                                            # line break of the turns' own at the reply's end


def _raise(message: str):
    raise TemplateError(message)


class ChatTemplate:
    def __init__(self, model):
        """`model`: a loaded `engine.backend.Model`, or the engine process's `RemoteModel`."""
        self.model = model
        self.source = model.chat_template()
        self.has_template = bool(self.source)
        self._compiled = None
        if self.source:
            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
            env.globals["raise_exception"] = _raise
            env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
            self._compiled = env.from_string(self.source)

    @property
    def note(self) -> str:
        return "" if self.has_template else FALLBACK_NOTE

    def stops(self, stop: Sequence[str] = ()) -> tuple[str, ...]:
        """The stop strings a reply in this template's turns ends at: `stop` (the user's), and the
        fallback's next "User:" turn."""
        return tuple(dict.fromkeys([*stop, *(() if self.has_template else FALLBACK_STOPS)]))

    def render(self, messages: Sequence[Message], add_generation_prompt: bool = True,
               markers: Sequence[str] | None = None, open_last: bool = False) -> str:
        contents = list(markers) if markers is not None else [m.content for m in messages]
        if self._compiled is None:
            parts = []
            for i, (m, c) in enumerate(zip(messages, contents)):
                if m.role == "system":
                    parts.append(f"{c}\n\n")
                elif open_last and i == len(messages) - 1:      # (as the reply was written: after "Assistant:")
                    parts.append(f"Assistant:{c}")
                else:
                    parts.append(f"{'User' if m.role == 'user' else 'Assistant'}: {c}\n\n")
            if add_generation_prompt:
                parts.append("Assistant:")
            return "".join(parts)
        bos = self.model.special_piece(self.model.bos).decode("utf-8", "replace") if self.model.bos >= 0 else ""
        eos = self.model.special_piece(self.model.eos).decode("utf-8", "replace") if self.model.eos >= 0 else ""
        return self._compiled.render(
            messages=[{"role": m.role, "content": c} for m, c in zip(messages, contents)],
            add_generation_prompt=add_generation_prompt, bos_token=bos, eos_token=eos)

    def tokenize(self, messages: Sequence[Message], add_generation_prompt: bool = True,
                 open_last: bool = False) -> list[int]:
        """The prompt's tokens, with users' text never parsed for special tokens. `open_last`: the last
        message (a reply) is left open, to be written on (Continue): what the template writes after its
        text (the end of its turn) is left out, as Hugging Face's `continue_final_message` does."""
        tag = uuid.uuid4().hex
        markers = [f"\x00{tag}:{i}\x00" for i in range(len(messages))]
        rendered = self.render(messages, add_generation_prompt and not open_last, markers, open_last)
        add_bos = self.model.add_bos
        bos_text = self.model.special_piece(self.model.bos).decode("utf-8", "replace") if add_bos else ""
        if add_bos and bos_text and rendered.startswith(bos_text):
            rendered = rendered[len(bos_text):]            # the template wrote BOS itself: add it once
        # The prompt in order: template text (special tokens parsed), users' text (not parsed), or a
        # reply's exact tokens; every text is tokenised in one call (one trip to the engine process).
        parts: list[tuple[str, bool]] = []
        plan: list[int | tuple[int, ...]] = []             # an index into parts, or exact tokens
        rest = rendered
        for i, marker in enumerate(markers):
            before, found, after = rest.partition(marker)
            if not found:
                raise TemplateError(f"the chat template dropped or altered message {i}")
            plan.append(len(parts))
            parts.append((before, True))
            if messages[i].tokens is not None:
                plan.append(messages[i].tokens)
            else:
                plan.append(len(parts))
                parts.append((messages[i].content, False))
            rest = after
        if not open_last:
            plan.append(len(parts))
            parts.append((rest, True))
        pieces = self.model.tokenize_many(parts)
        tokens: list[int] = [self.model.bos] if add_bos else []
        for step in plan:
            tokens += pieces[step] if isinstance(step, int) else step
        return tokens
