"""The per-turn event log and the idempotency records."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.store.models import EventRow, IdempotencyRow


async def record_event(
    db: AsyncSession, session_id: str, turn: int | None, kind: str, payload: dict[str, Any]
) -> None:
    db.add(EventRow(session_id=session_id, turn=turn, kind=kind, payload=payload))
    await db.flush()


async def find_idempotent(db: AsyncSession, session_id: str, key: str) -> IdempotencyRow | None:
    return await db.get(IdempotencyRow, (session_id, key))


async def save_idempotent(
    db: AsyncSession, session_id: str, key: str, request_hash: str, response: dict[str, Any]
) -> None:
    db.add(
        IdempotencyRow(session_id=session_id, key=key, request_hash=request_hash, response=response)
    )
    await db.flush()


async def turn_event(db: AsyncSession, session_id: str, turn: int) -> EventRow | None:
    """The event the given turn wrote (payloads may be sealed, so they are never queried)."""
    result = await db.execute(
        select(EventRow)
        .where(EventRow.session_id == session_id, EventRow.kind == "turn", EventRow.turn == turn)
        .order_by(EventRow.id.desc())
        .limit(1)
    )
    return result.scalar_one_or_none()


async def events_after(
    db: AsyncSession, session_id: str, after: int, limit: int, kind: str | None
) -> list[EventRow]:
    """The session's events with ids above `after`, oldest first (keyset paging)."""
    statement = (
        select(EventRow)
        .where(EventRow.session_id == session_id, EventRow.id > after)
        .order_by(EventRow.id)
        .limit(limit)
    )
    if kind is not None:
        statement = statement.where(EventRow.kind == kind)
    return list((await db.execute(statement)).scalars())
