"""The embedding queue (docs/DESIGN.md §3): chunks written without vectors wait here, in the
chunks table itself (`needs_embedding`), until a worker claims and embeds them.

A claim is a time: `embedding_claimed_until`. Claiming locks the rows with `FOR UPDATE SKIP
LOCKED`, so workers never wait on each other, and commits at once; the vectors are written
later, in another transaction, only while the claim still holds (the same time is still on
the row). A worker that dies leaves claims that expire, and the chunks are claimed again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from app.store.models import ChunkRow


def _pending() -> ColumnElement[bool]:
    """The queue: chunks waiting for vectors, not of an archived branch (the partial indexes'
    predicate, spelled the same way so that the planner uses them)."""
    return and_(ChunkRow.needs_embedding, ChunkRow.superseded_turn.is_(None))


async def claim(db: AsyncSession, limit: int, now: datetime, lease: timedelta) -> list[ChunkRow]:
    """Up to `limit` pending chunks, oldest first, that no live claim holds, now claimed until
    `now + lease`. Rows another transaction is claiming are skipped, not waited for."""
    rows = list(
        (
            await db.execute(
                select(ChunkRow)
                .options(defer(ChunkRow.embedding), defer(ChunkRow.lexical))
                .where(_pending())
                .where(
                    ChunkRow.embedding_claimed_until.is_(None)
                    | (ChunkRow.embedding_claimed_until < now)
                )
                .order_by(ChunkRow.created_at)
                .limit(limit)
                .with_for_update(skip_locked=True)
            )
        ).scalars()
    )
    until = now + lease
    for row in rows:
        row.embedding_claimed_until = until
    await db.flush()
    return rows


async def still_claimed(db: AsyncSession, chunk: ChunkRow, until: datetime) -> bool:
    """Locks the chunk and tells whether our claim still holds: the chunk exists, is still
    pending, and carries our claim's time (not forgotten, archived or claimed again)."""
    found = await db.scalar(
        select(ChunkRow.embedding_claimed_until)
        .where(ChunkRow.session_id == chunk.session_id, ChunkRow.id == chunk.id, _pending())
        .with_for_update()
    )
    return found == until


async def release(db: AsyncSession, chunks: Sequence[ChunkRow], until: datetime) -> None:
    """Gives the claims back (the embedder failed): the chunks may be claimed at once."""
    for chunk in chunks:
        await db.execute(
            update(ChunkRow)
            .where(
                ChunkRow.session_id == chunk.session_id,
                ChunkRow.id == chunk.id,
                ChunkRow.embedding_claimed_until == until,
            )
            .values(embedding_claimed_until=None)
        )


@dataclass(frozen=True)
class QueueDepth:
    chunks: int
    oldest: datetime | None  # when the oldest pending chunk was written


async def depth(db: AsyncSession) -> QueueDepth:
    count, oldest = (
        await db.execute(select(func.count(), func.min(ChunkRow.created_at)).where(_pending()))
    ).one()
    return QueueDepth(int(count), oldest)


async def session_pending(db: AsyncSession, session_id: str) -> int:
    """How many of the session's chunks wait for vectors (recall finds them by words only)."""
    found = await db.scalar(
        select(func.count()).where(ChunkRow.session_id == session_id, _pending())
    )
    return int(found or 0)


async def enqueue_stale(db: AsyncSession, model: str, session_id: str | None) -> int:
    """Puts in the queue every chunk without vectors of `model` (another model's, or none),
    except those of archived branches; answers how many are now pending."""
    statement = (
        update(ChunkRow)
        .where(ChunkRow.superseded_turn.is_(None), ~ChunkRow.needs_embedding)
        .where(ChunkRow.embedding_model.is_(None) | (ChunkRow.embedding_model != model))
        .values(needs_embedding=True, embedding_claimed_until=None)
    )
    if session_id is not None:
        statement = statement.where(ChunkRow.session_id == session_id)
    await db.execute(statement)
    pending = select(func.count()).where(_pending())
    if session_id is not None:
        pending = pending.where(ChunkRow.session_id == session_id)
    return int(await db.scalar(pending) or 0)
