"""A database that does not answer: 503 with a clear body, never a 500."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from app.main import create_app
from app.providers.fakes import CountingEmbedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.store.database import Database
from tests.builders import turn_body, user
from tests.conftest import make_settings


@pytest.fixture
async def offline_client(tmp_path: object) -> AsyncIterator[httpx.AsyncClient]:
    # A real connection attempt to a socket folder where no server listens.
    database = Database.connect(f"postgresql://postgres@/ebbtide?host={tmp_path}")
    ctx = ServiceContext(
        database=database,
        counter=default_counter(),
        embedder=CountingEmbedder(),
        settings=make_settings(),
    )
    transport = httpx.ASGITransport(app=create_app(context=ctx))
    async with httpx.AsyncClient(transport=transport, base_url="http://ebbtide.test") as client:
        yield client
    await database.dispose()


async def test_turn_answers_503_when_the_database_is_unreachable(
    offline_client: httpx.AsyncClient,
) -> None:
    response = await offline_client.post(
        "/sessions/s/turn",
        json=turn_body(user("hi"), model="gpt-4o"),
        headers={"Idempotency-Key": "k"},
    )
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "1"
    error = response.json()["error"]
    assert error["code"] == "database_unavailable" and "Idempotency-Key" in error["message"]


async def test_readiness_fails_while_health_stays_up(offline_client: httpx.AsyncClient) -> None:
    assert (await offline_client.get("/healthz")).status_code == 200
    ready = await offline_client.get("/readyz")
    assert ready.status_code == 503 and ready.json()["error"]["code"] == "database_unavailable"
