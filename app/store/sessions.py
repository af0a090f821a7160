"""Sessions and their messages. Repositories flush; the caller's unit of work commits."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar, cast

from sqlalchemy import CursorResult, Executable, Row, Table, bindparam, exists, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.formats import posted_form, read_posted
from app.core.messages import Format, Message
from app.core.pace import loop_step
from app.core.results import SessionCounts
from app.core.types import JsonObject, MessageState, RecalledText, WindowMessage
from app.store.models import ChunkRow, MessageRow, NoteRow, SessionRow


async def get_session(db: AsyncSession, session_id: str) -> SessionRow | None:
    return await db.get(SessionRow, session_id)


async def session_with_notes(
    db: AsyncSession, session_id: str, *, lock: bool = False
) -> tuple[SessionRow, NoteRow | None, bool] | None:
    """The session, its notes and whether it has chunks, in one round trip (every turn
    starts with it); None for an unknown session. `lock`: the session row under `FOR UPDATE`
    (a turn that plans and writes in one transaction)."""
    # Bound to the key itself, not correlated with the outer row: a planner (Postgres's
    # partition pruning, Citus's router) reads a constant where it cannot read a correlation.
    has_chunks = exists().where(ChunkRow.session_id == session_id).label("has_chunks")
    statement = (
        select(SessionRow, NoteRow, has_chunks)
        .outerjoin(NoteRow, NoteRow.session_id == SessionRow.id)
        .where(SessionRow.id == session_id)
    )
    if lock:
        statement = statement.with_for_update(of=SessionRow)
    result = await db.execute(statement)
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


def _legacy_posted(row: MessageRow) -> JsonObject:
    """A row written before formats existed, as the OpenAI message it was posted as."""
    raw: JsonObject = {"role": row.role, "content": row.content}
    if row.name:
        raw["name"] = row.name
    if row.tool_calls:
        raw["tool_calls"] = row.tool_calls
    if row.tool_call_id:
        raw["tool_call_id"] = row.tool_call_id
    return raw


def stored_message(row: MessageRow) -> Message:
    """A stored message as it was posted (or, for rows from before formats, as OpenAI's)."""
    if row.format is None or row.posted is None:
        return read_posted(Format.OPENAI, _legacy_posted(row))
    return read_posted(Format(row.format), json.loads(row.posted))


def _window_message(row: MessageRow) -> WindowMessage:
    """A stored message, read without validation: it was validated once, when it was posted,
    and every turn reads the whole window back."""
    recalled = None
    if row.recalled is not None:
        recalled = RecalledText(
            row.recalled, row.recalled_tokens, tuple(row.recalled_chunk_ids or ())
        )
    return WindowMessage(
        seq=row.seq,
        turn=row.turn,
        message=replace(stored_message(row), created_at=row.created_at),
        tokens=row.tokens,
        created_at=row.created_at,
        stub_chunk_id=row.stub_chunk_id,
        recalled=recalled,
        digest=row.digest,
    )


def posted_json(message: Message) -> tuple[str, str]:
    """(format, JSON text) of a message as it is stored: the posted object, keys in order."""
    form = posted_form(message)
    return form.format.value, json.dumps(form.raw, ensure_ascii=False, separators=(",", ":"))


async def window_messages(db: AsyncSession, session_id: str) -> list[WindowMessage]:
    """C1, oldest first."""
    result = await db.execute(
        select(MessageRow)
        .where(MessageRow.session_id == session_id, MessageRow.state == MessageState.WINDOW)
        .order_by(MessageRow.seq)
    )
    return [_window_message(row) for row in result.scalars()]


MESSAGES = cast(Table, MessageRow.__table__)  # for statements over many rows at once
Item = TypeVar("Item")
# A large turn's rows go in statements of at most this many, each batch's rows built just
# before it is sent, so that the event loop serves other requests between them: a whole
# history brings tens of thousands, and building and binding 500 at once held the loop
# for a tenth of a second; 100 still held it about 15 ms a statement (12 s of the loop's
# time over some 800 statements of a 20,000-message call), and other callers' round trips
# waited behind each one (docs/RELIABILITY.md, "One caller against the rest").
ROWS_PER_STATEMENT = 25


def in_batches(items: Sequence[Item], size: int = ROWS_PER_STATEMENT) -> Iterator[Sequence[Item]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


async def execute_in_batches(
    db: AsyncSession,
    statement: Executable,
    items: Sequence[Item],
    row_of: Callable[[Item], Mapping[str, object]],
) -> list[Row[Any]]:
    """`statement` executed for the rows of `items`, a batch at a time (`ROWS_PER_STATEMENT`);
    the rows it returns (a RETURNING clause), in the order of `items`. Each batch is a step
    a large call's writes are paced by (`loop_step`)."""
    returned: list[Row[Any]] = []
    for batch in in_batches(items):
        async with loop_step():
            result = await db.execute(statement, [row_of(item) for item in batch])
            if isinstance(result, CursorResult) and result.returns_rows:
                returned.extend(result.all())
    return returned


async def insert_messages(
    db: AsyncSession, session_id: str, messages: Sequence[WindowMessage]
) -> None:
    def row_of(item: WindowMessage) -> Mapping[str, object]:
        fmt, posted = posted_json(item.message)
        return {
            "session_id": session_id,
            "seq": item.seq,
            "turn": item.turn,
            "role": item.message.role,
            "name": item.message.name,
            "format": fmt,
            "posted": posted,
            "tokens": item.tokens,
            "state": MessageState.WINDOW,
            "stub_chunk_id": item.stub_chunk_id,
            "digest": item.digest,
            "created_at": item.created_at,
            **_recalled_columns(item.recalled),
        }

    await execute_in_batches(db, insert(MESSAGES), messages, row_of)


def _recalled_columns(recalled: RecalledText | None) -> JsonObject:
    if recalled is None:
        return {"recalled": None, "recalled_tokens": 0, "recalled_chunk_ids": None}
    return {
        "recalled": recalled.text,
        "recalled_tokens": recalled.tokens,
        "recalled_chunk_ids": list(recalled.chunk_ids),
    }


async def mark_offloaded(db: AsyncSession, session_id: str, chunk_of: Mapping[int, str]) -> None:
    """Moves messages to C3: their text now lives only in the named chunk."""
    by_chunk: dict[str, list[int]] = {}
    for seq, chunk_id in chunk_of.items():
        by_chunk.setdefault(chunk_id, []).append(seq)
    table = MESSAGES
    statement = (
        update(table)
        .where(table.c.session_id == session_id, table.c.seq == func.any(bindparam("seqs")))
        .values(
            state=MessageState.OFFLOADED,
            chunk_id=bindparam("chunk"),
            content=None,
            tool_calls=None,
            posted=None,
            **_recalled_columns(None),
        )
    )
    await execute_in_batches(  # executed once for each chunk
        db, statement, list(by_chunk.items()), lambda item: {"chunk": item[0], "seqs": item[1]}
    )


async def clear_recalled(
    db: AsyncSession, session_id: str, seqs: Collection[int] | None = None
) -> None:
    """Drops the recalled blocks the window holds: all of them (an offload), or those on the
    given messages."""
    statement = update(MessageRow).where(
        MessageRow.session_id == session_id,
        MessageRow.state == MessageState.WINDOW,
        MessageRow.recalled.is_not(None),
    )
    if seqs is not None:
        statement = statement.where(MessageRow.seq.in_(list(seqs)))
    await db.execute(statement.values(**_recalled_columns(None)))


async def held_chunk_ids(db: AsyncSession, session_id: str) -> list[str]:
    """Chunks quoted by the recalled blocks in the window."""
    result = await db.execute(
        select(MessageRow.recalled_chunk_ids).where(
            MessageRow.session_id == session_id,
            MessageRow.state == MessageState.WINDOW,
            MessageRow.recalled_chunk_ids.is_not(None),
        )
    )
    return [cid for ids in result.scalars() for cid in ids or ()]


async def drop_recalled_quoting(
    db: AsyncSession, session_id: str, chunk_ids: Sequence[str]
) -> None:
    """Drops the recalled blocks that quote any of the chunks (a forget deletes them)."""
    await db.execute(
        update(MessageRow)
        .where(
            MessageRow.session_id == session_id,
            MessageRow.recalled_chunk_ids.overlap(list(chunk_ids)),
        )
        .values(**_recalled_columns(None))
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
    by_state = {state: (count, int(tokens)) for state, count, tokens in rows.all()}
    window_messages, window_tokens = by_state.get(MessageState.WINDOW, (0, 0))
    chunks = await db.scalar(
        select(func.count()).select_from(ChunkRow).where(ChunkRow.session_id == session_id)
    )
    return SessionCounts(
        window_messages=window_messages,
        window_tokens=window_tokens,
        offloaded_messages=by_state.get(MessageState.OFFLOADED, (0, 0))[0],
        chunks=int(chunks or 0),
        superseded_messages=by_state.get(MessageState.SUPERSEDED, (0, 0))[0],
    )


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
