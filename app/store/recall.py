"""Candidate search in C3, per session: vector (pgvector, over chunk units) and lexical (full
text over chunks)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Float, Row, Select, String, func, literal, select, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from app.core.dates import Period
from app.store.models import ChunkRow, ChunkUnitRow
from app.store.sealing import blind_terms

# Candidates need their text and place, not their vector (the score comes from SQL) nor their
# lexical terms: parsing 384 floats per row was most of the search stage's Python time.
UNUSED_COLUMNS = (defer(ChunkRow.embedding), defer(ChunkRow.lexical), defer(ChunkRow.sources))


@dataclass(frozen=True)
class UnitHit:
    """A unit near the query: `score` ranks (the inner product with the query as recall
    shifts it), `similarity` is the plain cosine with the query."""

    chunk_id: str
    ord: int
    score: float
    similarity: float
    said_at: datetime
    speaker: str | None


def _unit_query(
    session_id: str,
    model: str,
    query: Sequence[float],
    shifted: Sequence[float],
    limit: int,
    *,
    exact: bool,
    period: Period | None = None,
) -> Select[str, int, float, float, datetime, str | None]:
    rank = ChunkUnitRow.embedding.max_inner_product(shifted)  # pgvector's `<#>`: −a·b
    # `+ 0` hides the operator from the HNSW index, forcing an exact scan of the session's rows.
    statement = (
        select(
            ChunkUnitRow.chunk_id,
            ChunkUnitRow.ord,
            (-rank).label("score"),
            (-ChunkUnitRow.embedding.max_inner_product(query)).label("similarity"),
            ChunkUnitRow.said_at,
            ChunkUnitRow.speaker,
        )
        .where(ChunkUnitRow.session_id == session_id, ChunkUnitRow.embedding_model == model)
        # The index serves `ORDER BY distance LIMIT n` only, with no tie-breaking columns.
        .order_by(*((rank + 0, ChunkUnitRow.chunk_id, ChunkUnitRow.ord) if exact else (rank,)))
        .limit(limit)
    )
    if period is not None:
        statement = statement.where(
            ChunkUnitRow.said_at >= period.start, ChunkUnitRow.said_at < period.end
        )
    return statement


def _unit_hits(
    rows: Sequence[Row[str, int, float, float, datetime, str | None]],
) -> list[UnitHit]:
    return [UnitHit(r[0], r[1], float(r[2]), float(r[3]), r[4], r[5]) for r in rows]


@dataclass(frozen=True)
class ArchiveShape:
    """What a search of a session's archive needs to know first, read in one statement."""

    large: bool  # more units than the exact scan takes (`VectorScan.exact_max_units`)
    pending_chunks: int  # chunks waiting for vectors: found by their words only


async def archive_shape(db: AsyncSession, session_id: str, exact_max_units: int) -> ArchiveShape:
    """The session's archive's shape; its units are counted up to `exact_max_units + 1`."""
    probe = (
        select(literal(1)).where(ChunkUnitRow.session_id == session_id).limit(exact_max_units + 1)
    )
    units = select(func.count()).select_from(probe.subquery()).scalar_subquery()
    pending = (
        select(func.count())
        .where(ChunkRow.session_id == session_id, ChunkRow.needs_embedding)
        .where(ChunkRow.superseded_turn.is_(None))
        .scalar_subquery()
    )
    found = (await db.execute(select(units, pending))).one()
    return ArchiveShape(large=int(found[0]) > exact_max_units, pending_chunks=int(found[1]))


# The HNSW scan's settings for this transaction (SET LOCAL), in one round trip.
_SCAN_SETTINGS = text(
    "SELECT set_config('hnsw.iterative_scan', 'strict_order', true), "
    "set_config('hnsw.ef_search', :ef_search, true), "
    "set_config('hnsw.max_scan_tuples', :max_tuples, true)"
)


@dataclass(frozen=True)
class VectorScan:
    """How the vector channel searches a session: exactly up to `exact_max_units` units,
    beyond through the HNSW index with pgvector's iterative scan (strict order): the graph
    walk goes on past `ef_search` candidates until `limit` rows of the session are found or
    `max_scan_tuples` were visited."""

    ef_search: int
    exact_max_units: int
    max_scan_tuples: int


async def unit_candidates(
    db: AsyncSession,
    session_id: str,
    model: str,
    query: Sequence[float],
    shifted: Sequence[float],
    limit: int,
    scan: VectorScan,
    shape: ArchiveShape | None = None,
) -> list[UnitHit]:
    """The session's units nearest the query, of vectors by `model` only. A small session is
    scanned exactly; a larger one through the index, filtered by session as the walk goes (a
    session's share of a table too large for the walk to find `limit` of its rows within
    `max_scan_tuples` is scanned exactly instead). The same query on the same archive gets
    the same answer either way. `shape`: the archive's, when the caller has read it."""
    shape = shape or await archive_shape(db, session_id, scan.exact_max_units)
    exact = not shape.large
    if not exact:
        await db.execute(
            _SCAN_SETTINGS.bindparams(
                ef_search=str(max(scan.ef_search, limit)), max_tuples=str(scan.max_scan_tuples)
            )
        )
    statement = _unit_query(session_id, model, query, shifted, limit, exact=exact)
    rows = (await db.execute(statement)).all()
    if not exact and len(rows) < limit:
        statement = _unit_query(session_id, model, query, shifted, limit, exact=True)
        rows = (await db.execute(statement)).all()
    return _unit_hits(rows)


async def units_said_in(
    db: AsyncSession,
    session_id: str,
    model: str,
    query: Sequence[float],
    shifted: Sequence[float],
    limit: int,
    period: Period,
) -> list[UnitHit]:
    """The session's units said within `period`, nearest the query first (an exact scan of
    that period's rows, found through the `(session_id, said_at)` index)."""
    statement = _unit_query(session_id, model, query, shifted, limit, exact=True, period=period)
    rows = (await db.execute(statement)).all()
    return _unit_hits(rows)


async def chunks_with_context(
    db: AsyncSession, session_id: str, chunk_ids: Sequence[str], shifted: Sequence[float]
) -> list[tuple[ChunkRow, float | None]]:
    """The chunks, each with its mean vector's inner product with the shifted query (None
    for a chunk with no vector)."""
    if not chunk_ids:
        return []
    context = (-ChunkRow.embedding.max_inner_product(shifted)).label("context")
    rows = await db.execute(
        select(ChunkRow, context)
        .options(*UNUSED_COLUMNS)
        .where(ChunkRow.session_id == session_id, ChunkRow.id.in_(chunk_ids))
    )
    return [(row[0], None if row[1] is None else float(row[1])) for row in rows.all()]


def tsquery_any(terms: Sequence[str]) -> str:
    """`'a' | 'b'`: the terms as exact lexemes (quotes doubled), any of them may match."""
    return " | ".join("'" + term.replace("\\", "").replace("'", "''") + "'" for term in terms)


# Ids of the session's chunks holding any query term, best first by BM25 with binary term
# frequency (a chunk's tsvector holds each term once): Σ idf(t) · (k1 + 1) / (1 + k1 · (1 − b +
# b · dl / avgdl)), idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5)). N and avgdl are the session's
# (its row keeps the totals), dl a chunk's distinct terms. Only the newest `max_rows` matching
# chunks are ranked, so the cost stays bounded however many chunks share a common word; df is
# counted among them (exact while fewer match). One statement, whatever the number of terms
# (an array of one-term queries), its weights aggregated once per term.
_BM25_RANKED = text(
    """
    WITH matching AS (
        SELECT id, turn_start, lexical, length(lexical) AS dl FROM chunks
        WHERE session_id = :session_id AND lexical @@ CAST(:any_term AS tsquery)
        ORDER BY turn_start DESC
        LIMIT :max_rows
    ), totals AS (
        SELECT lexical_chunks::float8 AS n,
            CASE WHEN lexical_chunks > 0 THEN lexical_terms::float8 / lexical_chunks
                ELSE (SELECT avg(dl) FROM matching) END AS avgdl
        FROM sessions WHERE id = :session_id
    ), holds AS (
        SELECT m.id, m.turn_start, m.dl, q.ord
        FROM matching AS m
        JOIN unnest(CAST(:each_term AS tsquery[])) WITH ORDINALITY AS q(term, ord)
            ON m.lexical @@ q.term
    ), weights AS (
        SELECT h.ord, ln(1 + (greatest(t.n, count(*)) - count(*) + 0.5) / (count(*) + 0.5)) AS idf
        FROM holds AS h CROSS JOIN totals AS t
        GROUP BY h.ord, t.n
    )
    SELECT h.id,
        sum(w.idf * (:k1 + 1) / (1 + :k1 * (1 - :b + :b * h.dl / greatest(t.avgdl, 1)))) AS score
    FROM holds AS h JOIN weights AS w USING (ord) CROSS JOIN totals AS t
    GROUP BY h.id, h.turn_start
    ORDER BY score DESC, h.turn_start DESC, h.id
    LIMIT :limit
    """
).columns(id=String, score=Float)


@dataclass(frozen=True)
class LexicalScan:
    """How the lexical channel ranks a session's chunks: BM25's `k1` and `b`, over at most
    the newest `max_rows` chunks that hold a query term."""

    max_rows: int
    k1: float
    b: float


async def lexical_candidates(
    db: AsyncSession,
    session_id: str,
    terms: Sequence[str],
    limit: int,
    scan: LexicalScan,
) -> list[ChunkRow]:
    """The session's chunks holding any of the terms, best first by BM25 (`_BM25_RANKED`)."""
    if not terms:
        return []
    blinded = blind_terms(list(dict.fromkeys(terms)))
    ranked = _BM25_RANKED.bindparams(
        session_id=session_id,
        any_term=tsquery_any(blinded),
        each_term=[tsquery_any([term]) for term in blinded],
        max_rows=scan.max_rows,
        k1=scan.k1,
        b=scan.b,
        limit=limit,
    ).subquery()
    statement = (
        select(ChunkRow)
        .options(*UNUSED_COLUMNS)
        .join(ranked, (ChunkRow.session_id == session_id) & (ChunkRow.id == ranked.c.id))
        .order_by(ranked.c.score.desc(), ChunkRow.turn_start.desc(), ChunkRow.id)
    )
    return list((await db.execute(statement)).scalars())
