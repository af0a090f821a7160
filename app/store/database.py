"""Engine, sessionmaker and the unit of work.

One transaction per write: services call `database.transaction()`, repositories only flush.
Connection failures surface as `DatabaseUnavailable` so the API answers 503, never 500; a
value the database refuses (bad data that slipped past the request validators) as
`UnstorableValue`, a 422. The engine hides statement parameters from its errors, so no
logged exception carries conversation text.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import exc, text
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from app.core.errors import DatabaseUnavailable, UnstorableValue
from app.store import statements
from app.store.engine import StoreEngine, detect_engine


def async_url(url: str) -> str:
    """SQLAlchemy URL with the psycopg 3 async driver."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def libpq_url(url: str) -> str:
    """The URL as psycopg (libpq) takes it, for code that connects without SQLAlchemy."""
    return async_url(url).replace("postgresql+psycopg://", "postgresql://", 1)


def _is_connection_failure(error: exc.DBAPIError) -> bool:
    return error.connection_invalidated or isinstance(
        error, exc.OperationalError | exc.InterfaceError
    )


class Database:
    """Owns the engine. Tests bind it to one connection inside an outer transaction
    (`Database.bound`) so each test rolls back whatever the code under test committed."""

    def __init__(
        self,
        engine: AsyncEngine,
        sessions: async_sessionmaker[AsyncSession],
        *,
        single_connection: bool = False,
    ) -> None:
        self.engine = engine
        self._sessions = sessions
        statements.install(engine.sync_engine)
        self.single_connection = single_connection  # no two transactions at once
        self._store_engine: StoreEngine | None = None

    @classmethod
    def connect(cls, url: str, *, pool_size: int = 10) -> Database:
        engine = create_async_engine(
            async_url(url), pool_size=pool_size, pool_pre_ping=True, hide_parameters=True
        )
        return cls(engine, async_sessionmaker(engine, expire_on_commit=False))

    @classmethod
    def bound(cls, connection: AsyncConnection) -> Database:
        sessions = async_sessionmaker(
            bind=connection, expire_on_commit=False, join_transaction_mode="create_savepoint"
        )
        return cls(connection.engine, sessions, single_connection=True)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """Commits when the block ends, rolls back when it raises."""
        try:
            async with self._sessions() as session, session.begin():
                yield session
        except exc.DataError as error:
            raise UnstorableValue("the database refused a value of the request") from error
        except exc.DBAPIError as error:
            if _is_connection_failure(error):
                raise DatabaseUnavailable(
                    "the database is unavailable; retry with the same Idempotency-Key"
                ) from error
            raise
        except UnicodeEncodeError as error:  # text with no UTF-8 form reached the driver
            raise UnstorableValue("the database refused a value of the request") from error

    async def ping(self) -> bool:
        try:
            async with self.transaction() as session:
                await session.execute(text("SELECT 1"))
        except DatabaseUnavailable:
            return False
        return True

    @property
    def detected_engine(self) -> StoreEngine | None:
        """The engine as `store_engine` read it; None before its first call."""
        return self._store_engine

    async def store_engine(self) -> StoreEngine:
        """The server's versions and lexical ranking, read on first use."""
        if self._store_engine is None:
            async with self.transaction() as session:
                self._store_engine = await detect_engine(session)
        return self._store_engine

    async def dispose(self) -> None:
        await self.engine.dispose()
