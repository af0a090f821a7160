"""Offload chunks (C3): raw text, vector, lexical terms, and their messages' media."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import cast

from sqlalchemy import Table, Text, bindparam, delete, func, select, update
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from app.core.blobs import Blob
from app.core.types import EmbeddedChunk, UnitDraft
from app.core.vectors import mean_vector
from app.store.models import BlobRow, ChunkRow, ChunkUnitRow, SessionRow
from app.store.sealing import blind_terms
from app.store.sessions import execute_in_batches

# The tables themselves, for inserts of many rows at once (no unit of work per row).
CHUNKS = cast(Table, ChunkRow.__table__)
UNITS = cast(Table, ChunkUnitRow.__table__)


async def insert_chunks(
    db: AsyncSession,
    session_id: str,
    chunks: Sequence[EmbeddedChunk],
    embedding_model: str,
    archived_turn: int,
) -> None:
    """Writes the chunks and their units; a chunk without vectors is marked for re-embedding.
    `archived_turn`: the first turn that has them in its archive."""
    terms = sum(len(chunk.draft.lexical_terms) for chunk in chunks)  # distinct already
    await add_to_lexical_totals(db, session_id, len(chunks), terms)
    statement = insert(CHUNKS).values(
        lexical=func.array_to_tsvector(bindparam("lexical_terms", type_=ARRAY(Text)))
    )
    await execute_in_batches(
        db,
        statement,
        chunks,
        lambda chunk: _chunk_row(session_id, chunk, embedding_model, archived_turn),
    )
    await insert_blobs(db, session_id, [blob for chunk in chunks for blob in chunk.draft.blobs])
    units = [
        (chunk.draft.id, unit, unit_vector)
        for chunk in chunks
        for unit, unit_vector in zip(
            chunk.draft.units, chunk.unit_vectors or [None] * len(chunk.draft.units), strict=True
        )
    ]
    await execute_in_batches(
        db,
        insert(UNITS),
        units,
        lambda unit: _unit_row(session_id, unit[0], unit[1], unit[2], embedding_model),
    )


def _chunk_row(
    session_id: str, chunk: EmbeddedChunk, embedding_model: str, archived_turn: int
) -> dict[str, object]:
    draft, vector = chunk.draft, chunk.vector
    return {
        "session_id": session_id,
        "id": draft.id,
        "kind": draft.kind,
        "turn_start": draft.turn_start,
        "turn_end": draft.turn_end,
        "seq_start": min(draft.seqs),
        "seq_end": max(draft.seqs),
        "roles": list(draft.roles),
        "first_ts": draft.first_ts,
        "last_ts": draft.last_ts,
        "raw_text": draft.raw_text,
        "tokens": draft.tokens,
        "summary_hint": draft.summary_hint,
        "embedding": vector,
        "embedding_model": embedding_model if vector is not None else None,
        "needs_embedding": vector is None or chunk.unit_vectors is None,
        "lexical_terms": blind_terms(draft.lexical_terms),
        "content_hash": draft.content_hash,
        "sources": list(draft.sources) or None,
        "blob_hashes": [blob.hash for blob in draft.blobs] or None,
        "archived_turn": archived_turn,
    }


async def insert_blobs(db: AsyncSession, session_id: str, blobs: Sequence[Blob]) -> None:
    """Stores each payload once per session: one already there is left as it is."""
    unique = {blob.hash: blob for blob in blobs}
    for blob in unique.values():
        await db.execute(
            insert(BlobRow)
            .values(
                session_id=session_id,
                hash=blob.hash,
                kind=blob.kind,
                media_type=blob.media_type,
                data=blob.data,
                size=blob.size,
            )
            .on_conflict_do_nothing(index_elements=[BlobRow.session_id, BlobRow.hash])
        )


async def drop_unreferenced_blobs(db: AsyncSession, session_id: str) -> None:
    """Deletes the session's payloads that no chunk names any more (after a forget)."""
    named = select(ChunkRow.id).where(
        ChunkRow.session_id == BlobRow.session_id, BlobRow.hash == func.any(ChunkRow.blob_hashes)
    )
    await db.execute(delete(BlobRow).where(BlobRow.session_id == session_id, ~named.exists()))


async def blob(db: AsyncSession, session_id: str, blob_hash: str) -> BlobRow | None:
    return await db.get(BlobRow, (session_id, blob_hash))


def _unit_row(
    session_id: str,
    chunk_id: str,
    unit: UnitDraft,
    vector: list[float] | None,
    embedding_model: str,
) -> dict[str, object]:
    return {
        "session_id": session_id,
        "chunk_id": chunk_id,
        "ord": unit.ord,
        "seq": unit.seq,
        "said_at": unit.created_at,
        "text_start": unit.start,
        "text_end": unit.end,
        "speaker": unit.speaker,
        "embedding": vector,
        "embedding_model": embedding_model if vector is not None else None,
    }


async def get_chunk(db: AsyncSession, session_id: str, chunk_id: str) -> ChunkRow | None:
    return await db.get(ChunkRow, (session_id, chunk_id))


async def units_of(
    db: AsyncSession, chunks: Sequence[ChunkRow]
) -> dict[tuple[str, str], list[UnitDraft]]:
    """(session id, chunk id) → the chunk's units in order, one statement per session of
    `chunks` (a chunk with none is absent)."""
    by_session: dict[str, list[str]] = {}
    for chunk in chunks:
        by_session.setdefault(chunk.session_id, []).append(chunk.id)
    found: dict[tuple[str, str], list[UnitDraft]] = {}
    for session_id, chunk_ids in by_session.items():
        rows = await db.execute(
            select(ChunkUnitRow)
            .options(defer(ChunkUnitRow.embedding))
            .where(ChunkUnitRow.session_id == session_id, ChunkUnitRow.chunk_id.in_(chunk_ids))
            .order_by(ChunkUnitRow.chunk_id, ChunkUnitRow.ord)
        )
        for r in rows.scalars():
            unit = UnitDraft(r.ord, r.seq, r.said_at, r.text_start, r.text_end, r.speaker)
            found.setdefault((r.session_id, r.chunk_id), []).append(unit)
    return found


async def set_embedding(
    db: AsyncSession,
    session_id: str,
    chunk_id: str,
    units: Sequence[UnitDraft],
    vectors: Sequence[list[float]],
    model: str,
) -> None:
    """The chunk's vectors of `model`: its units' (written anew) and their mean."""
    await db.execute(
        delete(ChunkUnitRow).where(
            ChunkUnitRow.session_id == session_id, ChunkUnitRow.chunk_id == chunk_id
        )
    )
    rows = [
        _unit_row(session_id, chunk_id, unit, vector, model)
        for unit, vector in zip(units, vectors, strict=True)
    ]
    if rows:
        await db.execute(insert(UNITS), rows)
    await db.execute(
        update(ChunkRow)
        .where(ChunkRow.session_id == session_id, ChunkRow.id == chunk_id)
        .values(
            embedding=mean_vector(vectors),
            embedding_model=model,
            needs_embedding=False,
            embedding_claimed_until=None,
        )
    )
    await db.flush()


async def set_lexical_terms(
    db: AsyncSession, session_id: str, chunk_id: str, terms: Sequence[str]
) -> None:
    """Rewrites a chunk's lexical index (after the index key changed). The same terms under
    another key: the session's BM25 totals stay as they are."""
    await db.execute(
        update(ChunkRow)
        .where(ChunkRow.session_id == session_id, ChunkRow.id == chunk_id)
        .values(lexical=func.array_to_tsvector(blind_terms(terms)))
    )


async def chunk_with_hash(db: AsyncSession, session_id: str, content_hash: str) -> str | None:
    """The id of a chunk of the session with exactly this text, if any."""
    return await db.scalar(
        select(ChunkRow.id)
        .where(ChunkRow.session_id == session_id, ChunkRow.content_hash == content_hash)
        .limit(1)
    )


async def written_since(
    db: AsyncSession, session_id: str, kind: str, since: datetime
) -> tuple[int, datetime]:
    """How many chunks of `kind` were written after `since`, and when the oldest of them was
    (`since` when none was)."""
    count, oldest = (
        await db.execute(
            select(func.count(), func.min(ChunkRow.created_at)).where(
                ChunkRow.session_id == session_id,
                ChunkRow.kind == kind,
                ChunkRow.created_at >= since,
            )
        )
    ).one()
    return int(count), oldest or since


async def chunks_by_id(
    db: AsyncSession, session_id: str, chunk_ids: Sequence[str]
) -> list[ChunkRow]:
    result = await db.execute(
        select(ChunkRow)
        .where(ChunkRow.session_id == session_id, ChunkRow.id.in_(chunk_ids))
        .order_by(ChunkRow.turn_start, ChunkRow.id)
    )
    return list(result.scalars())


async def chunks_in_turns(
    db: AsyncSession, session_id: str, turn_start: int, turn_end: int
) -> list[ChunkRow]:
    """Chunks overlapping the turn range (a chunk goes whole or not at all)."""
    result = await db.execute(
        select(ChunkRow)
        .where(
            ChunkRow.session_id == session_id,
            ChunkRow.turn_start <= turn_end,
            ChunkRow.turn_end >= turn_start,
        )
        .order_by(ChunkRow.turn_start, ChunkRow.id)
    )
    return list(result.scalars())


async def delete_chunks(db: AsyncSession, session_id: str, chunk_ids: Sequence[str]) -> int:
    """Deletes the rows, their vectors and lexical terms with them."""
    await leave_lexical_index(db, session_id, chunk_ids)
    result = await db.execute(
        delete(ChunkRow).where(ChunkRow.session_id == session_id, ChunkRow.id.in_(chunk_ids))
    )
    return int(getattr(result, "rowcount", 0))


async def add_to_lexical_totals(db: AsyncSession, session_id: str, chunks: int, terms: int) -> None:
    """Moves the session's BM25 totals (`SessionRow.lexical_chunks`, `lexical_terms`)."""
    if chunks or terms:
        await db.execute(
            update(SessionRow)
            .where(SessionRow.id == session_id)
            .values(
                lexical_chunks=SessionRow.lexical_chunks + chunks,
                lexical_terms=SessionRow.lexical_terms + terms,
            )
        )


async def leave_lexical_index(db: AsyncSession, session_id: str, chunk_ids: Sequence[str]) -> None:
    """Takes the chunks that are still in the lexical index out of the session's totals, in
    one statement: call it before they are deleted or their terms cleared."""
    if not chunk_ids:
        return
    leaving = (
        ChunkRow.session_id == session_id,
        ChunkRow.id.in_(chunk_ids),
        ChunkRow.superseded_turn.is_(None),
    )
    chunks = select(func.count()).where(*leaving).scalar_subquery()
    terms = select(func.coalesce(func.sum(func.length(ChunkRow.lexical)), 0)).where(*leaving)
    await db.execute(
        update(SessionRow)
        .where(SessionRow.id == session_id)
        .values(
            lexical_chunks=SessionRow.lexical_chunks - chunks,
            lexical_terms=SessionRow.lexical_terms - terms.scalar_subquery(),
        )
    )
