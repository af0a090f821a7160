"""Alembic environment: async psycopg engine; the URL comes from the caller
(`app.store.migrate`) or, for the plain `alembic` command, from the settings (starting the
embedded Postgres when no DATABASE_URL is set)."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import pool
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from app.store.database import async_url
from app.store.models import Base

config = context.config
target_metadata = Base.metadata


def _database_url() -> str:
    url = config.attributes.get("database_url")
    if url:
        return str(url)
    from app.settings import get_settings
    from app.store.embedded import start_embedded

    settings = get_settings()
    return settings.database_url or start_embedded(settings.data_dir)


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = create_async_engine(async_url(_database_url()), poolclass=pool.NullPool)
    async with engine.connect() as connection:
        await connection.run_sync(_run)
    await engine.dispose()


if context.is_offline_mode():
    context.configure(url=async_url(_database_url()), target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_async())
