"""Value types shared by every layer.

`Message` is the OpenAI chat message a client posts (roles `user`, `assistant`, `tool`; the
system prompt travels separately as C0). `WindowMessage` is a stored message that is in C1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import AwareDatetime, ConfigDict, Field, model_validator

from app.core.inputs import InputModel

# A JSON object whose shape belongs to a format, not to this service: a row's JSON column, a
# chat message in a provider's format, a tool's JSON schema. Domain values are typed instead.
JsonObject = dict[str, Any]
Role = Literal["user", "assistant", "tool"]


class FunctionCall(InputModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=256)
    arguments: str = ""


class ToolCall(InputModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=256)
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(InputModel):
    """One chat message in OpenAI format. Fields this service does not use (`refusal`,
    `annotations`, `audio`, … that provider SDKs add to assistant replies) are dropped, so a
    client can post the model's reply back as it received it."""

    model_config = ConfigDict(extra="ignore")

    role: Role
    content: str | None = None
    name: str | None = Field(None, max_length=256)
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = Field(None, max_length=256)
    # When it was said (RFC 3339 with an offset): stored, shown in chunk headers and recall
    # items, and matched by dates in questions. Absent: the time the service received it.
    created_at: AwareDatetime | None = None

    @model_validator(mode="after")
    def _shape_matches_role(self) -> Message:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id of the call it answers")
        if self.role != "tool" and self.tool_call_id is not None:
            raise ValueError("only tool messages carry tool_call_id")
        if self.role != "assistant" and self.tool_calls:
            raise ValueError("only assistant messages carry tool_calls")
        if self.content is None and not self.tool_calls:
            raise ValueError("content is required unless the assistant message has tool_calls")
        return self

    def to_openai(self) -> JsonObject:
        """The message as a provider takes it (no `created_at`: no provider knows the field)."""
        return self.model_dump(exclude_none=True, exclude={"created_at"})


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


@dataclass(frozen=True)
class WindowMessage:
    """A stored message that is in C1. When the posted text was oversize, it went to chunk
    `stub_chunk_id` and `message.content` is the stub that points there."""

    seq: int
    turn: int
    message: Message
    tokens: int
    created_at: datetime
    stub_chunk_id: str | None = None


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
    lexical_terms: tuple[str, ...] = field(default=())
    units: tuple[UnitDraft, ...] = field(default=())

    def unit_texts(self) -> list[str]:
        return [unit.text(self.raw_text) for unit in self.units]


@dataclass(frozen=True)
class EmbeddedChunk:
    """A draft with its vectors: the chunk's mean and one per unit, in the order of
    `draft.units` (both None when the embedder was down: written for re-embedding)."""

    draft: ChunkDraft
    vector: list[float] | None
    unit_vectors: tuple[list[float], ...] | None = None
