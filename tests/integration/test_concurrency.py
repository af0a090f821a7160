"""Concurrent turns on real connections that commit (not the rolled-back test transaction):
turns of one session are serialised, other sessions are not held up."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text

from app.core.types import session_key
from app.providers.fakes import CountingEmbedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.services.turns import run_turn
from app.store.database import Database
from app.store.models import DEFAULT_TENANT
from tests.builders import user, words
from tests.conftest import make_settings
from tests.integration.test_turn_invariants import turn_input

PARALLEL = 20


@pytest.fixture
async def shared_database(database_url: str) -> AsyncIterator[Database]:
    """A pooled database whose writes commit; the test's sessions are deleted afterwards."""
    database = Database.connect(database_url, pool_size=8)
    yield database
    async with database.transaction() as db:
        await db.execute(text("DELETE FROM sessions WHERE id LIKE 'local/conc-%'"))
    await database.dispose()


def replica(database: Database) -> ServiceContext:
    """One app replica: its own in-process locks, the shared database."""
    return ServiceContext(
        database=database,
        counter=default_counter(),
        embedder=CountingEmbedder(),
        settings=make_settings(),
    )


async def test_parallel_turns_of_one_session_on_two_replicas_all_land_in_order(
    shared_database: Database,
) -> None:
    session = f"conc-{uuid.uuid4().hex[:8]}"
    replicas = [replica(shared_database), replica(shared_database)]
    await run_turn(replicas[0], turn_input(session, [user("start")], context_window=4000))
    posts = [
        run_turn(replicas[i % 2], turn_input(session, [user(f"post {i} " + words(120))]))
        for i in range(PARALLEL)
    ]
    responses = await asyncio.gather(*posts)
    assert sorted(r.turn for r in responses) == list(range(2, PARALLEL + 2))
    async with shared_database.transaction() as db:
        seqs = (
            (
                await db.execute(
                    text("SELECT seq FROM messages WHERE session_id = :s ORDER BY seq"),
                    {"s": session_key(DEFAULT_TENANT, session)},
                )
            )
            .scalars()
            .all()
        )
        events = (
            await db.execute(
                text(
                    "SELECT turn, (payload->>'trigger_ratio')::float, "
                    "(payload->'offload'->>'triggered')::bool FROM events WHERE session_id = :s"
                ),
                {"s": session_key(DEFAULT_TENANT, session)},
            )
        ).all()
    assert list(seqs) == list(range(1, PARALLEL + 2))  # every message, no gap, no double
    assert sorted(turn for turn, _, _ in events) == list(range(1, PARALLEL + 2))
    offloads = [(turn, ratio) for turn, ratio, triggered in events if triggered]
    assert offloads and all(ratio >= 0.8 for _, ratio in offloads)  # only past the watermark


async def test_a_busy_session_does_not_hold_up_another(shared_database: Database) -> None:
    ctx = replica(shared_database)
    busy, free = f"conc-{uuid.uuid4().hex[:8]}", f"conc-{uuid.uuid4().hex[:8]}"
    await run_turn(ctx, turn_input(busy, [user("hello")], model="gpt-4o"))
    busy_key = session_key(DEFAULT_TENANT, busy)
    async with ctx.locks.for_session(busy_key), shared_database.transaction() as db:
        # the busy session is locked in this process and its row is locked in Postgres
        await db.execute(text("SELECT 1 FROM sessions WHERE id = :s FOR UPDATE"), {"s": busy_key})
        done = await asyncio.wait_for(
            run_turn(ctx, turn_input(free, [user("hi")], model="gpt-4o")), timeout=30
        )
    assert done.turn == 1
