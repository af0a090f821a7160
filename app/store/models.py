"""Tables (docs/DESIGN.md §7). Every per-session table carries `session_id`, and every
hot-path query filters on it, so the schema distributes by session on Citus unchanged
(`tenants` and `api_keys` would be reference tables). A session's key is `tenant/id`
(`app/core/types.py`: `session_key`): ids are each tenant's own. Alembic owns the schema;
`alembic check` keeps these models and the migrations in agreement."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    MetaData,
    String,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from app.store.sealing import SealedJson, SealedText

EMBEDDING_DIMENSION = 384
SESSION_KEY_CHARS = 200  # `tenant/id`: a 64-character tenant, the slash, a 128-character id
DEFAULT_TENANT = "local"
# A chunk in the embedding queue: waiting for vectors, and not of an archived branch.
PENDING_EMBEDDING = text("needs_embedding AND superseded_turn IS NULL")

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        dict[str, Any]: JSONB,
        datetime: DateTime(timezone=True),
    }


def _created_at() -> Mapped[datetime]:
    return mapped_column(server_default=func.now())


def _session_fk() -> Mapped[str]:
    return mapped_column(
        String(SESSION_KEY_CHARS), ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True
    )


class Tenant(Base):
    __tablename__ = "tenants"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[datetime] = _created_at()


class ApiKey(Base):
    """A tenant's key, stored as a SHA-256 hash; `prefix` identifies it in listings.
    Like `tenants`, a reference table on Citus (no session key)."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(64), ForeignKey("tenants.id"), index=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    scopes: Mapped[list[str]] = mapped_column(ARRAY(String(32)))
    created_at: Mapped[datetime] = _created_at()
    revoked_at: Mapped[datetime | None]


class InspectorLogin(Base):
    """A person logged in to the inspector: a random token, stored as its SHA-256, in their
    cookie, tied to the key they logged in with (a reference table, like `api_keys`). Logging
    out deletes it; revoking the key ends it at once; it expires on its own."""

    __tablename__ = "inspector_logins"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    key_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("api_keys.id", ondelete="CASCADE"), index=True
    )
    csrf: Mapped[str] = mapped_column(String(64))  # what its forms must send back
    created_at: Mapped[datetime] = _created_at()
    expires_at: Mapped[datetime]


class SessionRow(Base):
    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(String(SESSION_KEY_CHARS), primary_key=True)  # the key
    tenant_id: Mapped[str] = mapped_column(String(64), ForeignKey("tenants.id"), index=True)
    version: Mapped[int] = mapped_column(Integer, default=0)
    turn_count: Mapped[int] = mapped_column(Integer, default=0)
    next_seq: Mapped[int] = mapped_column(Integer, default=1)
    model: Mapped[str | None] = mapped_column(String(256))
    context_window: Mapped[int | None] = mapped_column(Integer)
    reserve_tokens: Mapped[int | None] = mapped_column(Integer)
    system_prompt: Mapped[str | None] = mapped_column(SealedText)
    # C0 as posted (`SystemPrompt.to_json`): leading system messages, or Anthropic's blocks.
    system_posted: Mapped[dict[str, Any] | None] = mapped_column(SealedJson)
    tools: Mapped[list[Any] | None] = mapped_column(SealedJson)
    c0_tokens: Mapped[int] = mapped_column(Integer, default=0)
    policy: Mapped[dict[str, Any]] = mapped_column(default=dict)
    calibration_ratio: Mapped[float] = mapped_column(Float, default=1.0)
    last_prompt_estimate: Mapped[int | None] = mapped_column(Integer)  # as sent
    last_window_estimate: Mapped[int | None] = mapped_column(Integer)  # recalled text aside
    last_offload_turn: Mapped[int | None] = mapped_column(Integer)
    # A manual offload (memory tool `offload`) that the session's next turn carries out.
    offload_until_tokens: Mapped[int | None] = mapped_column(Integer)
    # BM25's corpus statistics (app/store/recall.py): the chunks in the lexical index (not
    # superseded) and the sum of their distinct terms, kept in step by app/store/chunks.py.
    lexical_chunks: Mapped[int] = mapped_column(Integer, server_default="0")
    lexical_terms: Mapped[int] = mapped_column(BigInteger, server_default="0")
    created_at: Mapped[datetime] = _created_at()
    updated_at: Mapped[datetime] = mapped_column(server_default=func.now(), onupdate=func.now())


class MessageRow(Base):
    """A posted message. Its text lives in exactly one place: here while in the window, in
    its chunk once offloaded (`posted` cleared). An oversize message keeps only its stub here
    and its text in chunk `stub_chunk_id` from the start.

    `posted` is the message as the client sent it (JSON text, so its keys keep their order),
    in `format`. Rows written before formats existed have no `format` and keep the OpenAI
    fields `content`, `name`, `tool_calls` and `tool_call_id` instead. `recalled` is the
    recalled block injected just before this message: history until the next offload."""

    __tablename__ = "messages"
    __table_args__ = (Index(None, "session_id", "state", "seq"),)

    session_id: Mapped[str] = _session_fk()
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    turn: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str | None] = mapped_column(SealedText)
    name: Mapped[str | None] = mapped_column(String(256))
    tool_calls: Mapped[list[Any] | None] = mapped_column(SealedJson)
    tool_call_id: Mapped[str | None] = mapped_column(String(256))
    format: Mapped[str | None] = mapped_column(String(16))
    posted: Mapped[str | None] = mapped_column(SealedText)
    recalled: Mapped[str | None] = mapped_column(SealedText)
    recalled_tokens: Mapped[int] = mapped_column(Integer, server_default="0")
    recalled_chunk_ids: Mapped[list[str] | None] = mapped_column(ARRAY(String(40)))
    tokens: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))
    chunk_id: Mapped[str | None] = mapped_column(String(40))
    stub_chunk_id: Mapped[str | None] = mapped_column(String(40))
    digest: Mapped[str | None] = mapped_column(String(64))  # app/core/transcript.py
    created_at: Mapped[datetime] = _created_at()


class ChunkRow(Base):
    __tablename__ = "chunks"
    __table_args__ = (
        Index(None, "session_id", "turn_start"),
        Index(None, "session_id", "kind", "created_at"),  # the `remember` rate limit
        Index(
            "ix_chunks_embedding_hnsw",
            "embedding",
            postgresql_using="hnsw",
            postgresql_ops={"embedding": "vector_cosine_ops"},
        ),
        Index("ix_chunks_lexical_gin", "lexical", postgresql_using="gin"),
        # The embedding queue (app/store/embedding_queue.py): its oldest chunks, a session's.
        Index("ix_chunks_pending_created_at", "created_at", postgresql_where=PENDING_EMBEDDING),
        Index("ix_chunks_pending_session_id", "session_id", postgresql_where=PENDING_EMBEDDING),
    )

    session_id: Mapped[str] = _session_fk()
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    turn_start: Mapped[int] = mapped_column(Integer)
    turn_end: Mapped[int] = mapped_column(Integer)
    seq_start: Mapped[int] = mapped_column(Integer)
    seq_end: Mapped[int] = mapped_column(Integer)
    roles: Mapped[list[str]] = mapped_column(ARRAY(String(16)))
    first_ts: Mapped[datetime]
    last_ts: Mapped[datetime]
    raw_text: Mapped[str] = mapped_column(SealedText)
    tokens: Mapped[int] = mapped_column(Integer)
    summary_hint: Mapped[str] = mapped_column(SealedText)
    embedding: Mapped[list[float] | None] = mapped_column(Vector(EMBEDDING_DIMENSION))
    embedding_model: Mapped[str | None] = mapped_column(String(128))
    needs_embedding: Mapped[bool] = mapped_column(Boolean, default=False)
    lexical: Mapped[str] = mapped_column(TSVECTOR)
    content_hash: Mapped[str] = mapped_column(String(64))
    # The messages as posted (`{"seq", "format", "posted"}` each), media payloads replaced by
    # `blob_ref`s into `blobs`: the parts survive the offload, not only their words.
    sources: Mapped[list[Any] | None] = mapped_column(SealedJson)
    blob_hashes: Mapped[list[str] | None] = mapped_column(ARRAY(String(64)))
    # Set when a client's diverging history archived the chunk's messages (a superseded
    # branch): kept and readable by id, but its units and lexical terms are gone from recall.
    superseded_turn: Mapped[int | None] = mapped_column(Integer)
    # A worker's claim on a pending chunk: until then no other worker takes it.
    embedding_claimed_until: Mapped[datetime | None]
    # The first turn that had the chunk in its archive (the offloading turn; for a remembered
    # point, the turn after); empty for chunks written before it was recorded.
    archived_turn: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = _created_at()


class BlobRow(Base):
    """An offloaded image, clip or file, stored once per session under the SHA-256 of its
    base64 payload; chunks name it in their text and `sources`."""

    __tablename__ = "blobs"

    session_id: Mapped[str] = _session_fk()
    hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    media_type: Mapped[str | None] = mapped_column(String(128))
    data: Mapped[str] = mapped_column(SealedText)  # base64
    size: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = _created_at()


class ChunkUnitRow(Base):
    """A unit of a chunk with a vector of its own (docs/DESIGN.md §4): a message, or a window
    of sentences of a long one. No text of its own: it is the chunk's
    `raw_text[text_start:text_end]`, after `speaker: ` when the message was named."""

    __tablename__ = "chunk_units"
    __table_args__ = (
        ForeignKeyConstraint(
            ["session_id", "chunk_id"], ["chunks.session_id", "chunks.id"], ondelete="CASCADE"
        ),
        Index(
            "ix_chunk_units_embedding_hnsw",
            "embedding",
            postgresql_using="hnsw",
            postgresql_ops={"embedding": "vector_ip_ops"},
        ),
        Index(None, "session_id", "said_at"),  # units said on the day a question names
    )

    session_id: Mapped[str] = mapped_column(String(SESSION_KEY_CHARS), primary_key=True)
    chunk_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    ord: Mapped[int] = mapped_column(Integer, primary_key=True)
    seq: Mapped[int] = mapped_column(Integer)
    said_at: Mapped[datetime]  # the message's time
    text_start: Mapped[int] = mapped_column(Integer)
    text_end: Mapped[int] = mapped_column(Integer)
    speaker: Mapped[str | None] = mapped_column(String(256))
    embedding: Mapped[list[float] | None] = mapped_column(Vector(EMBEDDING_DIMENSION))
    embedding_model: Mapped[str | None] = mapped_column(String(128))


class NoteRow(Base):
    """C2: the scratchpad of one session."""

    __tablename__ = "notes"

    session_id: Mapped[str] = _session_fk()
    body: Mapped[dict[str, Any]] = mapped_column(SealedJson, default=dict)
    rendered: Mapped[str] = mapped_column(SealedText, default="")
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    needs_rebuild: Mapped[bool] = mapped_column(Boolean, default=False)
    updated_at: Mapped[datetime] = mapped_column(server_default=func.now(), onupdate=func.now())


class FactRow(Base):
    """A key fact with its source; never rewritten, only superseded or resolved."""

    __tablename__ = "facts"
    __table_args__ = (Index(None, "session_id", "status"),)

    session_id: Mapped[str] = _session_fk()
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    text: Mapped[str] = mapped_column(SealedText)
    source_turn: Mapped[int] = mapped_column(Integer)
    source_seq: Mapped[int | None] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16), server_default="user")
    ordinal: Mapped[int | None] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), server_default="active")
    confirmed_at_turn: Mapped[int] = mapped_column(Integer)
    resolved_at_turn: Mapped[int | None] = mapped_column(Integer)
    superseded_by: Mapped[int | None] = mapped_column(BigInteger)
    subject: Mapped[str | None] = mapped_column(SealedText)  # a stated fact's: "pilot budget"
    value: Mapped[str | None] = mapped_column(SealedText)  # normalised: "48500 EUR"
    # Carried from another session of the tenant (`carry_facts`): its id and that fact's id.
    carried_from: Mapped[str | None] = mapped_column(String(256))
    carried_fact_id: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = _created_at()


class EventRow(Base):
    __tablename__ = "events"

    session_id: Mapped[str] = _session_fk()
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    turn: Mapped[int | None] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(32))
    payload: Mapped[dict[str, Any]] = mapped_column(SealedJson, default=dict)
    created_at: Mapped[datetime] = _created_at()


class IdempotencyRow(Base):
    """The first response to a turn, replayed to retries with the same key; None once a
    forget dropped it (the record stays, so the retry is still recognised)."""

    __tablename__ = "idempotency"

    session_id: Mapped[str] = _session_fk()
    key: Mapped[str] = mapped_column(String(256), primary_key=True)
    request_hash: Mapped[str] = mapped_column(String(64))
    response: Mapped[dict[str, Any] | None] = mapped_column(SealedJson)
    created_at: Mapped[datetime] = _created_at()


class ForgetRequest(Base):
    """A pending `forget`: what it would delete, until someone with the scope confirms.
    It holds chunk ids only, never content."""

    __tablename__ = "forget_requests"

    session_id: Mapped[str] = _session_fk()
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    chunk_ids: Mapped[list[str]] = mapped_column(ARRAY(String(40)))
    requested_by: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = _created_at()
    expires_at: Mapped[datetime]
