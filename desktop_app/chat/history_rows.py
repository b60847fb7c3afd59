"""The history's rows as Python sees them (StoredMessage, ConversationInfo) and how a message's
columns are encoded: token ids as int32 bytes, rounds as zlib-compressed JSON. BODY names a reply's
columns after its role, which the messages and earlier_replies tables share."""
from __future__ import annotations

import array
import json
import zlib
from dataclasses import dataclass, field
from typing import Iterable

BODY = "content, status, token_ids, settings, stats, rounds, created_at"


@dataclass
class StoredMessage:
    id: int
    conversation_id: int
    position: int
    role: str
    content: str
    status: str = "done"
    token_ids: list[int] | None = None
    settings: dict | None = None
    stats: dict | None = None
    rounds: list | None = None
    created_at: float = 0.0

    @property
    def complete(self) -> bool:
        return self.status == "done"


@dataclass
class ConversationInfo:
    id: int
    title: str
    system_prompt: str
    created_at: float
    updated_at: float
    first_turn: int = 0
    messages: list[StoredMessage] = field(default_factory=list)


def pack_tokens(tokens: Iterable[int] | None) -> bytes | None:
    return None if tokens is None else array.array("i", tokens).tobytes()


def unpack_tokens(blob: bytes | None) -> list[int] | None:
    if blob is None:
        return None
    a = array.array("i")
    a.frombytes(blob)
    return a.tolist()


def pack_rounds(rounds: list | None) -> bytes | None:
    return None if rounds is None else zlib.compress(json.dumps(rounds, separators=(",", ":")).encode())


def unpack_rounds(blob: bytes | None) -> list | None:
    return None if blob is None else json.loads(zlib.decompress(blob))


def stored(r) -> StoredMessage:
    """A row of id, conversation_id, position, role and BODY."""
    return StoredMessage(r[0], r[1], r[2], r[3], r[4], r[5], unpack_tokens(r[6]), json.loads(r[7]) if r[7] else None,
                         json.loads(r[8]) if r[8] else None, unpack_rounds(r[9]), r[10])
