"""The schema Alembic builds: it matches the models and carries the pgvector pieces."""

from __future__ import annotations

from typing import Any

import psycopg
from alembic import command
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.store.distribution import REFERENCE_TABLES
from app.store.migrate import alembic_config, check_models_match, upgrade_head
from app.store.models import Base
from tests.api.live import fresh_named_database
from tests.integration.citus_rules import citus_rule_breaks
from tests.integration.routing import DISTRIBUTION_COLUMN


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
        "inspector_logins",
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
        if table not in {*REFERENCE_TABLES, "sessions"}:  # reference tables and the key
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


def test_the_lexical_totals_migration_counts_the_chunks_already_written(database_url: str) -> None:
    """BM25's session totals start from the archive as it is: live chunks and their distinct
    terms, a superseded chunk left out."""
    with fresh_named_database(database_url, "ebbtide_lexical_totals") as url:
        command.upgrade(alembic_config(url), "0012")
        with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as db:
            db.execute("INSERT INTO tenants (id, name) VALUES ('acme', 'acme')")
            for key in ("acme/s1", "acme/s2"):
                db.execute(
                    "INSERT INTO sessions (id, tenant_id, version, turn_count, next_seq, "
                    "c0_tokens, policy, calibration_ratio) "
                    "VALUES (%s, 'acme', 1, 1, 2, 0, '{}', 1)",
                    (key,),
                )
            for chunk_id, terms, superseded in (
                ("c1", "{alpha,beta,gamma}", None),
                ("c2", "{beta,delta}", None),
                ("c3", "{old,branch,words,here}", 5),
            ):
                db.execute(
                    "INSERT INTO chunks (session_id, id, kind, turn_start, turn_end, seq_start, "
                    "seq_end, roles, first_ts, last_ts, raw_text, tokens, summary_hint, "
                    "needs_embedding, lexical, content_hash, superseded_turn) VALUES "
                    "('acme/s1', %s, 'offload', 1, 1, 1, 1, '{user}', now(), now(), 'x', 1, 'x', "
                    "false, array_to_tsvector(%s::text[]), %s, %s)",
                    (chunk_id, terms, chunk_id, superseded),
                )
            command.upgrade(alembic_config(url), "head")
            totals = db.execute(
                "SELECT id, lexical_chunks, lexical_terms FROM sessions ORDER BY id"
            ).fetchall()
            assert totals == [("acme/s1", 2, 5), ("acme/s2", 0, 0)]


def keyed(db: psycopg.Connection[Any]) -> set[tuple[str, str]]:
    rows = db.execute(
        "SELECT 'sessions', id FROM sessions UNION SELECT 'messages', session_id FROM messages "
        "UNION SELECT 'events', session_id FROM events"
    ).fetchall()
    return {(table, key) for table, key in rows}


async def test_the_schema_keeps_citus_rules(connection: AsyncConnection) -> None:
    """Every table distributed by its session key or a reference table, every unique index
    and foreign key carrying the key: what `create_distributed_table` demands."""
    assert await citus_rule_breaks(connection, DISTRIBUTION_COLUMN, REFERENCE_TABLES) == []
    assert set(DISTRIBUTION_COLUMN) | set(REFERENCE_TABLES) == set(Base.metadata.tables)


async def test_the_citus_check_names_each_rule_a_table_breaks(connection: AsyncConnection) -> None:
    """The check can fail: a per-session table written carelessly breaks every rule once."""
    for statement in (
        "CREATE TABLE widgets (session_id varchar(200) NOT NULL, id integer "
        "GENERATED BY DEFAULT AS IDENTITY, chunk_id varchar(40), code text UNIQUE, "
        "PRIMARY KEY (session_id, id))",
        "ALTER TABLE widgets ADD CONSTRAINT fk_widget_chunk FOREIGN KEY (session_id, chunk_id) "
        "REFERENCES chunks (id, session_id) ON DELETE CASCADE",
        "ALTER TABLE api_keys ADD COLUMN session_id varchar(200) REFERENCES sessions (id)",
        "CREATE TABLE gadgets (id text PRIMARY KEY, session_id text)",
        "CREATE TABLE strays (id int)",
    ):
        await connection.execute(text(statement))
    distributed = {**DISTRIBUTION_COLUMN, "widgets": "session_id", "gadgets": "session_id"}
    breaks = await citus_rule_breaks(connection, distributed, REFERENCE_TABLES)
    assert sorted(breaks) == sorted(
        [
            "strays: neither distributed nor a reference table",
            "distribution columns of different types: "
            + repr(
                sorted(
                    {
                        t: ("text" if t == "gadgets" else "character varying(200)")
                        for t in distributed
                    }.items()
                )
            ),
            "widgets: unique index widgets_code_key ['code'] lacks session_id",
            "gadgets: unique index gadgets_pkey ['id'] lacks session_id",
            "widgets: foreign key fk_widget_chunk does not pair ('session_id', 'session_id')",
            "api_keys: foreign key api_keys_session_id_fkey "
            "from a reference to a distributed table",
            "widgets.id: a integer sequence (Citus needs bigint)",
        ]
    )
