"""The lexical channel ranks by the rarity of the terms a chunk holds (docs/DESIGN.md §4):
with a common word and a rare one in the question, the rare word's chunk is never pushed out
of the top R by the many chunks that only share the common one."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.chunker import remember_draft
from app.core.types import EmbeddedChunk
from app.store import chunks as chunk_store
from app.store import sessions as session_store
from app.store.database import Database
from app.store.embedded import shared_buffers_mb
from app.store.recall import lexical_candidates

KEY = "local/lexical"


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
        found = await lexical_candidates(db, KEY, ["weather", "hartwell"], 5, 2000)
        assert found[0].raw_text == texts[-1]
        assert len(found) == 5
        unsaid = await lexical_candidates(db, KEY, ["booking"], 5, 2000)  # no chunk says "booking"
        assert unsaid == []
        stemmed = await lexical_candidates(db, KEY, ["booking", "book"], 5, 2000)
        assert [c.raw_text for c in stemmed] == [texts[-1]]  # "booked" → "book"


async def test_only_the_newest_matching_chunks_are_ranked_past_the_row_cap(
    database: Database,
) -> None:
    async with database.transaction() as db:
        await _store(db, [f"weather report {i}" for i in range(30)])
        found = await lexical_candidates(db, KEY, ["weather"], 30, 8)
    assert sorted(c.turn_start for c in found) == list(range(22, 30))


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
