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

from app.core.fair_queue import Waiting, batch_shares
from app.store.models import ChunkRow


def _pending() -> ColumnElement[bool]:
    """The queue: chunks waiting for vectors, not of an archived branch (the partial indexes'
    predicate, spelled the same way so that the planner uses them)."""
    return and_(ChunkRow.needs_embedding, ChunkRow.superseded_turn.is_(None))


async def claim(
    db: AsyncSession, limit: int, now: datetime, lease: timedelta, asking: Sequence[str] = ()
) -> list[ChunkRow]:
    """Up to `limit` pending chunks that no live claim holds, now claimed until `now + lease`,
    shared between sessions by `core.fair_queue.batch_shares` (the sessions a recall is
    `asking` for first, then a chunk per tenant in turn). Rows another transaction is
    claiming are skipped, not waited for: the batch is then smaller.

    Two steps, so that no lock is taken across sessions: the sessions with waiting chunks are
    read without locks (grouped by session, which on Citus each shard answers for its own),
    then each session's are locked and claimed by a statement routed to that session alone."""
    waiting = await _waiting_sessions(db, now)
    claimed: list[ChunkRow] = []
    for session_id, wanted in batch_shares(waiting, limit, asking):
        claimed += await claim_in_session(db, session_id, wanted, now, now + lease)
    return sorted(claimed, key=lambda chunk: (chunk.created_at, chunk.session_id, chunk.id))


def _unclaimed(now: datetime) -> ColumnElement[bool]:
    return ChunkRow.embedding_claimed_until.is_(None) | (ChunkRow.embedding_claimed_until < now)


async def _waiting_sessions(db: AsyncSession, now: datetime) -> dict[str, Waiting]:
    """Session key → its pending chunks no live claim holds: how many, and the oldest's time."""
    rows = await db.execute(
        select(ChunkRow.session_id, func.min(ChunkRow.created_at), func.count())
        .where(_pending(), _unclaimed(now))
        .group_by(ChunkRow.session_id)
    )
    return {session_id: Waiting(oldest, int(count)) for session_id, oldest, count in rows.all()}


async def claim_in_session(
    db: AsyncSession, session_id: str, limit: int, now: datetime, until: datetime
) -> list[ChunkRow]:
    """Locks up to `limit` of the session's pending, unclaimed chunks, oldest first (skipping
    any another transaction holds), and claims them until `until`."""
    rows = list(
        (
            await db.execute(
                select(ChunkRow)
                .options(defer(ChunkRow.embedding), defer(ChunkRow.lexical))
                .where(ChunkRow.session_id == session_id)
                .where(_pending(), _unclaimed(now))
                .order_by(ChunkRow.created_at, ChunkRow.id)
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


async def still_ours(
    db: AsyncSession, session_id: str, chunk_ids: Sequence[str], until: datetime, now: datetime
) -> set[str]:
    """Locks the session's chunks among `chunk_ids` this worker may still write, and answers
    their ids: each exists, is still pending (not forgotten, archived or embedded by another),
    and carries our claim's time, or a claim that has lapsed with nobody claiming it since. A
    batch slower than its lease still lands its work unless another worker took the chunks
    over. One statement for all of them."""
    rows = await db.scalars(
        select(ChunkRow.id)
        .where(ChunkRow.session_id == session_id, ChunkRow.id.in_(chunk_ids), _pending())
        .where((ChunkRow.embedding_claimed_until == until) | _unclaimed(now))
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
