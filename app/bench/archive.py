"""The archive-size benchmark (`ebbtide bench`, section 3): synthetic chunks bulk-loaded with
COPY into one session of a migrated database, then the recall search (the store's vector and
lexical candidate queries, exactly as recall runs them) timed at each size. Query embedding
is not part of it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from app.core.stats import percentiles
from app.core.types import session_key
from app.services.recall import QueryVectors, lexical_scan, search_archive, vector_scan
from app.settings import RecallSettings
from app.store.database import Database, libpq_url
from app.store.distribution import partition_by_session
from app.store.migrate import upgrade_head
from app.store.models import DEFAULT_TENANT, EMBEDDING_DIMENSION
from app.store.recall import lexical_candidates, unit_candidates

SESSION = session_key(DEFAULT_TENANT, "bench-archive")
MODEL = "bench-synthetic"
VOCABULARY = 5000
TERMS_PER_CHUNK = 40
TERMS_PER_QUERY = 4
UNITS_PER_CHUNK = 4  # a chunk of three turns: about one unit per message
COPY_BATCH = 5000


def _prepare(url: str) -> None:
    with psycopg.connect(libpq_url(url), autocommit=True) as connection:
        connection.execute(
            "INSERT INTO tenants (id, name) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            (DEFAULT_TENANT, DEFAULT_TENANT),
        )
        connection.execute(
            "INSERT INTO sessions (id, tenant_id, version, turn_count, next_seq, c0_tokens, "
            "policy, calibration_ratio) VALUES (%s, %s, 0, 0, 1, 0, '{}', 1)",
            (SESSION, DEFAULT_TENANT),
        )


def _vectors(rng: np.random.Generator, count: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    matrix = rng.standard_normal((count, EMBEDDING_DIMENSION)).astype(np.float32)
    unit: np.ndarray[Any, np.dtype[np.float32]] = matrix / np.linalg.norm(
        matrix, axis=1, keepdims=True
    )
    return unit


def _load(
    url: str, start: int, stop: int, rng: np.random.Generator, vector_index: bool = True
) -> tuple[float, float]:
    """COPYs chunks start..stop-1 (HNSW index dropped first, rebuilt after unless
    `vector_index` is false): the load and index build seconds."""
    with psycopg.connect(libpq_url(url), autocommit=True) as connection:
        register_vector(connection)
        connection.execute("DROP INDEX IF EXISTS ix_chunks_embedding_hnsw")
        connection.execute("DROP INDEX IF EXISTS ix_chunk_units_embedding_hnsw")
        connection.execute(
            "CREATE TEMP TABLE stage (id varchar(40), n int, embedding vector(384), terms text[])"
        )
        connection.execute(
            "CREATE TEMP TABLE unit_stage (id varchar(40), ord int, embedding vector(384))"
        )
        began = time.perf_counter()
        for first in range(start, stop, COPY_BATCH):
            count = min(COPY_BATCH, stop - first)
            vectors = _vectors(rng, count)
            terms = rng.integers(0, VOCABULARY, size=(count, TERMS_PER_CHUNK))
            with connection.cursor() as cursor:
                copy_sql = "COPY stage (id, n, embedding, terms) FROM STDIN WITH (FORMAT BINARY)"
                with cursor.copy(copy_sql) as copy:
                    copy.set_types(["varchar", "int4", "vector", "text[]"])
                    for i in range(count):
                        row_terms = [f"term{t}" for t in terms[i]]
                        copy.write_row((f"ck_bench_{first + i}", first + i, vectors[i], row_terms))
            units = _vectors(rng, count * UNITS_PER_CHUNK)
            with connection.cursor() as cursor:
                copy_sql = "COPY unit_stage (id, ord, embedding) FROM STDIN WITH (FORMAT BINARY)"
                with cursor.copy(copy_sql) as copy:
                    copy.set_types(["varchar", "int4", "vector"])
                    for j in range(count * UNITS_PER_CHUNK):
                        chunk = first + j // UNITS_PER_CHUNK
                        copy.write_row((f"ck_bench_{chunk}", j % UNITS_PER_CHUNK, units[j]))
        connection.execute(
            "INSERT INTO chunks (session_id, id, kind, turn_start, turn_end, seq_start, seq_end, "
            "roles, first_ts, last_ts, raw_text, tokens, summary_hint, embedding, "
            "embedding_model, needs_embedding, lexical, content_hash) "
            "SELECT %s, id, 'offload', n, n, n, n, '{user}', now(), now(), "
            "array_to_string(terms, ' '), 400, '', embedding, %s, false, "
            "array_to_tsvector(terms), md5(id) FROM stage",
            (SESSION, MODEL),
        )
        connection.execute(  # BM25's totals, as the store keeps them (app/store/chunks.py)
            "UPDATE sessions SET lexical_chunks = lexical_chunks + loaded.chunks, "
            "lexical_terms = lexical_terms + loaded.terms FROM (SELECT count(*) AS chunks, "
            "coalesce(sum(length(array_to_tsvector(terms))), 0) AS terms FROM stage) AS loaded "
            "WHERE id = %s",
            (SESSION,),
        )
        connection.execute(
            "INSERT INTO chunk_units (session_id, chunk_id, ord, seq, said_at, text_start, "
            "text_end, embedding, embedding_model) "
            "SELECT %s, id, ord, 0, now(), 0, 1, embedding, %s FROM unit_stage",
            (SESSION, MODEL),
        )
        loaded = time.perf_counter() - began
        began = time.perf_counter()
        if not vector_index:  # a lexical-only measurement (scripts/measure_lexical.py)
            # What autovacuum does during the HNSW build otherwise: searched before any
            # vacuum, the freshly loaded table answered 8× slower (docs/BENCHMARKS.md).
            connection.execute("VACUUM (ANALYZE) chunks")
            return loaded, time.perf_counter() - began
        connection.execute("SET maintenance_work_mem = '1GB'")
        connection.execute(
            "CREATE INDEX ix_chunks_embedding_hnsw ON chunks USING hnsw "
            "(embedding vector_cosine_ops)"
        )
        connection.execute(
            "CREATE INDEX ix_chunk_units_embedding_hnsw ON chunk_units USING hnsw "
            "(embedding vector_ip_ops)"
        )
        connection.execute("ANALYZE chunks")
        connection.execute("ANALYZE chunk_units")
        return loaded, time.perf_counter() - began


async def _search(
    database: Database, rng: np.random.Generator, queries: int
) -> dict[str, list[float]]:
    """Times recall's search stage (`search_archive`, as a turn runs it) and, apart, each of
    its two queries."""
    timings: dict[str, list[float]] = {"vector": [], "lexical": [], "search": []}
    vectors = _vectors(rng, queries)
    settings = RecallSettings()
    for i in range(queries):
        terms = [f"term{t}" for t in rng.integers(0, VOCABULARY, size=TERMS_PER_QUERY)]
        qvec = vectors[i].tolist()
        query = QueryVectors(qvec, qvec)
        began = time.perf_counter()
        found = await search_archive(
            database, SESSION, model=MODEL, query=query, terms=terms, settings=settings
        )
        timings["search"].append((time.perf_counter() - began) * 1000)
        assert len(found.by_vector) == settings.candidates
        async with database.transaction() as db:
            began = time.perf_counter()
            await unit_candidates(
                db,
                SESSION,
                MODEL,
                qvec,
                qvec,
                settings.candidates * settings.units_per_candidate,
                vector_scan(settings),
            )
            middle = time.perf_counter()
            await lexical_candidates(
                db, SESSION, terms, settings.candidates, lexical_scan(settings)
            )
            timings["vector"].append((middle - began) * 1000)
            timings["lexical"].append((time.perf_counter() - middle) * 1000)
    return timings


@dataclass(frozen=True)
class LoadTimes:
    load_s: float
    index_build_s: float


def load_archive(
    url: str, size: int, seed: int, partitions: int | None = None, vector_index: bool = True
) -> LoadTimes:
    """Migrates the empty database at `url` (its distributed tables partitioned by hash of
    the session key when `partitions` is given) and loads `size` chunks into one session;
    the same seed loads the same chunks. Without `vector_index` the HNSW indexes are left
    unbuilt: only the lexical channel can be measured then."""
    upgrade_head(url)
    if partitions is not None:
        partition_by_session(url, partitions)
    _prepare(url)
    rng = np.random.default_rng(seed)
    return LoadTimes(*_load(url, 0, size, rng, vector_index=vector_index))


async def search_timings(url: str, queries: int, seed: int) -> dict[str, list[float]]:
    """`queries` searches of the loaded archive (after 20 to warm the cache and the pool),
    in ms: the search stage and each of its two queries."""
    return await _warm_and_time(url, np.random.default_rng(seed), queries)


async def _warm_and_time(
    url: str, rng: np.random.Generator, queries: int
) -> dict[str, list[float]]:
    database = Database.connect(url, pool_size=2)
    try:
        await _search(database, rng, min(20, queries))  # warm the cache and the pool
        return await _search(database, rng, queries)
    finally:
        await database.dispose()


async def measure(url: str, sizes: Sequence[int], queries: int, seed: int) -> dict[str, Any]:
    await asyncio.to_thread(upgrade_head, url)
    await asyncio.to_thread(_prepare, url)
    rng = np.random.default_rng(seed)
    results = []
    loaded = 0
    for size in sorted(sizes):
        load_s, index_s = await asyncio.to_thread(_load, url, loaded, size, rng)
        loaded = size
        timings = await _warm_and_time(url, rng, queries)
        results.append(
            {
                "chunks": size,
                "units": size * UNITS_PER_CHUNK,
                "load_s": round(load_s, 1),
                "index_build_s": round(index_s, 1),
                "search_ms": percentiles(timings["search"]),
                "vector_ms": percentiles(timings["vector"]),
                "lexical_ms": percentiles(timings["lexical"]),
            }
        )
    return {"sizes": results, "setup": setup()}


def setup() -> str:
    settings = RecallSettings()
    return (
        f"one session; random unit vectors ({EMBEDDING_DIMENSION} dims), "
        f"{UNITS_PER_CHUNK} units per chunk; {TERMS_PER_CHUNK} terms per chunk from "
        f"{VOCABULARY}; queries of {TERMS_PER_QUERY} terms; R = {settings.candidates}; "
        f"exact below {settings.exact_max_units} units, else hnsw.ef_search = "
        f"{settings.hnsw_ef_search}"
    )
