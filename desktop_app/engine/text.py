"""Streaming token bytes to text: UTF-8 safe across token boundaries, stop strings across tokens."""
from __future__ import annotations

import codecs
from typing import Sequence


class TextStream:
    """Feed token pieces (bytes); get back the text that can be shown now.

    Text that might be the beginning of a stop string is held back until it is clear it is not;
    when a stop string completes, the text ends just before it.
    """

    def __init__(self, stop: Sequence[str] = ()):
        self.stop = [s for s in stop if s]
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._text = ""
        self._released = 0
        self._base = 0                 # where this stream's own text begins (after a primer)
        self.stopped = False

    def prime(self, pieces: Sequence[bytes]) -> None:
        """Read the bytes of tokens that come before this stream's (the reply it continues) as text
        already shown: a character cut in two at their end is completed by this stream's first piece
        (decoded alone, its last bytes read "��"), and a stop string that began in them ends the
        reply as soon as it completes (the part shown before stays)."""
        for piece in pieces:
            self._text += self._decoder.decode(piece)
        self._released = self._base = len(self._text)

    @property
    def text(self) -> str:
        """Everything released so far (the reply as the user sees it)."""
        return self._text[self._base:self._released]

    def push(self, piece: bytes) -> str:
        """Add one token's bytes; return the newly releasable text ('' when nothing is yet)."""
        if self.stopped:
            return ""
        self._text += self._decoder.decode(piece)
        return self._release()

    def finish(self) -> str:
        """The generation ended: release any held-back text. A character the end cut in two (the token
        limit, or Stop, between the tokens of an emoji) is left out: flushed, it read "�"."""
        self._decoder.reset()
        end = len(self._text) if not self.stopped else self._released
        out = self._text[self._released:end]
        self._released = end
        return out

    def _release(self) -> str:
        if self.stop:
            window = max(len(s) for s in self.stop)
            start = max(0, self._released - window)
            hits = [i for i in (self._text.find(s, start) for s in self.stop) if i >= 0]
            if hits:
                cut = min(hits)
                self.stopped = True
                self._text = self._text[:cut]
                out = self._text[self._released:cut] if cut > self._released else ""
                self._released = max(self._released, cut)
                return out
            hold = self._held_back()
        else:
            hold = 0
        end = len(self._text) - hold
        out = self._text[self._released:end] if end > self._released else ""
        self._released = max(self._released, end)
        return out

    def _held_back(self) -> int:
        """Length of the longest tail of the text that begins some stop string."""
        best = 0
        for s in self.stop:
            for k in range(min(len(s) - 1, len(self._text)), best, -1):
                if self._text.endswith(s[:k]):
                    best = k
                    break
        return best
