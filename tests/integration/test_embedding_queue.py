"""The embedding queue (docs/DESIGN.md §3): offloads write chunks without vectors and answer;
a worker claims them with `FOR UPDATE SKIP LOCKED`, embeds them and writes the vectors; a
claim expires, a failed embedder gives claims back, and nothing is ever lost."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.plan import TurnInput
from app.providers.embedders import HashEmbedder
from app.providers.fakes import CountingEmbedder, DownEmbedder
from app.providers.tokenizer import default_counter
from app.services.context import ServiceContext
from app.services.embedding_queue import drain, embed_batch, run_worker
from app.services.recall import recall_query
from app.services.turns import run_turn
from app.store import embedding_queue as queue_store
from app.store import statements
from app.store.database import Database
from app.store.migrate import upgrade_head
from app.store.models import DEFAULT_TENANT
from tests.builders import user, words
from tests.conftest import make_settings
from tests.integration.test_recall import FACTS, WINDOW, archive_facts, ask, recalled_block
from tests.integration.test_turn_invariants import turn_input

QUESTION = "What was the budget we agreed on for cloud servers?"


def queued(ctx: ServiceContext, inline_embed_chunks: int = 0, **embedder: object) -> ServiceContext:
    """Offloads queue their chunks; a recall embeds `inline_embed_chunks` of its session's
    itself (0: none, so that what the queue alone does is seen)."""
    ctx.settings = make_settings(
        embedder={"offload_embedding": "queued", **embedder},
        recall={"inline_embed_chunks": inline_embed_chunks, "inline_embed_timeout_s": 5.0},
    )
    return ctx


async def archived_in_queue(ctx: ServiceContext, connection: AsyncConnection, session: str) -> int:
    """Plants the facts in a queued session until they are offloaded; the chunks waiting."""
    queued(ctx)
    await archive_facts(ctx, session)
    return await pending(connection, session)


async def pending(connection: AsyncConnection, session: str) -> int:
    found = await connection.scalar(
        text("SELECT count(*) FROM chunks WHERE session_id = :s AND needs_embedding"),
        {"s": f"{DEFAULT_TENANT}/{session}"},
    )
    return int(found or 0)


async def test_an_offload_answers_without_the_embedder_and_the_worker_embeds_after(
    ctx: ServiceContext, embedder: CountingEmbedder, connection: AsyncConnection
) -> None:
    queued(ctx)
    await archive_facts(ctx, "q1")
    assert embedder.passage_calls == 0, "no offload waited for the embedder"
    waiting = await pending(connection, "q1")
    assert waiting > 0
    units = await connection.scalar(
        text("SELECT count(*) FROM chunk_units WHERE session_id = 'local/q1' AND embedding IS NULL")
    )
    assert units and units >= waiting

    before = await ask(ctx, "q1", QUESTION)
    assert before.recall.pending_chunks == waiting  # said, and counted
    assert FACTS[0] in recalled_block(before)  # found by its words meanwhile
    assert before.recall.hits and all(h.vector_score is None for h in before.recall.hits)

    report = await drain(ctx)
    assert report.embedded == waiting and report.stopped_by is None
    assert embedder.passage_calls >= 1
    assert await pending(connection, "q1") == 0
    after = await recall_query(ctx, DEFAULT_TENANT, "q1", QUESTION, 3)
    assert after.pending_chunks == 0
    assert any(r.vector_score is not None for r in after.results)
    assert any(FACTS[0] in r.text for r in after.results)


async def test_a_claim_holds_until_it_expires_and_a_stale_claim_writes_nothing(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    waiting = await archived_in_queue(ctx, connection, "q2")
    now, lease = ctx.clock(), timedelta(seconds=60)
    async with ctx.database.transaction() as db:
        first = await queue_store.claim(db, 100, now, lease)
    assert len(first) == waiting
    async with ctx.database.transaction() as db:
        assert await queue_store.claim(db, 100, now + timedelta(seconds=30), lease) == []
    later = now + timedelta(seconds=61)
    async with ctx.database.transaction() as db:
        second = await queue_store.claim(db, 100, later, lease)
    assert {c.id for c in second} == {c.id for c in first}  # the first worker died: expired
    session, ids = first[0].session_id, [c.id for c in first]
    async with ctx.database.transaction() as db:
        stale = await queue_store.still_ours(db, session, ids, now + lease, later)
        assert stale == set()  # the old claim holds nothing: another worker took them over
        with statements.counting() as sent:
            mine = await queue_store.still_ours(db, session, ids, later + lease, later)
            assert mine == set(ids)
        assert len(ids) > 1 and sent.statements == 1  # the whole batch, one statement


async def test_a_chunk_forgotten_while_claimed_is_skipped_not_written(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    queued(ctx)
    await archive_facts(ctx, "q3")
    ctx.settings = make_settings(
        embedder={"offload_embedding": "queued", "worker_batch_chunks": 1000}
    )
    victim = await connection.scalar(
        text("SELECT id FROM chunks WHERE session_id = 'local/q3' ORDER BY created_at LIMIT 1")
    )
    embed = ctx.embedder.embed_passages

    async def forget_meanwhile(texts: list[str]) -> list[list[float]]:
        await connection.execute(
            text("DELETE FROM chunks WHERE session_id = 'local/q3' AND id = :id"), {"id": victim}
        )
        return await embed(texts)

    ctx.embedder.embed_passages = forget_meanwhile  # type: ignore[method-assign]
    report = await embed_batch(ctx)
    assert report is not None and report.lost_claims == 1
    assert report.embedded == report.claimed - 1
    assert await pending(connection, "q3") == 0


async def test_a_failing_embedder_gives_the_claims_back_and_loses_nothing(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    waiting = await archived_in_queue(ctx, connection, "q4")
    ctx.embedder = DownEmbedder()
    report = await embed_batch(ctx)
    assert report is not None and report.failure == "embedder_unavailable"
    claimed = await connection.scalar(
        text(
            "SELECT count(*) FROM chunks WHERE session_id = 'local/q4' "
            "AND embedding_claimed_until IS NOT NULL"
        )
    )
    assert claimed == 0 and await pending(connection, "q4") == waiting
    assert (await drain(ctx)).stopped_by == "embedder_unavailable"


async def test_an_inline_offload_embeds_before_it_answers(
    ctx: ServiceContext, embedder: CountingEmbedder, connection: AsyncConnection
) -> None:
    ctx.settings = make_settings(embedder={"offload_embedding": "inline"})
    await archive_facts(ctx, "q5")
    assert embedder.passage_calls > 0 and await pending(connection, "q5") == 0
    # What the notes do not say (they keep the budget itself, which is not injected again).
    response = await ask(ctx, "q5", "Who from finance signs off above the cloud server budget?")
    assert response.recall.pending_chunks == 0
    assert any(h.vector_score is not None for h in response.recall.hits)


# --- workers on a database of their own (they commit, and more than one connection) --------


@pytest.fixture
async def pooled(cli_database: str) -> AsyncIterator[ServiceContext]:
    """A context on a real pool over a migrated database of its own."""
    await asyncio.to_thread(upgrade_head, cli_database)
    ctx = ServiceContext(
        database=Database.connect(cli_database, pool_size=4),
        counter=default_counter(),
        embedder=CountingEmbedder(),
        settings=make_settings(embedder={"offload_embedding": "queued", "worker_idle_s": 0.05}),
    )
    yield ctx
    await ctx.aclose()


async def _queue_depth(ctx: ServiceContext) -> int:
    async with ctx.database.transaction() as db:
        return (await queue_store.depth(db)).chunks


async def _until_drained(ctx: ServiceContext, seconds: float) -> int:
    for _ in range(int(seconds / 0.05)):
        depth = await _queue_depth(ctx)
        if depth == 0:
            return 0
        await asyncio.sleep(0.05)
    return await _queue_depth(ctx)


async def test_concurrent_claims_skip_each_others_rows(pooled: ServiceContext) -> None:
    await archive_facts(pooled, "w1")
    total = await _queue_depth(pooled)
    now, lease = pooled.clock(), timedelta(seconds=60)
    async with pooled.database.transaction() as first:
        mine = await queue_store.claim(first, 2, now, lease)
        async with pooled.database.transaction() as second:  # another worker, meanwhile
            theirs = await queue_store.claim(second, 100, now, lease)
    assert len(mine) == 2 and len(theirs) == total - 2
    assert not {c.id for c in mine} & {c.id for c in theirs}


async def test_a_claim_racing_another_takes_the_next_oldest_not_nothing(
    pooled: ServiceContext,
) -> None:
    """Both workers read the same oldest candidates without locks; the second skips the rows
    the first is claiming and takes the next ones from the candidates it read."""
    await archive_facts(pooled, "w3")
    await queued_session(pooled, DEFAULT_TENANT, "w3", 30)
    assert await _queue_depth(pooled) >= 4
    now, lease = pooled.clock(), timedelta(seconds=60)
    async with pooled.database.transaction() as first:
        mine = await queue_store.claim(first, 2, now, lease)
        async with pooled.database.transaction() as second:
            theirs = await queue_store.claim(second, 2, now, lease)
    assert len(mine) == 2 and len(theirs) == 2
    assert max(c.created_at for c in mine) <= min(c.created_at for c in theirs)
    assert not {c.id for c in mine} & {c.id for c in theirs}


async def test_the_worker_embeds_what_turns_queue_and_stops_when_told(
    pooled: ServiceContext,
) -> None:
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(pooled, stop))
    try:
        await archive_facts(pooled, "w2")
        assert await _until_drained(pooled, 10) == 0
        found = await recall_query(pooled, DEFAULT_TENANT, "w2", QUESTION, 3)
        assert found.pending_chunks == 0
        assert any(r.vector_score is not None for r in found.results)
    finally:
        stop.set()
        await asyncio.wait_for(worker, 5)


async def test_the_worker_waits_for_turns_in_flight_but_not_for_ever(
    pooled: ServiceContext,
) -> None:
    """Between batches the in-process worker waits for a moment with no turn in flight (the
    turns keep the cores); under constant load it still embeds, a batch per wait."""
    await archive_facts(pooled, "w3")
    waiting = await _queue_depth(pooled)
    settings = {"offload_embedding": "queued", "worker_idle_s": 0.05, "worker_batch_chunks": 1}
    pooled.settings = make_settings(embedder={**settings, "worker_yield_s": 60})
    stop = asyncio.Event()
    with pooled.turns_in_flight.track():  # a turn in flight, held open by the test
        worker = asyncio.create_task(run_worker(pooled, stop))
        await asyncio.sleep(0.5)
        assert await _queue_depth(pooled) == waiting  # it waited
    try:
        assert await _until_drained(pooled, 10) == 0  # the turn ended: it went on
    finally:
        stop.set()
        await asyncio.wait_for(worker, 5)
    await archive_facts(pooled, "w3b")
    assert await _queue_depth(pooled) > 1
    pooled.settings = make_settings(embedder={**settings, "worker_yield_s": 0.05})
    stop.clear()
    with pooled.turns_in_flight.track():  # turns that never end do not starve it
        worker = asyncio.create_task(run_worker(pooled, stop))
        try:
            assert await _until_drained(pooled, 10) == 0
        finally:
            stop.set()
            await asyncio.wait_for(worker, 5)


class BrokenOnce(CountingEmbedder):
    """Raises an unexpected error on its first batch, then embeds."""

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        if self.passage_calls == 0:
            self.passage_calls += 1
            raise RuntimeError("a bug in the embedder")
        return await super().embed_passages(texts)


async def test_an_unexpected_failure_gives_the_claims_back_and_the_worker_goes_on(
    pooled: ServiceContext,
) -> None:
    await archive_facts(pooled, "w4")
    pooled.embedder = BrokenOnce()
    pooled.settings = make_settings(
        embedder={"offload_embedding": "queued", "worker_idle_s": 0.05, "worker_retry_s": 0.05}
    )
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(pooled, stop))
    try:
        assert await _until_drained(pooled, 10) == 0  # not stuck behind the failed claims
        assert not worker.done()
    finally:
        stop.set()
        await asyncio.wait_for(worker, 5)


async def test_ebbtide_worker_runs_on_its_own_and_stops_on_sigterm(
    pooled: ServiceContext, cli_database: str
) -> None:
    await archive_facts(pooled, "w3")
    assert await _queue_depth(pooled) > 0
    env = {**os.environ, "DATABASE_URL": cli_database, "EBBTIDE_EMBEDDER__KIND": "hash"}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli",
        "worker",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        assert await _until_drained(pooled, 60) == 0
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, output
    assert b"embedding worker stopped" in output
    response = await run_turn(pooled, turn_input("w3", [user(QUESTION)]))
    assert response.recall.pending_chunks == 0


class SlowPassages(HashEmbedder):
    """Passages on a loaded machine: each call takes `delay_s`; queries answer at once."""

    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self.delay_s = delay_s

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        await asyncio.sleep(self.delay_s)
        return await super().embed_passages(texts)


async def add_tenants(connection: AsyncConnection, *names: str) -> None:
    for name in names:
        await connection.execute(
            text("INSERT INTO tenants (id, name) VALUES (:name, :name)"), {"name": name}
        )


async def queued_session(ctx: ServiceContext, tenant: str, session: str, turns: int) -> None:
    """A session of `tenant` talking until chunks of it wait in the queue."""
    for t in range(turns):
        said = [user(f"{session} turn {t} " + words(120))]
        await run_turn(
            ctx, TurnInput(session_id=session, tenant_id=tenant, messages=said, **WINDOW)
        )


async def waiting_by_session(connection: AsyncConnection) -> dict[str, int]:
    rows = await connection.execute(
        text("SELECT session_id, count(*) FROM chunks WHERE needs_embedding GROUP BY session_id")
    )
    return {session: int(count) for session, count in rows.all()}


async def test_another_tenants_first_chunk_waits_at_most_one_batch(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    queued(ctx)
    await add_tenants(connection, "busy", "quiet")
    await queued_session(ctx, "busy", "history", 40)  # a long history offloaded first
    await queued_session(ctx, "quiet", "chat", 14)
    before = await waiting_by_session(connection)
    assert before["busy/history"] > 4 * before["quiet/chat"] > 0
    ctx.embedding_asked.clear()  # their own turns asked for them: the line alone here
    report = await embed_batch(ctx, 2)
    assert report is not None and report.embedded == 2
    after = await waiting_by_session(connection)
    assert after["quiet/chat"] == before["quiet/chat"] - 1  # one batch, not the whole line
    assert after["busy/history"] == before["busy/history"] - 1


async def test_a_recall_embeds_its_sessions_queued_chunks_before_it_searches(
    ctx: ServiceContext, embedder: CountingEmbedder, connection: AsyncConnection
) -> None:
    waiting = await archived_in_queue(ctx, connection, "q10")
    await add_tenants(connection, "other")
    await queued_session(ctx, "other", "s", 14)
    others = (await waiting_by_session(connection))["other/s"]
    queued(ctx, inline_embed_chunks=waiting + 1)
    ctx.embedding_asked.clear()
    found = await recall_query(ctx, DEFAULT_TENANT, "q10", QUESTION, 3)
    assert found.pending_chunks == 0 and await pending(connection, "q10") == 0
    assert any(r.vector_score is not None for r in found.results)
    assert (await waiting_by_session(connection))["other/s"] == others  # only its own
    assert ctx.embedding_asked == {}  # nothing of it left for the worker


async def test_a_turn_that_meets_queued_chunks_asks_the_worker_to_take_them_first(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    waiting = await archived_in_queue(ctx, connection, "q14")
    ctx.embedding_asked.clear()
    ctx.embedding_wakeup.clear()
    response = await ask(ctx, "q14", QUESTION)
    assert response.recall.pending_chunks == waiting  # a turn does not wait for them
    assert list(ctx.embedding_asked) == [f"{DEFAULT_TENANT}/q14"]
    assert ctx.embedding_wakeup.is_set()


async def test_a_bounded_recall_leaves_the_rest_to_the_worker_ahead_of_the_line(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    await add_tenants(connection, "busy")
    await queued_session(queued(ctx), "busy", "history", 40)
    waiting = await archived_in_queue(ctx, connection, "q11")
    assert waiting > 1
    queued(ctx, inline_embed_chunks=1)
    ctx.embedding_asked.clear()
    found = await recall_query(ctx, DEFAULT_TENANT, "q11", QUESTION, 3)
    assert found.pending_chunks == waiting - 1  # one embedded by the recall itself
    assert list(ctx.embedding_asked) == [f"{DEFAULT_TENANT}/q11"]
    report = await embed_batch(ctx, waiting - 1)  # the busy tenant's chunks are older
    assert report is not None and report.embedded == waiting - 1
    assert await pending(connection, "q11") == 0
    assert await embed_batch(ctx, 1) is not None and ctx.embedding_asked == {}


async def test_a_recall_that_cannot_wait_for_vectors_finds_the_chunks_by_their_words(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    waiting = await archived_in_queue(ctx, connection, "q12")
    ctx.settings = make_settings(
        embedder={"offload_embedding": "queued"},
        recall={"inline_embed_chunks": 8, "inline_embed_timeout_s": 0.05},
    )
    ctx.embedder = SlowPassages(0.5)
    response = await ask(ctx, "q12", QUESTION)
    assert response.recall.fallback is None  # the question itself had its vector
    assert response.recall.pending_chunks == waiting  # the claims went back
    assert FACTS[0] in recalled_block(response)
    assert await pending(connection, "q12") == waiting


async def test_a_batch_slower_than_its_lease_still_lands_its_vectors(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    """Under CPU contention a batch may outlive its claim: its work is written unless another
    worker took the chunks over, so the queue never repeats the same batch forever."""
    waiting = await archived_in_queue(ctx, connection, "q13")
    queued(ctx, claim_timeout_s=0.01)
    ctx.embedder = SlowPassages(0.1)
    report = await embed_batch(ctx, waiting)
    assert report is not None and report.embedded == waiting and report.lost_claims == 0
    assert report.seconds > ctx.settings.embedder.claim_timeout_s
    assert await pending(connection, "q13") == 0
