"""The schema Alembic builds: it matches the models and carries the pgvector pieces."""

from __future__ import annotations

from typing import Any

import psycopg
from alembic import command
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.store.migrate import alembic_config, check_models_match, upgrade_head
from tests.api.live import fresh_named_database


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
                text(
                    "SELECT indexname, indexdef FROM pg_indexes "
                    "WHERE tablename IN ('chunks', 'chunk_units')"
                )
            )
        ).all()
    )
    assert "USING hnsw (embedding vector_cosine_ops)" in indexes["ix_chunks_embedding_hnsw"]
    assert "USING gin (lexical)" in indexes["ix_chunks_lexical_gin"]
    assert "USING hnsw (embedding vector_ip_ops)" in indexes["ix_chunk_units_embedding_hnsw"]


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
        "chunk_units",
        "blobs",
        "notes",
        "facts",
        "events",
        "idempotency",
        "forget_requests",
    }
    for table, names in columns.items():
        if table not in {"tenants", "api_keys", "sessions"}:  # reference tables and the key
            assert "session_id" in names, table


def test_tenant_keys_migration_keeps_existing_sessions_and_their_rows(database_url: str) -> None:
    """A session written before sessions were keyed by tenant keeps every row under
    `tenant/id`; the downgrade takes the tenant back off."""
    with fresh_named_database(database_url, "ebbtide_keys") as url:
        command.upgrade(alembic_config(url), "0004")
        with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as db:
            db.execute("INSERT INTO tenants (id, name) VALUES ('acme', 'acme')")
            db.execute(
                "INSERT INTO sessions (id, tenant_id, version, turn_count, next_seq, c0_tokens, "
                "policy, calibration_ratio) VALUES ('s1', 'acme', 1, 1, 2, 0, '{}', 1)"
            )
            db.execute(
                "INSERT INTO messages (session_id, seq, turn, role, content, tokens, state) "
                "VALUES ('s1', 1, 1, 'user', 'hello', 3, 'window')"
            )
            db.execute(
                "INSERT INTO events (session_id, turn, kind, payload) VALUES "
                "('s1', 1, 'turn', '{}')"
            )
            command.upgrade(alembic_config(url), "head")
            assert keyed(db) == {
                ("sessions", "acme/s1"),
                ("messages", "acme/s1"),
                ("events", "acme/s1"),
            }
            content = db.execute("SELECT content FROM messages").fetchone()
            assert content == ("hello",)
            command.downgrade(alembic_config(url), "0004")
            assert keyed(db) == {("sessions", "s1"), ("messages", "s1"), ("events", "s1")}


def keyed(db: psycopg.Connection[Any]) -> set[tuple[str, str]]:
    rows = db.execute(
        "SELECT 'sessions', id FROM sessions UNION SELECT 'messages', session_id FROM messages "
        "UNION SELECT 'events', session_id FROM events"
    ).fetchall()
    return {(table, key) for table, key in rows}
