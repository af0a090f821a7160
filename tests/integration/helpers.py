"""Reading a session's rows back, straight from the tables, for invariant checks."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.store.models import Base

# The session's own rows: the sessions table and every table keyed by session_id.
TABLES = tuple(
    table.name
    for table in Base.metadata.sorted_tables
    if table.name == "sessions" or "session_id" in table.columns
)
KEY = {"sessions": "id"}


async def session_rows(connection: AsyncConnection, session_id: str) -> dict[str, list[Any]]:
    """Every row of every table that belongs to the session, in a stable order."""
    rows: dict[str, list[Any]] = {}
    for table in TABLES:
        key = KEY.get(table, "session_id")
        result = await connection.execute(
            text(f"SELECT * FROM {table} WHERE {key} = :sid ORDER BY 1, 2"), {"sid": session_id}
        )
        rows[table] = [tuple(row) for row in result.all()]
    return rows


async def message_texts(connection: AsyncConnection, session_id: str) -> list[tuple[Any, ...]]:
    result = await connection.execute(
        text(
            "SELECT seq, state, content, chunk_id, stub_chunk_id FROM messages "
            "WHERE session_id = :sid ORDER BY seq"
        ),
        {"sid": session_id},
    )
    return [tuple(row) for row in result.all()]


async def chunk_texts(connection: AsyncConnection, session_id: str) -> dict[str, str]:
    result = await connection.execute(
        text("SELECT id, raw_text FROM chunks WHERE session_id = :sid"), {"sid": session_id}
    )
    return {row[0]: row[1] for row in result.all()}
