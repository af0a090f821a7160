"""Test infrastructure: one real embedded Postgres + pgvector for the run, one database per
pytest-xdist worker migrated by Alembic, and each test inside a transaction rolled back at
its end (the code under test commits to a savepoint)."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import fasteners
import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from app.main import create_app
from app.providers.fakes import CountingEmbedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.settings import Settings, get_settings
from app.store import statements
from app.store.database import Database, async_url
from app.store.embedded import (
    bundled_major,
    data_major,
    drop_database,
    fresh_database,
    pgdata_of,
    start_embedded,
    url_of_database,
)
from app.store.migrate import upgrade_head
from tests.builders import HASH_RECALL

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def _start_server(data_dir: Path) -> str:
    """The run's embedded server, started by the first worker and joined by the others; its
    admin URL. Under a lock: xdist's workers all come here at once, and on a new machine each
    would otherwise create the server's system user (the second `useradd` fails). The tests'
    data folder is disposable: one written by an older engine is started anew."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with fasteners.InterProcessLock(data_dir / ".start.lock"):
        pgdata = pgdata_of(data_dir)
        written = data_major(pgdata)
        if written is not None and written != bundled_major():
            shutil.rmtree(pgdata)
        return start_embedded(data_dir, database="postgres")


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    """A freshly migrated database for this worker."""
    data_dir = Path(os.environ.get("EBBTIDE_TEST_DATA_DIR", PROJECT_ROOT / ".ebbtide-test"))
    admin_url = _start_server(data_dir)
    name = f"ebbtide_test_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
    url = fresh_database(admin_url, name)
    upgrade_head(url)
    yield url
    drop_database(admin_url, name)


@pytest.fixture(scope="session")
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(async_url(database_url))
    statements.install(engine.sync_engine)  # before any connection: they copy its listeners
    yield engine
    await engine.dispose()


@pytest.fixture
async def connection(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """The test's connection, inside a transaction that is rolled back at the end."""
    async with engine.connect() as connection:
        transaction = await connection.begin()
        yield connection
        await transaction.rollback()


@pytest.fixture
def database(connection: AsyncConnection) -> Database:
    return Database.bound(connection)


def make_settings(**overrides: object) -> Settings:
    """Settings for tests: the database URL is unused (the context is bound) and the recall
    thresholds suit the hash embedder the tests use unless they say otherwise. Offloads embed
    inline: a context bound to one connection cannot host the background worker, so the turn
    after an offload would search by words only. The queued default has its own tests
    (tests/integration/test_embedding_queue.py), and live servers and the eval run it."""
    recall = {**HASH_RECALL, **overrides.pop("recall", {})}  # type: ignore[dict-item]
    embedder = {"offload_embedding": "inline", **overrides.pop("embedder", {})}  # type: ignore[dict-item]
    return Settings(
        database_url="postgresql://bound-in-tests",
        recall=recall,
        embedder=embedder,
        **overrides,  # type: ignore[arg-type]
    )


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def ctx(database: Database, embedder: CountingEmbedder) -> ServiceContext:
    return ServiceContext(
        database=database,
        counter=default_counter(),
        embedder=embedder,
        settings=make_settings(),
    )


@pytest.fixture
async def client(ctx: ServiceContext) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(context=ctx)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://ebbtide.test") as client:
        yield client


@pytest.fixture
def cli_database(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An empty database of its own for CLI commands (they commit), dropped afterwards."""
    name = f"ebbtide_cli_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
    admin = url_of_database(database_url, "postgres")
    url = fresh_database(admin, name)
    monkeypatch.setenv("DATABASE_URL", url)
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()
    drop_database(admin, name)
