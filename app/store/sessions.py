"""Sessions and their messages. Repositories flush; the caller's unit of work commits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from sqlalchemy import exists, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.results import SessionCounts
from app.core.types import (
    FunctionCall,
    JsonObject,
    Message,
    MessageState,
    Role,
    ToolCall,
    WindowMessage,
)
from app.store.models import ChunkRow, MessageRow, NoteRow, SessionRow


async def get_session(db: AsyncSession, session_id: str) -> SessionRow | None:
    return await db.get(SessionRow, session_id)


async def session_with_notes(
    db: AsyncSession, session_id: str
) -> tuple[SessionRow, NoteRow | None, bool] | None:
    """The session, its notes and whether it has chunks, in one round trip (every turn
    starts with it); None for an unknown session."""
    has_chunks = exists().where(ChunkRow.session_id == SessionRow.id).label("has_chunks")
    result = await db.execute(
        select(SessionRow, NoteRow, has_chunks)
        .outerjoin(NoteRow, NoteRow.session_id == SessionRow.id)
        .where(SessionRow.id == session_id)
    )
    row = result.one_or_none()
    return None if row is None else (row[0], row[1], bool(row[2]))


def bump_version(row: SessionRow) -> None:
    """Marks a write that a turn planned before it must not overwrite: that turn's version
    check fails and it plans again on what this write left."""
    row.version += 1


async def lock_session(db: AsyncSession, session_id: str) -> SessionRow | None:
    """The session row under `SELECT … FOR UPDATE`: turns of one session are serialised."""
    result = await db.execute(
        select(SessionRow).where(SessionRow.id == session_id).with_for_update()
    )
    return result.scalar_one_or_none()


async def create_session(db: AsyncSession, key: str, tenant_id: str) -> bool:
    """Inserts an empty session under its key; False when another turn created it first."""
    result = await db.execute(
        insert(SessionRow)
        .values(
            id=key,
            tenant_id=tenant_id,
            version=0,
            turn_count=0,
            next_seq=1,
            c0_tokens=0,
            policy={},
            calibration_ratio=1.0,
        )
        .on_conflict_do_nothing(index_elements=[SessionRow.id])
    )
    return bool(getattr(result, "rowcount", 0))


def _stored_call(call: JsonObject) -> ToolCall:
    return ToolCall.model_construct(
        id=call["id"],
        type=call.get("type", "function"),
        function=FunctionCall.model_construct(**call["function"]),
    )


def _window_message(row: MessageRow) -> WindowMessage:
    """A stored message, built without validation: it was validated once, when it was posted,
    and every turn reads the whole window back."""
    message = Message.model_construct(
        role=cast(Role, row.role),
        content=row.content,
        name=row.name,
        tool_calls=[_stored_call(c) for c in row.tool_calls] if row.tool_calls else None,
        tool_call_id=row.tool_call_id,
    )
    return WindowMessage(
        seq=row.seq,
        turn=row.turn,
        message=message,
        tokens=row.tokens,
        created_at=row.created_at,
        stub_chunk_id=row.stub_chunk_id,
    )


async def window_messages(db: AsyncSession, session_id: str) -> list[WindowMessage]:
    """C1, oldest first."""
    result = await db.execute(
        select(MessageRow)
        .where(MessageRow.session_id == session_id, MessageRow.state == MessageState.WINDOW)
        .order_by(MessageRow.seq)
    )
    return [_window_message(row) for row in result.scalars()]


async def insert_messages(
    db: AsyncSession, session_id: str, messages: Sequence[WindowMessage]
) -> None:
    db.add_all(
        MessageRow(
            session_id=session_id,
            seq=item.seq,
            turn=item.turn,
            role=item.message.role,
            content=item.message.content,
            name=item.message.name,
            tool_calls=[c.model_dump() for c in item.message.tool_calls]
            if item.message.tool_calls
            else None,
            tool_call_id=item.message.tool_call_id,
            tokens=item.tokens,
            state=MessageState.WINDOW,
            stub_chunk_id=item.stub_chunk_id,
            created_at=item.created_at,
        )
        for item in messages
    )
    await db.flush()


async def mark_offloaded(db: AsyncSession, session_id: str, chunk_of: Mapping[int, str]) -> None:
    """Moves messages to C3: their text now lives only in the named chunk."""
    by_chunk: dict[str, list[int]] = {}
    for seq, chunk_id in chunk_of.items():
        by_chunk.setdefault(chunk_id, []).append(seq)
    for chunk_id, seqs in by_chunk.items():
        await db.execute(
            update(MessageRow)
            .where(MessageRow.session_id == session_id, MessageRow.seq.in_(seqs))
            .values(state=MessageState.OFFLOADED, chunk_id=chunk_id, content=None, tool_calls=None)
        )


async def notes_for(db: AsyncSession, session_id: str) -> NoteRow | None:
    return await db.get(NoteRow, session_id)


async def counts(db: AsyncSession, session_id: str) -> SessionCounts:
    """Message counts by state and the number of chunks."""
    rows = await db.execute(
        select(MessageRow.state, func.count(), func.coalesce(func.sum(MessageRow.tokens), 0))
        .where(MessageRow.session_id == session_id)
        .group_by(MessageRow.state)
    )
    window_messages = window_tokens = offloaded_messages = 0
    for state, count, tokens in rows.all():
        if state == MessageState.WINDOW:
            window_messages, window_tokens = count, int(tokens)
        else:
            offloaded_messages = count
    chunks = await db.scalar(
        select(func.count()).select_from(ChunkRow).where(ChunkRow.session_id == session_id)
    )
    return SessionCounts(window_messages, window_tokens, offloaded_messages, int(chunks or 0))


async def window_seqs(db: AsyncSession, session_id: str) -> set[int]:
    """Seqs of the messages whose full text is in C1 (stubs excluded)."""
    result = await db.execute(
        select(MessageRow.seq).where(
            MessageRow.session_id == session_id,
            MessageRow.state == MessageState.WINDOW,
            MessageRow.stub_chunk_id.is_(None),
        )
    )
    return set(result.scalars())
