"""Reading a session's rows back, straight from the tables, for invariant checks (by the
development tenant's id unless a tenant is named)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.formats import read_posted
from app.core.messages import Format
from app.core.types import session_key
from app.store.models import DEFAULT_TENANT, Base

# The session's own rows: the sessions table and every table keyed by session_id.
TABLES = tuple(
    table.name
    for table in Base.metadata.sorted_tables
    if table.name == "sessions" or "session_id" in table.columns
)
KEY = {"sessions": "id"}


async def session_rows(
    connection: AsyncConnection, session_id: str, tenant_id: str = DEFAULT_TENANT
) -> dict[str, list[Any]]:
    """Every row of every table that belongs to the tenant's session, in a stable order."""
    rows: dict[str, list[Any]] = {}
    for table in TABLES:
        column = KEY.get(table, "session_id")
        result = await connection.execute(
            text(f"SELECT * FROM {table} WHERE {column} = :key ORDER BY 1, 2"),
            {"key": session_key(tenant_id, session_id)},
        )
        rows[table] = [tuple(row) for row in result.all()]
    return rows


async def message_texts(connection: AsyncConnection, session_id: str) -> list[tuple[Any, ...]]:
    """(seq, state, the stored message's words or None, chunk_id, stub_chunk_id) per row."""
    result = await connection.execute(
        text(
            "SELECT seq, state, format, posted, chunk_id, stub_chunk_id FROM messages "
            "WHERE session_id = :sid ORDER BY seq"
        ),
        {"sid": session_key(DEFAULT_TENANT, session_id)},
    )
    return [
        (seq, state, _stored_text(fmt, posted), chunk_id, stub)
        for seq, state, fmt, posted, chunk_id, stub in result.all()
    ]


def _stored_text(fmt: str | None, posted: str | None) -> str | None:
    if posted is None:
        return None
    return read_posted(Format(fmt or "openai"), json.loads(posted)).text


async def chunk_texts(connection: AsyncConnection, session_id: str) -> dict[str, str]:
    result = await connection.execute(
        text("SELECT id, raw_text FROM chunks WHERE session_id = :sid"),
        {"sid": session_key(DEFAULT_TENANT, session_id)},
    )
    return {row[0]: row[1] for row in result.all()}
