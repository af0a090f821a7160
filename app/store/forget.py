"""What `forget` touches besides chunks: pending requests, the messages and facts that came
from the forgotten chunks, event text, replayed responses. The service commits."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.store.models import EventRow, FactRow, ForgetRequest, IdempotencyRow, MessageRow


async def add_request(
    db: AsyncSession,
    session_id: str,
    request_id: str,
    chunk_ids: Sequence[str],
    requested_by: str,
    expires_at: datetime,
) -> None:
    db.add(
        ForgetRequest(
            session_id=session_id,
            id=request_id,
            chunk_ids=list(chunk_ids),
            requested_by=requested_by,
            expires_at=expires_at,
        )
    )
    await db.flush()


async def take_request(
    db: AsyncSession, session_id: str, request_id: str, now: datetime
) -> ForgetRequest | None:
    """The pending request, deleted as it is taken; None if unknown or expired."""
    request = await db.get(ForgetRequest, (session_id, request_id))
    if request is None:
        return None
    await db.delete(request)
    await db.flush()
    return request if request.expires_at > now else None


async def drop_offloaded_messages(
    db: AsyncSession, session_id: str, chunk_ids: Sequence[str]
) -> int:
    """Offloaded messages keep no text of their own, only their place; it goes too."""
    result = await db.execute(
        delete(MessageRow).where(
            MessageRow.session_id == session_id, MessageRow.chunk_id.in_(chunk_ids)
        )
    )
    return int(getattr(result, "rowcount", 0))


async def stub_messages(
    db: AsyncSession, session_id: str, chunk_ids: Sequence[str]
) -> list[MessageRow]:
    """Window messages standing in for an oversize message kept in one of the chunks."""
    result = await db.execute(
        select(MessageRow).where(
            MessageRow.session_id == session_id, MessageRow.stub_chunk_id.in_(chunk_ids)
        )
    )
    return list(result.scalars())


async def session_facts(db: AsyncSession, session_id: str) -> list[FactRow]:
    result = await db.execute(select(FactRow).where(FactRow.session_id == session_id))
    return list(result.scalars())


async def delete_facts(db: AsyncSession, session_id: str, fact_ids: Sequence[int]) -> None:
    if fact_ids:
        await db.execute(
            delete(FactRow).where(FactRow.session_id == session_id, FactRow.id.in_(fact_ids))
        )


async def session_events(db: AsyncSession, session_id: str) -> list[EventRow]:
    result = await db.execute(select(EventRow).where(EventRow.session_id == session_id))
    return list(result.scalars())


async def drop_replays(db: AsyncSession, session_id: str) -> None:
    """Stored first responses hold whole prompts; a forget cannot leave them behind. The
    records stay, empty, so a late retry of an answered turn is still known as one and is
    never stored twice."""
    await db.execute(
        update(IdempotencyRow).where(IdempotencyRow.session_id == session_id).values(response=None)
    )
