"""Offload chunks (C3): raw text, vector, lexical terms."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import exists, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.types import ChunkDraft
from app.store.models import ChunkRow


async def insert_chunks(
    db: AsyncSession,
    session_id: str,
    chunks: Sequence[tuple[ChunkDraft, list[float] | None]],
    embedding_model: str,
) -> None:
    """Writes the chunks; a chunk without a vector is marked for re-embedding."""
    for draft, vector in chunks:
        db.add(
            ChunkRow(
                session_id=session_id,
                id=draft.id,
                kind=draft.kind,
                turn_start=draft.turn_start,
                turn_end=draft.turn_end,
                seq_start=min(draft.seqs),
                seq_end=max(draft.seqs),
                roles=list(draft.roles),
                first_ts=draft.first_ts,
                last_ts=draft.last_ts,
                raw_text=draft.raw_text,
                tokens=draft.tokens,
                summary_hint=draft.summary_hint,
                embedding=vector,
                embedding_model=embedding_model if vector is not None else None,
                needs_embedding=vector is None,
                lexical=func.array_to_tsvector(list(draft.lexical_terms)),
                content_hash=draft.content_hash,
            )
        )
    await db.flush()


async def get_chunk(db: AsyncSession, session_id: str, chunk_id: str) -> ChunkRow | None:
    return await db.get(ChunkRow, (session_id, chunk_id))


async def has_chunks(db: AsyncSession, session_id: str) -> bool:
    """Whether C3 holds anything for the session (recall is skipped while it is empty)."""
    return bool(await db.scalar(select(exists().where(ChunkRow.session_id == session_id))))
