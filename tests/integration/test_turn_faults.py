"""Faults during a turn: nothing half-written, nothing lost (docs/DESIGN.md §3, §5)."""

from __future__ import annotations

import pytest
from sqlalchemy import exc, text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.facts import FactChanges
from app.core.messages import Message
from app.core.notes import NotesBody
from app.core.plan import plan_turn
from app.providers.fakes import DownEmbedder, SlowEmbedder
from app.services.context import ServiceContext
from app.services.notes import NotesUpdate
from app.services.offload import OffloadBatch
from app.services.policies import plan_policy
from app.services.turn_recall import TurnRecall
from app.services.turn_result import Outcome
from app.services.turns import (
    Stopwatch,
    VersionConflict,
    commit_turn,
    load_snapshot,
    run_turn,
)
from tests.builders import user, words
from tests.conftest import make_settings
from tests.integration.helpers import session_rows
from tests.integration.test_turn_invariants import turn_input

WINDOW = 4000  # budget 3,000 after the default reserve cap


async def fill_to_the_brink(ctx: ServiceContext, session_id: str) -> Message:
    """Posts turns until the next one will cross the offload watermark; returns that turn."""
    for t in range(40):
        nxt = user(f"turn {t} " + words(60, "w"))
        snap = await load_snapshot(ctx, turn_input(session_id, [nxt]))
        probe = plan_turn(
            turn_input(session_id, [nxt], context_window=WINDOW),
            snap,
            ctx.counter,
            plan_policy(ctx.settings),
            ctx.clock(),
            ctx.new_id,
        )
        if probe.offloaded:
            return nxt
        await run_turn(ctx, turn_input(session_id, [nxt], context_window=WINDOW))
    raise AssertionError("the watermark was never reached")


FAULT_POINTS = [
    ("after message insert", "BEFORE INSERT ON chunks"),
    ("after chunk insert", "BEFORE UPDATE ON messages"),
    ("after window flip", "BEFORE INSERT ON notes"),
    ("after notes update", "BEFORE UPDATE ON sessions"),
    ("after session update", "BEFORE INSERT ON events"),
    ("before commit", "BEFORE INSERT ON idempotency"),
]


@pytest.mark.parametrize(("step", "trigger_on"), FAULT_POINTS, ids=[p[0] for p in FAULT_POINTS])
async def test_a_fault_at_any_step_of_the_offload_leaves_the_session_as_before(
    ctx: ServiceContext, connection: AsyncConnection, step: str, trigger_on: str
) -> None:
    crossing = await fill_to_the_brink(ctx, "fault")
    before = await session_rows(connection, "fault")
    await connection.execute(
        text(
            "CREATE FUNCTION fail_here() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'injected fault'; END $$"
        )
    )
    await connection.execute(
        text(f"CREATE TRIGGER injected {trigger_on} FOR EACH ROW EXECUTE FUNCTION fail_here()")
    )
    with pytest.raises(exc.DBAPIError, match="injected fault"):
        await run_turn(
            ctx, turn_input("fault", [crossing], context_window=WINDOW, idempotency_key="k1")
        )
    table = trigger_on.split(" ON ")[1]
    await connection.execute(text(f"DROP TRIGGER injected ON {table}"))
    assert await session_rows(connection, "fault") == before
    retried = await run_turn(
        ctx, turn_input("fault", [crossing], context_window=WINDOW, idempotency_key="k1")
    )
    assert retried.offload.triggered, "the retry completes the offload"


async def test_a_turn_planned_on_a_stale_version_is_not_written(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    await run_turn(ctx, turn_input("race", [user("first")], model="gpt-4o"))
    late = turn_input("race", [user("late")])
    snap = await load_snapshot(ctx, late)
    plan = plan_turn(late, snap, ctx.counter, plan_policy(ctx.settings), ctx.clock(), ctx.new_id)
    await run_turn(ctx, turn_input("race", [user("winner")]))
    before = await session_rows(connection, "race")
    with pytest.raises(VersionConflict):
        notes = NotesUpdate(changes=FactChanges(), body=NotesBody(), facts=[])
        outcome = Outcome(
            plan, OffloadBatch([], [], None), notes, 0, TurnRecall(mode="auto"), plan.window_after
        )
        await commit_turn(ctx, late, snap, outcome, {}, Stopwatch(0.0, 0.0))
    assert await session_rows(connection, "race") == before


async def test_a_stalled_embedder_during_offload_is_timed_out_and_nothing_is_lost(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    crossing = await fill_to_the_brink(ctx, "stall")
    ctx.settings = make_settings(
        embedder={"passage_timeout_s": 0.05}, recall={"embed_timeout_s": 0.05}
    )
    ctx.embedder = SlowEmbedder(delay_s=5)
    response = await run_turn(ctx, turn_input("stall", [crossing]))
    assert response.offload.triggered
    assert response.offload.fallback == "embedder_unavailable"
    pending = await connection.scalar(
        text("SELECT count(*) FROM chunks WHERE session_id = 'local/stall' AND needs_embedding")
    )
    assert pending == len(response.offload.chunk_ids)


async def test_embedder_down_still_offloads_raw_text_marked_for_re_embedding(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    crossing = await fill_to_the_brink(ctx, "down")
    ctx.embedder = DownEmbedder()
    response = await run_turn(ctx, turn_input("down", [crossing]))
    assert response.offload.triggered
    assert response.offload.fallback == "embedder_unavailable"
    rows = (
        await connection.execute(
            text(
                "SELECT embedding IS NULL, needs_embedding, embedding_model, length(raw_text) "
                "FROM chunks WHERE session_id = 'local/down'"
            )
        )
    ).all()
    assert rows and all(r[0] and r[1] and r[2] is None and r[3] > 0 for r in rows)
