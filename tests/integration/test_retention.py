"""Retention (docs/DESIGN.md §11): sessions idle past the period are deleted with all they hold, by
`ebbtide purge` and by the server's own timer."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.cli import main
from app.main import create_app
from app.services.context import ServiceContext
from app.services.maintenance import purge_expired
from app.services.turns import run_turn
from app.store.database import Database
from app.store.migrate import upgrade_head
from tests.builders import user, words
from tests.conftest import make_settings
from tests.integration.helpers import session_rows
from tests.integration.test_turn_invariants import turn_input


async def talk(ctx: ServiceContext, session_id: str, turns: int = 30) -> None:
    for t in range(turns):
        await run_turn(
            ctx,
            turn_input(session_id, [user(f"{t} " + words(60))], context_window=4000),
        )


async def age(connection: AsyncConnection, session_id: str, days: int) -> None:
    await connection.execute(
        text("UPDATE sessions SET updated_at = now() - make_interval(days => :d) WHERE id = :s"),
        {"d": days, "s": f"local/{session_id}"},
    )


async def test_purge_deletes_idle_sessions_from_every_table_and_keeps_the_rest(
    ctx: ServiceContext, connection: AsyncConnection
) -> None:
    await talk(ctx, "idle")
    await talk(ctx, "active", turns=2)
    await age(connection, "idle", 40)
    before = await session_rows(connection, "idle")
    assert before["chunks"] and before["facts"] is not None and before["events"]

    assert await purge_expired(ctx) == 0  # no retention period configured: nothing goes
    assert await purge_expired(ctx, older_than_days=30) == 1

    after = await session_rows(connection, "idle")
    assert all(rows == [] for rows in after.values()), after
    assert (await session_rows(connection, "active"))["messages"]


async def test_purge_works_in_batches(ctx: ServiceContext, connection: AsyncConnection) -> None:
    batched = ServiceContext(
        database=ctx.database,
        counter=ctx.counter,
        embedder=ctx.embedder,
        settings=make_settings(retention={"days": 1, "batch_size": 2}),
    )
    for i in range(5):
        await talk(batched, f"old-{i}", turns=1)
        await age(connection, f"old-{i}", 3)
    assert await purge_expired(batched) == 5


async def test_the_server_purges_on_its_timer(cli_database: str) -> None:
    await asyncio.to_thread(upgrade_head, cli_database)  # alembic runs a loop of its own
    settings = make_settings(embedder={"kind": "hash"}, retention={"days": 1, "interval_s": 0.05})
    database = Database.connect(cli_database, pool_size=1)
    try:
        async with database.transaction() as db:
            await db.execute(
                text(
                    "INSERT INTO tenants (id, name) VALUES ('local', 'local')"
                    " ON CONFLICT DO NOTHING;"
                    "INSERT INTO sessions (id, tenant_id, version, turn_count, next_seq, c0_tokens,"
                    " policy, calibration_ratio, updated_at) VALUES"
                    " ('stale', 'local', 0, 0, 1, 0, '{}', 1, now() - interval '2 days'),"
                    " ('fresh', 'local', 0, 0, 1, 0, '{}', 1, now())"
                )
            )
        app = create_app(settings=settings, database_url=cli_database)
        async with app.router.lifespan_context(app):
            for _ in range(100):  # at most 5 s
                async with database.transaction() as db:
                    left = set((await db.execute(text("SELECT id FROM sessions"))).scalars())
                if "stale" not in left:
                    break
                await asyncio.sleep(0.05)
        assert left == {"fresh"}
    finally:
        await database.dispose()


def test_purge_command(cli_database: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="no retention period"):
        main(["purge"])
    main(["purge", "--older-than-days", "30"])
    printed = capsys.readouterr()
    assert "purged 0 sessions idle for more than 30 days" in printed.out
    # progress goes to stderr, so that stdout stays the result
    assert "ebbtide: purge idle sessions: 0 of 0 done" in printed.err


def test_encryption_commands(
    cli_database: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    main(["encryption", "new-key"])
    key = capsys.readouterr().out.strip()
    monkeypatch.setenv("EBBTIDE_ENCRYPTION__KEYS", key)
    from app.settings import get_settings

    get_settings.cache_clear()
    try:
        main(["encryption", "rotate"])
    finally:
        from app.store.sealing import use_sealer

        use_sealer(None)
    printed = capsys.readouterr()
    assert "under key 1 of 1" in printed.out and "lexical index of 0 chunks" in printed.out
    for stage in ("re-encrypt sessions", "re-encrypt messages", "rebuild the lexical index"):
        assert f"ebbtide: {stage}: 0 of 0 done" in printed.err, stage
