"""Value types shared by every layer.

`WindowMessage` is a stored message that is in C1 (`app/core/messages.py` holds the message
model itself); the chunk drafts are what an offload plans.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from app.core.messages import JsonObject, Message

if TYPE_CHECKING:
    from app.core.blobs import Blob

__all__ = ["JsonObject"]  # re-exported: the JSON columns' and raw payloads' type


def session_key(tenant_id: str, session_id: str) -> str:
    """The stored key of a session: ids are each tenant's own, so two tenants may use the same
    id and never meet. Session ids cannot hold `/`, so the key parts never blur."""
    return f"{tenant_id}/{session_id}"


def client_session_id(key: str) -> str:
    """The id the client chose, from a session key."""
    return key.rpartition("/")[2]


def tenant_of(key: str) -> str:
    """The tenant a session key belongs to."""
    return key.rpartition("/")[0]


class MessageState(StrEnum):
    WINDOW = "window"
    OFFLOADED = "offloaded"
    SUPERSEDED = "superseded"  # archived by a client's diverging history (core/transcript.py)


@dataclass(frozen=True)
class WindowMessage:
    """A stored message that is in C1. When the posted text was oversize, it went to chunk
    `stub_chunk_id` and the message's text is the stub that points there."""

    seq: int
    turn: int
    message: Message
    tokens: int
    created_at: datetime
    stub_chunk_id: str | None = None
    recalled: RecalledText | None = None  # injected just before this message (history now)
    digest: str | None = None  # of the message as posted (core/transcript.py), stub or not


@dataclass(frozen=True)
class RecalledText:
    """A recalled block as the prompt shows it (header included), what it costs, and the
    chunks it quotes."""

    text: str
    tokens: int
    chunk_ids: tuple[str, ...]


class ChunkKind(StrEnum):
    OFFLOAD = "offload"
    OVERSIZE = "oversize"
    REMEMBER = "remember"  # written on purpose through the memory tool, not offloaded


@dataclass(frozen=True)
class UnitDraft:
    """A piece of a chunk with a vector of its own (docs/DESIGN.md §4): a message's text, or
    one window of sentences of a long one. The text is not stored twice: it is
    `raw_text[start:end]` of the chunk, read after `speaker: ` when the message was named."""

    ord: int
    seq: int
    created_at: datetime
    start: int
    end: int
    speaker: str | None = None

    def text(self, raw_text: str) -> str:
        body = raw_text[self.start : self.end]
        return f"{self.speaker}: {body}" if self.speaker else body


@dataclass(frozen=True)
class ChunkDraft:
    """An offload chunk planned in memory, before it is embedded and written."""

    id: str
    kind: ChunkKind
    seqs: tuple[int, ...]
    turn_start: int
    turn_end: int
    roles: tuple[str, ...]
    first_ts: datetime
    last_ts: datetime
    raw_text: str
    tokens: int
    summary_hint: str
    content_hash: str
    lexical_terms: tuple[str, ...] = field(default=())  # each once (`distinct_terms`)
    units: tuple[UnitDraft, ...] = field(default=())
    # The messages as posted, payloads replaced by blob references (app/core/blobs.py).
    sources: tuple[JsonObject, ...] = field(default=())
    blobs: tuple[Blob, ...] = field(default=())

    def unit_texts(self) -> list[str]:
        return [unit.text(self.raw_text) for unit in self.units]


@dataclass(frozen=True)
class EmbeddedChunk:
    """A draft with its vectors: the chunk's mean and one per unit, in the order of
    `draft.units` (both None when the embedder was down: written for re-embedding)."""

    draft: ChunkDraft
    vector: list[float] | None
    unit_vectors: tuple[list[float], ...] | None = None
