"""Candidate search in C3: vector (pgvector, cosine) and lexical (full text), per session."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Select, cast, func, literal, select, text
from sqlalchemy.dialects.postgresql import TSQUERY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from app.store.models import ChunkRow
from app.store.sealing import blind_terms

# Candidates need their text and place, not their vector (the score comes from SQL) nor their
# lexical terms: parsing 384 floats per row was most of the search stage's Python time.
UNUSED_COLUMNS = (defer(ChunkRow.embedding), defer(ChunkRow.lexical))


def _vector_query(
    session_id: str, model: str, vector: Sequence[float], limit: int, *, exact: bool
) -> Select[ChunkRow, float]:
    distance = ChunkRow.embedding.cosine_distance(vector)
    # `+ 0` hides the operator from the HNSW index, forcing an exact scan of the session's rows.
    order = distance + 0 if exact else distance
    return (
        select(ChunkRow, (1 - distance).label("score"))
        .options(*UNUSED_COLUMNS)
        .where(ChunkRow.session_id == session_id, ChunkRow.embedding_model == model)
        .order_by(order)
        .limit(limit)
    )


async def vector_candidates(
    db: AsyncSession,
    session_id: str,
    model: str,
    vector: Sequence[float],
    limit: int,
    ef_search: int,
) -> list[tuple[ChunkRow, float]]:
    """Nearest chunks of the session embedded by `model` (vectors of another model or
    dimension are never compared). HNSW first; it filters by session after the graph search,
    so when it returns fewer than `limit` rows the session is scanned exactly."""
    await db.execute(text(f"SET LOCAL hnsw.ef_search = {int(ef_search)}"))
    rows = (await db.execute(_vector_query(session_id, model, vector, limit, exact=False))).all()
    if len(rows) < limit:
        rows = (await db.execute(_vector_query(session_id, model, vector, limit, exact=True))).all()
    return [(row[0], float(row[1])) for row in rows]


def tsquery_any(terms: Sequence[str]) -> str:
    """`'a' | 'b'`: the terms as exact lexemes (quotes doubled), any of them may match."""
    return " | ".join("'" + term.replace("\\", "").replace("'", "''") + "'" for term in terms)


async def lexical_candidates(
    db: AsyncSession, session_id: str, terms: Sequence[str], limit: int
) -> list[ChunkRow]:
    """The session's chunks holding any of the terms, best `ts_rank` first."""
    if not terms:
        return []
    query = cast(literal(tsquery_any(blind_terms(terms))), TSQUERY)
    statement = (
        select(ChunkRow)
        .options(*UNUSED_COLUMNS)
        .where(ChunkRow.session_id == session_id, ChunkRow.lexical.bool_op("@@")(query))
        .order_by(func.ts_rank(ChunkRow.lexical, query).desc(), ChunkRow.turn_start.desc())
        .limit(limit)
    )
    return list((await db.execute(statement)).scalars())
