"""The schema Alembic builds: it matches the models and carries the pgvector pieces."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.store.migrate import check_models_match, upgrade_head


def test_migrations_and_models_agree(database_url: str) -> None:
    upgrade_head(database_url)  # a second upgrade is a no-op
    check_models_match(database_url)  # raises when autogenerate would change anything


async def test_vector_extension_and_indexes_exist(connection: AsyncConnection) -> None:
    version = await connection.scalar(
        text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    )
    assert version is not None
    indexes = dict(
        (
            await connection.execute(
                text("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'chunks'")
            )
        ).all()
    )
    assert "USING hnsw (embedding vector_cosine_ops)" in indexes["ix_chunks_embedding_hnsw"]
    assert "USING gin (lexical)" in indexes["ix_chunks_lexical_gin"]


async def test_every_table_but_tenants_carries_the_session_key(
    connection: AsyncConnection,
) -> None:
    rows = (
        await connection.execute(
            text(
                "SELECT table_name, array_agg(column_name::text) FROM information_schema.columns "
                "WHERE table_schema = 'public' AND table_name <> 'alembic_version' "
                "GROUP BY table_name"
            )
        )
    ).all()
    columns = dict(rows)
    assert set(columns) == {
        "tenants",
        "api_keys",
        "sessions",
        "messages",
        "chunks",
        "notes",
        "facts",
        "events",
        "idempotency",
        "forget_requests",
    }
    for table, names in columns.items():
        if table not in {"tenants", "api_keys", "sessions"}:  # reference tables and the key
            assert "session_id" in names, table
