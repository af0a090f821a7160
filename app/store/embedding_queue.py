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


# The claim reads this many candidates per chunk it wants: another worker may be claiming the
# oldest at the same moment (their rows are skipped, not waited for), and the next ones are
# then at hand without a second scan of every session.
CANDIDATES_PER_CLAIM = 4


async def claim(db: AsyncSession, limit: int, now: datetime, lease: timedelta) -> list[ChunkRow]:
    """Up to `limit` pending chunks, oldest first, that no live claim holds, now claimed until
    `now + lease`. Rows another transaction is claiming are skipped, not waited for.

    Two steps, so that no lock is taken across sessions: the oldest candidates are read
    without locks (a scan of every session, which on Citus reaches every shard, where
    `FOR UPDATE` cannot go), then each session's are locked and claimed by a statement routed
    to that session alone, the sessions of the oldest candidates first."""
    candidates = await _oldest_unclaimed(db, limit * CANDIDATES_PER_CLAIM, now)
    grouped: dict[str, list[str]] = {}
    for session_id, chunk_id in candidates:
        grouped.setdefault(session_id, []).append(chunk_id)
    claimed: list[ChunkRow] = []
    for session_id, chunk_ids in grouped.items():
        wanted = limit - len(claimed)
        if wanted <= 0:
            break
        claimed += await _claim_in_session(db, session_id, chunk_ids, wanted, now, now + lease)
    return sorted(claimed, key=lambda chunk: (chunk.created_at, chunk.session_id, chunk.id))


def _unclaimed(now: datetime) -> ColumnElement[bool]:
    return ChunkRow.embedding_claimed_until.is_(None) | (ChunkRow.embedding_claimed_until < now)


async def _oldest_unclaimed(db: AsyncSession, limit: int, now: datetime) -> list[tuple[str, str]]:
    """(session id, chunk id) of the oldest pending chunks no live claim holds; no locks."""
    rows = await db.execute(
        select(ChunkRow.session_id, ChunkRow.id)
        .where(_pending(), _unclaimed(now))
        .order_by(ChunkRow.created_at)
        .limit(limit)
    )
    return [(row[0], row[1]) for row in rows.all()]


async def _claim_in_session(
    db: AsyncSession,
    session_id: str,
    chunk_ids: Sequence[str],
    limit: int,
    now: datetime,
    until: datetime,
) -> list[ChunkRow]:
    """Locks up to `limit` of the session's chunks among `chunk_ids`, oldest first, that are
    still pending and unclaimed (skipping any another transaction holds), and claims them
    until `until`."""
    rows = list(
        (
            await db.execute(
                select(ChunkRow)
                .options(defer(ChunkRow.embedding), defer(ChunkRow.lexical))
                .where(ChunkRow.session_id == session_id, ChunkRow.id.in_(chunk_ids))
                .where(_pending(), _unclaimed(now))
                .order_by(ChunkRow.created_at)
                .limit(limit)
                .with_for_update(skip_locked=True)
            )
        ).scalars()
    )
    for row in rows:
        row.embedding_claimed_until = until
    await db.flush()
    return rows


def by_session(chunks: Sequence[ChunkRow]) -> dict[str, list[str]]:
    """Chunk ids grouped by session, in order: a statement per group reaches one shard."""
    groups: dict[str, list[str]] = {}
    for chunk in chunks:
        groups.setdefault(chunk.session_id, []).append(chunk.id)
    return groups


async def still_claimed(
    db: AsyncSession, session_id: str, chunk_ids: Sequence[str], until: datetime
) -> set[str]:
    """Locks the session's chunks among `chunk_ids` whose claim still holds, and answers
    their ids: each exists, is still pending, and carries our claim's time (not forgotten,
    archived or claimed again). One statement for all of them."""
    rows = await db.scalars(
        select(ChunkRow.id)
        .where(ChunkRow.session_id == session_id, ChunkRow.id.in_(chunk_ids), _pending())
        .where(ChunkRow.embedding_claimed_until == until)
        .with_for_update()
    )
    return set(rows)


async def release(db: AsyncSession, chunks: Sequence[ChunkRow], until: datetime) -> None:
    """Gives the claims back (the embedder failed): the chunks may be claimed at once."""
    for session_id, chunk_ids in by_session(chunks).items():
        await db.execute(
            update(ChunkRow)
            .where(ChunkRow.session_id == session_id, ChunkRow.id.in_(chunk_ids))
            .where(ChunkRow.embedding_claimed_until == until)
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
