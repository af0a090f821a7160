"""The vector channel past the exact-scan size: an HNSW iterative scan filtered by session
finds nearly the nearest units the exact scan of that session finds, while a larger session
shares the index; and the same query on the same archive gets the same answer. (Random
384-dimension vectors are an approximate index's hardest case: each HNSW build draws its
own graph, and on them a few of the ten nearest may be missed.)"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.chunker import remember_draft
from app.core.types import EmbeddedChunk
from app.store import chunks as chunk_store
from app.store import sessions as session_store
from app.store.database import Database
from app.store.models import EMBEDDING_DIMENSION
from app.store.recall import VectorScan, unit_candidates

MINE = "local/vectors"
OTHER = "local/vectors-other"
MODEL = "random"
EXACT = VectorScan(ef_search=100, exact_max_units=1_000_000, max_scan_tuples=20000)
THROUGH_THE_INDEX = VectorScan(ef_search=100, exact_max_units=0, max_scan_tuples=20000)


def _unit_vectors(rng: np.random.Generator, count: int) -> list[list[float]]:
    matrix = rng.standard_normal((count, EMBEDDING_DIMENSION)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return [[float(x) for x in row] for row in matrix]


async def _store(db: AsyncSession, key: str, vectors: list[list[float]]) -> None:
    now = datetime(2026, 3, 1, tzinfo=UTC)
    await session_store.create_session(db, key, "local")
    chunks = [
        EmbeddedChunk(remember_draft(f"ck_{i:04d}", f"unit {i}", 3, i, now, "user"), v, (v,))
        for i, v in enumerate(vectors)
    ]
    await chunk_store.insert_chunks(db, key, chunks, MODEL, archived_turn=1)


async def test_the_index_scan_finds_what_the_exact_scan_finds(database: Database) -> None:
    rng = np.random.default_rng(31)
    async with database.transaction() as db:
        await _store(db, MINE, _unit_vectors(rng, 300))
        await _store(db, OTHER, _unit_vectors(rng, 900))  # three times as many, same index
        # At this size the planner would sort the session's rows instead, an exact scan
        # itself; barred from sorting it walks the index, as it does on a large archive.
        await db.execute(text("SET LOCAL enable_sort = off"))
        found = 0
        for query in _unit_vectors(rng, 8):
            exact = await unit_candidates(db, MINE, MODEL, query, query, 10, EXACT)
            indexed = await unit_candidates(db, MINE, MODEL, query, query, 10, THROUGH_THE_INDEX)
            again = await unit_candidates(db, MINE, MODEL, query, query, 10, THROUGH_THE_INDEX)
            assert indexed == again
            assert len(indexed) == 10
            found += len({u.chunk_id for u in indexed} & {u.chunk_id for u in exact})
    assert found / 80 >= 0.8  # recall@10 of the index path against the exact scan


async def test_the_index_scan_filters_by_session_as_it_walks(database: Database) -> None:
    """pgvector 0.8's iterative scan: the walk goes on until it has the session's rows, where
    a plain scan stops at ef_search rows of any session and filters after."""
    rng = np.random.default_rng(32)
    async with database.transaction() as db:
        await _store(db, MINE, _unit_vectors(rng, 50))
        await _store(db, OTHER, _unit_vectors(rng, 1000))
        query = _unit_vectors(rng, 1)[0]
        scan = VectorScan(ef_search=20, exact_max_units=0, max_scan_tuples=20000)
        await db.execute(text("SET LOCAL enable_sort = off"))  # as on a large archive
        found = await unit_candidates(db, MINE, MODEL, query, query, 20, scan)
        # The same statement through the index alone, under the settings the search left:
        nearest = text(
            "SELECT chunk_id FROM chunk_units WHERE session_id = :s "
            "ORDER BY embedding <#> CAST(:q AS vector) LIMIT 20"
        ).bindparams(s=MINE, q=str(query))
        plan = "\n".join(
            row[0]
            for row in await db.execute(text(f"EXPLAIN {nearest}"), {"s": MINE, "q": str(query)})
        )
        walked = list((await db.execute(nearest)).scalars())
        await db.execute(text("SET LOCAL hnsw.iterative_scan = off"))
        stopped = list((await db.execute(nearest)).scalars())
    assert "ix_chunk_units_embedding_hnsw" in plan
    assert len(found) == 20
    assert walked == [u.chunk_id for u in found]  # the index gave them, no exact fallback
    assert len(stopped) < 20  # what pgvector 0.6 gave, and the search then scanned exactly
