"""The database goes away mid-run and comes back: 503 with a clear body, then the client's
retry with the same Idempotency-Key completes with nothing lost or doubled. A Postgres of
its own is stopped and restarted inside the test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from app.main import create_app
from app.providers.fakes import CountingEmbedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.store.database import Database
from app.store.embedded import restart_embedded, start_embedded, stop_embedded
from app.store.migrate import upgrade_head
from tests.builders import turn_body, user
from tests.conftest import make_settings


@pytest.fixture
async def own_postgres(tmp_path: Path) -> AsyncIterator[tuple[Path, Database]]:
    data_dir = tmp_path / "db"
    url = await asyncio.to_thread(start_embedded, data_dir)
    await asyncio.to_thread(upgrade_head, url)
    database = Database.connect(url, pool_size=2)
    yield data_dir, database
    await database.dispose()  # pgserver stops this Postgres when the test process exits


async def test_a_turn_during_an_outage_is_a_503_and_its_retry_lands_once(
    own_postgres: tuple[Path, Database],
) -> None:
    data_dir, database = own_postgres
    ctx = ServiceContext(
        database=database,
        counter=default_counter(),
        embedder=CountingEmbedder(),
        settings=make_settings(),
    )
    transport = httpx.ASGITransport(app=create_app(context=ctx))
    async with httpx.AsyncClient(transport=transport, base_url="http://ebbtide.test") as client:
        first = await client.post(
            "/sessions/outage/turn",
            json=turn_body(user("first"), model="gpt-4o"),
            headers={"Idempotency-Key": "t1"},
        )
        assert first.status_code == 200

        await asyncio.to_thread(stop_embedded, data_dir)
        second = turn_body(user("second, sent during the outage"))
        down = await client.post(
            "/sessions/outage/turn", json=second, headers={"Idempotency-Key": "t2"}
        )
        assert down.status_code == 503
        assert down.json()["error"]["code"] == "database_unavailable"
        assert (await client.get("/readyz")).status_code == 503

        await asyncio.to_thread(restart_embedded, data_dir)
        retried = await client.post(
            "/sessions/outage/turn", json=second, headers={"Idempotency-Key": "t2"}
        )
        again = await client.post(
            "/sessions/outage/turn", json=second, headers={"Idempotency-Key": "t2"}
        )
    assert retried.status_code == 200 and retried.json()["turn"] == 2
    assert again.json() == retried.json()
    async with database.transaction() as db:
        contents = (
            await db.execute(
                text(
                    "SELECT posted::json ->> 'content' FROM messages "
                    "WHERE session_id = 'local/outage' ORDER BY seq"
                )
            )
        ).all()
    assert [c for (c,) in contents] == ["first", "second, sent during the outage"]
