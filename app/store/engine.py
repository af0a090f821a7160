"""What the database engine runs the search with: the Postgres and pgvector versions and the
lexical ranking (the tsvector statement of app/store/recall.py on every engine: the bundled
pg_textsearch 1.0 is loaded but unused, docs/DESIGN.md §13). Read once per process, at start,
and reported by `/readyz` and the startup banner."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

TSVECTOR = "tsvector"

_VECTOR_VERSION = text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")


@dataclass(frozen=True)
class StoreEngine:
    postgres: str  # "18.6"
    vector: str | None  # pgvector's version, None without it
    lexical: str  # the lexical ranking: "tsvector"


async def detect_engine(db: AsyncSession) -> StoreEngine:
    version = str(await db.scalar(text("SHOW server_version")))
    vector = await db.scalar(_VECTOR_VERSION)
    return StoreEngine(
        postgres=version.split()[0],  # "16.4 (Debian 16.4-1)": the number only
        vector=None if vector is None else str(vector),
        lexical=TSVECTOR,
    )
