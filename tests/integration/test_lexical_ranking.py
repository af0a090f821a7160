"""The lexical channel ranks by BM25 (docs/DESIGN.md §4): with a common word and a rare one in
the question, the rare word's chunk is never pushed out of the top R by the many chunks that
only share the common one; of two chunks holding the same terms the shorter ranks first; the
session's totals that BM25 reads follow every write, archive and delete of its chunks."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.chunker import remember_draft
from app.core.types import EmbeddedChunk
from app.store import chunks as chunk_store
from app.store import sessions as session_store
from app.store.database import Database
from app.store.embedded import shared_buffers_mb
from app.store.models import SessionRow
from app.store.recall import LexicalScan, lexical_candidates
from app.store.transcript import archive_chunks

KEY = "local/lexical"
SCAN = LexicalScan(max_rows=2000, k1=1.2, b=0.75)


async def _store(db: AsyncSession, texts: list[str]) -> None:
    """One chunk per text, the i-th said in turn i."""
    now = datetime(2026, 3, 1, tzinfo=UTC)
    await session_store.create_session(db, KEY, "local")
    drafts = [
        EmbeddedChunk(remember_draft(f"ck_{i:03d}", text, 10, i, now, "user"), None)
        for i, text in enumerate(texts)
    ]
    await chunk_store.insert_chunks(db, KEY, drafts, "none", archived_turn=1)


async def test_the_rare_terms_holder_ranks_first(database: Database) -> None:
    texts = [f"the weather was weather again, weather day {i}" for i in range(40)]
    texts.append("we booked the Hartwell venue")  # the one chunk with the rare term
    async with database.transaction() as db:
        await _store(db, texts)
        found = await lexical_candidates(db, KEY, ["weather", "hartwell"], 5, SCAN)
        assert found[0].raw_text == texts[-1]
        assert len(found) == 5
        unsaid = await lexical_candidates(db, KEY, ["booking"], 5, SCAN)  # no chunk says "booking"
        assert unsaid == []
        stemmed = await lexical_candidates(db, KEY, ["booking", "book"], 5, SCAN)
        assert [c.raw_text for c in stemmed] == [texts[-1]]  # "booked" → "book"


async def test_only_the_newest_matching_chunks_are_ranked_past_the_row_cap(
    database: Database,
) -> None:
    async with database.transaction() as db:
        await _store(db, [f"weather report {i}" for i in range(30)])
        found = await lexical_candidates(db, KEY, ["weather"], 30, replace(SCAN, max_rows=8))
    assert sorted(c.turn_start for c in found) == list(range(22, 30))


async def test_of_two_chunks_holding_the_terms_the_shorter_ranks_first(database: Database) -> None:
    short = "the Hartwell venue deposit is paid"
    long = "the Hartwell venue " + " ".join(f"filler{i}" for i in range(60)) + " deposit"
    async with database.transaction() as db:
        await _store(db, [short, long])  # the long one is newer: recency alone would pick it
        found = await lexical_candidates(db, KEY, ["hartwell", "deposit"], 5, SCAN)
        assert [c.raw_text for c in found] == [short, long]
        unweighed = await lexical_candidates(db, KEY, ["hartwell"], 5, replace(SCAN, b=0.0))
        assert [c.raw_text for c in unweighed] == [long, short]  # b = 0: a tie, newest first


async def _totals(db: AsyncSession) -> tuple[int, int]:
    row = await db.get(SessionRow, KEY, populate_existing=True)
    assert row is not None
    return row.lexical_chunks, row.lexical_terms


async def _distinct_terms(db: AsyncSession) -> int:
    found = await db.scalar(
        text("SELECT sum(length(lexical)) FROM chunks WHERE session_id = :key").bindparams(key=KEY)
    )
    return int(found or 0)


async def test_the_sessions_totals_follow_writes_archives_and_deletes(database: Database) -> None:
    async with database.transaction() as db:
        await _store(db, ["alpha beta gamma", "beta gamma", "gamma delta epsilon zeta"])
        assert await _totals(db) == (3, await _distinct_terms(db)) == (3, 9)
        await chunk_store.delete_chunks(db, KEY, ["ck_000"])  # forget
        assert await _totals(db) == (2, 6)
        await _store_more(db, "beta beta omega", turn=7)
        assert await _totals(db) == (3, 8)
        await archive_chunks(db, KEY, ["ck_001", "ck_002", "ck_more_7"], turn=9)  # superseded
        assert await _totals(db) == (0, 0)
        await chunk_store.delete_chunks(db, KEY, ["ck_001"])  # already out of the index
        assert await _totals(db) == (0, 0)


async def _store_more(db: AsyncSession, text_: str, turn: int) -> None:
    now = datetime(2026, 3, 2, tzinfo=UTC)
    draft = remember_draft(f"ck_more_{turn}", text_, 10, turn, now, "user")
    await chunk_store.insert_chunks(db, KEY, [EmbeddedChunk(draft, None)], "none", turn)


async def test_the_engine_is_postgres_18_sized_to_the_machine(database: Database) -> None:
    engine = await database.store_engine()
    assert engine.postgres.startswith("18.") and engine.vector is not None
    assert tuple(int(x) for x in engine.vector.split(".")[:2]) >= (0, 8)  # iterative scans
    assert engine.lexical == "tsvector"
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    async with database.transaction() as db:  # app/store/embedded.py writes the size
        pages = await db.scalar(
            text("SELECT setting FROM pg_settings WHERE name = 'shared_buffers'")
        )
    assert int(pages) * 8 // 1024 == shared_buffers_mb(memory)  # in 8 kB pages
    async with database.transaction() as db:
        rows = await db.execute(
            text("SELECT name, setting FROM pg_settings WHERE name LIKE 'wal_%'")
        )
        wal = {name: setting for name, setting in rows}
    assert (wal["wal_writer_delay"], wal["wal_init_zero"]) == ("10", "off")  # ms
