"""The live transcript as reconciliation reads it, and archiving a superseded branch
(app/core/transcript.py). Repositories flush; the caller's unit of work commits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import and_, delete, func, literal, select, update
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.facts import FactStatus
from app.core.notes import NotesBody
from app.core.transcript import StoredEntry
from app.core.types import MessageState
from app.store.chunks import leave_lexical_index
from app.store.models import ChunkRow, ChunkUnitRow, FactRow, MessageRow, NoteRow

LIVE_STATES = (MessageState.WINDOW, MessageState.OFFLOADED)


async def live_transcript(db: AsyncSession, session_id: str) -> list[StoredEntry]:
    """Every message not superseded, oldest first, with the first seq of its chunk once
    offloaded."""
    result = await db.execute(
        select(MessageRow.seq, MessageRow.turn, MessageRow.digest, ChunkRow.seq_start)
        .outerjoin(
            ChunkRow,
            and_(ChunkRow.session_id == MessageRow.session_id, ChunkRow.id == MessageRow.chunk_id),
        )
        .where(MessageRow.session_id == session_id, MessageRow.state.in_(LIVE_STATES))
        .order_by(MessageRow.seq)
    )
    return [
        StoredEntry(seq, turn, digest, chunk_start) for seq, turn, digest, chunk_start in result
    ]


@dataclass(frozen=True)
class ArchivedBranch:
    """What archiving a branch changed (counts and ids only, for the event log)."""

    from_seq: int
    from_turn: int
    messages: int
    chunk_ids: tuple[str, ...]
    facts_retired: int
    facts_restored: int


async def archive_branch(
    db: AsyncSession, session_id: str, from_seq: int, archived_at_turn: int
) -> ArchivedBranch:
    """Supersedes the live messages from `from_seq` on, takes the chunks they were offloaded
    into out of recall, retires the facts they stated (restoring what those facts had
    superseded or resolved), and drops their notes items. All kept, nothing deleted but the
    chunks' search entries."""
    archived = (
        await db.execute(
            update(MessageRow)
            .where(
                MessageRow.session_id == session_id,
                MessageRow.seq >= from_seq,
                MessageRow.state.in_(LIVE_STATES),
            )
            .values(
                state=MessageState.SUPERSEDED,
                recalled=None,
                recalled_tokens=0,
                recalled_chunk_ids=None,
            )
            .returning(MessageRow.turn, MessageRow.chunk_id, MessageRow.stub_chunk_id)
        )
    ).all()
    from_turn = min((turn for turn, _, _ in archived), default=archived_at_turn)
    chunk_ids = sorted({cid for _, *ids in archived for cid in ids if cid is not None})
    await archive_chunks(db, session_id, chunk_ids, archived_at_turn)
    retired, restored = await _retire_facts(db, session_id, from_seq, from_turn)
    await _drop_notes_items(db, session_id, from_turn)
    return ArchivedBranch(from_seq, from_turn, len(archived), tuple(chunk_ids), retired, restored)


async def archive_chunks(
    db: AsyncSession, session_id: str, chunk_ids: Sequence[str], turn: int
) -> None:
    """Takes the chunks out of recall at `turn` (their units and lexical terms): a superseded
    branch's chunks stay readable by id."""
    if not chunk_ids:
        return
    await leave_lexical_index(db, session_id, chunk_ids)
    await db.execute(
        delete(ChunkUnitRow).where(
            ChunkUnitRow.session_id == session_id, ChunkUnitRow.chunk_id.in_(chunk_ids)
        )
    )
    await db.execute(
        update(ChunkRow)
        .where(ChunkRow.session_id == session_id, ChunkRow.id.in_(chunk_ids))
        .values(superseded_turn=turn, lexical=func.cast(literal(""), TSVECTOR))
    )


async def _retire_facts(
    db: AsyncSession, session_id: str, from_seq: int, from_turn: int
) -> tuple[int, int]:
    """(facts retired, facts restored)."""
    retired = list(
        (
            await db.execute(
                update(FactRow)
                .where(FactRow.session_id == session_id, FactRow.source_seq >= from_seq)
                .values(status=FactStatus.SUPERSEDED, superseded_by=None)
                .returning(FactRow.id)
            )
        ).scalars()
    )
    restored = await db.execute(
        update(FactRow)
        .where(
            FactRow.session_id == session_id,
            FactRow.source_seq < from_seq,
            (FactRow.superseded_by.in_(retired) if retired else literal(False))
            | (FactRow.resolved_at_turn >= from_turn),
        )
        .values(status=FactStatus.ACTIVE, superseded_by=None, resolved_at_turn=None)
    )
    return len(retired), int(getattr(restored, "rowcount", 0) or 0)


async def _drop_notes_items(db: AsyncSession, session_id: str, from_turn: int) -> None:
    """The notes lose the done and open items of the archived turns and render again."""
    notes = await db.get(NoteRow, session_id)
    if notes is None:
        return
    body = NotesBody.from_json(notes.body)
    notes.body = NotesBody(
        goal=body.goal,
        done=[item for item in body.done if int(item.get("turn", 0)) < from_turn],
        open=[item for item in body.open if int(item.get("turn", 0)) < from_turn],
    ).to_json()
    notes.needs_rebuild = True
    await db.flush()
