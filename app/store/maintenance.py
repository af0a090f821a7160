"""Whole-table maintenance: re-sealing every row under the current key, purging old sessions.
Each function does one bounded batch; the caller commits between batches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Column, Table, and_, delete, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import FromClause

from app.store.models import Base, ChunkRow, SessionRow
from app.store.sealing import SealedJson, SealedText


@dataclass(frozen=True)
class SealedTable:
    table: Table
    key: tuple[Column[Any], ...]
    columns: tuple[Column[Any], ...]


def sealed_tables() -> list[SealedTable]:
    """Every table with a sealed column, found from the models (a new one cannot be missed)."""
    found = []
    for table in Base.metadata.sorted_tables:
        columns = tuple(c for c in table.columns if isinstance(c.type, SealedText | SealedJson))
        if columns:
            found.append(SealedTable(table, tuple(table.primary_key.columns), columns))
    return found


def _after(key: Sequence[Any], last: Sequence[Any]) -> Any:
    """Rows whose primary key sorts after `last` (lexicographic over the key's columns)."""
    clauses = []
    for i, column in enumerate(key):
        equal_prefix = [key[j] == last[j] for j in range(i)]
        clauses.append(and_(*equal_prefix, column > last[i]))
    return or_(*clauses)


async def reseal_batch(
    db: AsyncSession, target: SealedTable, after: Sequence[Any] | None, limit: int
) -> tuple[int, tuple[Any, ...] | None]:
    """Reads up to `limit` rows (opened with any configured key) and writes them back (sealed
    with the first key, or plain without keys). Returns the count and the last key read."""
    statement = select(*target.key, *target.columns).order_by(*target.key).limit(limit)
    if after is not None:
        statement = statement.where(_after(target.key, after))
    rows = (await db.execute(statement)).all()
    width = len(target.key)
    for row in rows:
        key, values = row[:width], row[width:]
        await db.execute(
            update(target.table)
            .where(*(column == value for column, value in zip(target.key, key, strict=True)))
            .values({c.name: v for c, v in zip(target.columns, values, strict=True)})
        )
    return len(rows), (tuple(rows[-1][:width]) if rows else None)


async def chunk_texts(
    db: AsyncSession, after: tuple[str, str] | None, limit: int
) -> list[tuple[str, str, str]]:
    """(session_id, chunk_id, raw_text) in key order, for rebuilding the lexical index."""
    statement = (
        select(ChunkRow.session_id, ChunkRow.id, ChunkRow.raw_text)
        .order_by(ChunkRow.session_id, ChunkRow.id)
        .limit(limit)
    )
    if after is not None:
        statement = statement.where(_after((ChunkRow.session_id, ChunkRow.id), after))
    return [(r[0], r[1], r[2]) for r in (await db.execute(statement)).all()]


async def count_rows(db: AsyncSession, table: FromClause) -> int:
    """A table's rows (for a long job's progress: it may change while the job runs)."""
    return int(await db.scalar(select(func.count()).select_from(table)) or 0)


async def count_expired(db: AsyncSession, idle_before: datetime) -> int:
    return int(
        await db.scalar(
            select(func.count()).select_from(SessionRow).where(SessionRow.updated_at < idle_before)
        )
        or 0
    )


async def expired_sessions(db: AsyncSession, idle_before: datetime, limit: int) -> list[str]:
    """Up to `limit` sessions idle since before `idle_before`, the longest idle first. Read
    without locks: it scans every session (every shard on Citus, where `FOR UPDATE` cannot
    go); `delete_idle_session` then locks each by its key."""
    result = await db.execute(
        select(SessionRow.id)
        .where(SessionRow.updated_at < idle_before)
        .order_by(SessionRow.updated_at)
        .limit(limit)
    )
    return list(result.scalars())


async def delete_idle_session(db: AsyncSession, session_id: str, idle_before: datetime) -> bool:
    """Deletes the session if it is still idle and no turn holds it (a locked row is skipped,
    not waited for); every table's rows go with it (ON DELETE CASCADE)."""
    still_idle = await db.scalar(
        select(SessionRow.id)
        .where(SessionRow.id == session_id, SessionRow.updated_at < idle_before)
        .with_for_update(skip_locked=True)
    )
    if still_idle is None:
        return False
    await db.execute(delete(SessionRow).where(SessionRow.id == session_id))
    return True
