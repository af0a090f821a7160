"""Reads for the session inspector (docs/DESIGN.md §9). Every statement but the session list
filters on one session's key; the list filters on the tenant, and is paged."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.inspection import ArchivedChunk, ArchivePage, FactRecord, SessionSummary
from app.core.recall_trace import StoredChunkAt
from app.core.types import ChunkKind, client_session_id
from app.store.models import ChunkRow, EventRow, FactRow, MessageRow, SessionRow


async def tenant_sessions(
    db: AsyncSession, tenant_id: str, limit: int, offset: int
) -> list[SessionSummary]:
    """The tenant's sessions, the most recently used first."""
    result = await db.execute(
        select(
            SessionRow.id,
            SessionRow.turn_count,
            SessionRow.model,
            SessionRow.created_at,
            SessionRow.updated_at,
        )
        .where(SessionRow.tenant_id == tenant_id)
        .order_by(SessionRow.updated_at.desc(), SessionRow.id)
        .limit(limit)
        .offset(offset)
    )
    return [
        SessionSummary(client_session_id(key), turns, model, created, updated)
        for key, turns, model, created, updated in result.all()
    ]


async def spoken_messages(db: AsyncSession, session_id: str) -> tuple[int, int]:
    """(messages the user or the assistant said, all messages) of the session: the notes
    read the first kind only."""
    spoken = func.count().filter(MessageRow.role.in_(("user", "assistant")))
    row = (
        await db.execute(select(spoken, func.count()).where(MessageRow.session_id == session_id))
    ).one()
    return int(row[0]), int(row[1])


async def all_facts(db: AsyncSession, session_id: str) -> list[FactRecord]:
    """Every fact of the session, whatever its status, in the order they were written."""
    result = await db.execute(
        select(FactRow).where(FactRow.session_id == session_id).order_by(FactRow.id)
    )
    return [
        FactRecord(
            id=row.id,
            kind=row.kind,
            text=row.text,
            source_turn=row.source_turn,
            source_seq=row.source_seq,
            role=row.role,
            status=row.status,
            superseded_by=row.superseded_by,
            resolved_at_turn=row.resolved_at_turn,
        )
        for row in result.scalars()
    ]


async def archive_page(db: AsyncSession, session_id: str, limit: int, offset: int) -> ArchivePage:
    """A page of the session's chunks, newest first, without their text."""
    total = await db.scalar(select(func.count()).where(ChunkRow.session_id == session_id))
    result = await db.execute(
        select(
            ChunkRow.id,
            ChunkRow.kind,
            ChunkRow.turn_start,
            ChunkRow.turn_end,
            ChunkRow.tokens,
            ChunkRow.needs_embedding,
            ChunkRow.embedding_model,
            ChunkRow.summary_hint,
            ChunkRow.superseded_turn,
            ChunkRow.created_at,
        )
        .where(ChunkRow.session_id == session_id)
        .order_by(ChunkRow.turn_start.desc(), ChunkRow.id.desc())
        .limit(limit)
        .offset(offset)
    )
    chunks = tuple(
        ArchivedChunk(
            chunk_id=row.id,
            kind=row.kind,
            turn_range=(row.turn_start, row.turn_end),
            tokens=row.tokens,
            embedded=not row.needs_embedding and row.embedding_model is not None,
            embedding_model=row.embedding_model,
            summary_hint=row.summary_hint,
            superseded_turn=row.superseded_turn,
            created_at=row.created_at,
        )
        for row in result.all()
    )
    return ArchivePage(chunks, int(total or 0), offset, limit)


async def turn_events(db: AsyncSession, session_id: str, limit: int) -> list[EventRow]:
    """The newest `limit` turn events, oldest first (payloads may be sealed: read whole)."""
    result = await db.execute(
        select(EventRow)
        .where(EventRow.session_id == session_id, EventRow.kind == "turn")
        .order_by(EventRow.id.desc())
        .limit(limit)
    )
    return list(reversed(result.scalars().all()))


async def chunks_holding(
    db: AsyncSession, session_id: str, needle: str, limit: int
) -> tuple[list[StoredChunkAt], int]:
    """The live chunks among the newest `limit` whose text holds `needle` (case-insensitive),
    and how many were searched. Matched here, not in SQL: the text may be sealed."""
    result = await db.execute(
        select(
            ChunkRow.id,
            ChunkRow.turn_start,
            ChunkRow.turn_end,
            ChunkRow.created_at,
            ChunkRow.archived_turn,
            ChunkRow.kind,
            ChunkRow.raw_text,
        )
        .where(ChunkRow.session_id == session_id, ChunkRow.superseded_turn.is_(None))
        .order_by(ChunkRow.created_at.desc(), ChunkRow.id)
        .limit(limit)
    )
    rows = result.all()
    lowered = needle.casefold()
    found = [
        StoredChunkAt(chunk_id, (start, end), created, archived, kind != ChunkKind.REMEMBER)
        for chunk_id, start, end, created, archived, kind, text in rows
        if lowered in text.casefold()
    ]
    return found, len(rows)
