"""Ready for Citus: every statement a session's operations send reaches that session's shard.

A scripted conversation runs every operation (turns that offload and recall, the embedding
worker, recall, remember, every memory tool type, status, events, a chunk and a blob read,
the proxy with an edited history, the inspector, forget, the retention purge) while each
statement is recorded with its parameters. On the plain schema each statement is parsed and
must bind every distributed table it touches to one session key with equalities (what Citus
needs to route it to one shard); on a copy whose tables are partitioned by hash of the key
(eight partitions standing in for shards) `EXPLAIN` must show each statement reaching one
partition. The few statements that scan across sessions are listed below with their reason.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import openai
import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from app.api.ui import install_inspector
from app.bench.upstream import ScriptedUpstream
from app.cli import main
from app.core.blobs import blob_hash
from app.main import create_app
from app.providers.fakes import CountingEmbedder
from app.providers.tokenizer import counter_for_model, default_counter
from app.providers.upstream import HttpUpstream
from app.services.auth import create_key
from app.services.context import ServiceContext
from app.services.embedding_queue import drain, observe_depth
from app.services.maintenance import purge_expired
from app.store.database import Database, async_url
from app.store.distribution import (
    REFERENCE_TABLES,
    NotEmpty,
    partition_by_session,
    partition_name,
)
from app.store.migrate import upgrade_head
from tests.api.live import fresh_named_database
from tests.api.proxy_helpers import CLIENT_KEY, TIMEOUT_S, UPSTREAM
from tests.builders import turn_body, user, words
from tests.conftest import make_settings
from tests.integration.citus_rules import citus_rule_breaks
from tests.integration.routing import DISTRIBUTION_COLUMN, Execution, StatementLog, routes
from tests.unit.test_formats import OPENAI_SHAPES

SHARDS = 8
TENANT = "acme"
SESSIONS = ("routed-a", "routed-b")
PROXIED = "routed-p"  # the proxy's session
KEYS = {f"{TENANT}/{session}" for session in (*SESSIONS, PROXIED)}
# Nothing the notes keep (no number, no cue word): the forced question's recall must search
# and inject, so that its statements are routed too.
SECRET = "The staging database password is Zorblax, Priya set it up on the Lisbon replica."
SCOPES = ["memory:read", "memory:write", "memory:offload", "memory:forget"]

# The statements that scan across sessions on purpose: maintenance and listings, never a
# turn. None of them locks rows (Citus runs `FOR UPDATE` on one shard only), and each
# touches only what its job needs.
CROSS_SESSION = {
    "app.store.embedding_queue._waiting_sessions": "the embedding worker counts the waiting "
    "chunks of each session (grouped by session), without locks, to share a batch between "
    "tenants; it then claims them session by session with routed statements",
    "app.store.embedding_queue.depth": "the queue-depth gauge counts pending chunks of all "
    "sessions (one aggregate per worker batch)",
    "app.store.maintenance.expired_sessions": "the retention purge looks for sessions idle "
    "past the retention period, without locks; it then locks and deletes each by its key",
    "app.store.inspector.tenant_sessions": "the inspector's first page lists the tenant's "
    "sessions, newest first: a person's page view, not a turn",
}


def _context(database: Database) -> ServiceContext:
    """Offloads queue their chunks (so the worker's statements run), and the proxy talks to
    a scripted upstream."""
    upstream = ScriptedUpstream()
    return ServiceContext(
        database=database,
        counter=default_counter(),
        counters=counter_for_model,
        embedder=CountingEmbedder(),
        settings=make_settings(
            embedder={"offload_embedding": "queued"},
            proxy={"openai_base_url": f"{UPSTREAM}/v1", "timeout_s": TIMEOUT_S},
        ),
        upstream=HttpUpstream(
            timeout_s=TIMEOUT_S,
            connect_timeout_s=TIMEOUT_S,
            transport=httpx.ASGITransport(app=upstream.app),
        ),
    )


def _ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


async def scripted_session(
    ctx: ServiceContext, log: StatementLog, connection: AsyncConnection
) -> None:
    """Every operation of a session, recorded: two sessions of one tenant, so that a
    statement bound to the wrong one would show."""
    key = await create_key(ctx, TENANT, SCOPES)
    app = create_app(context=ctx)
    install_inspector(app)
    headers = {"Authorization": f"Bearer {key}"}
    transport = httpx.ASGITransport(app=app)
    with log.recording(connection.sync_connection):
        async with httpx.AsyncClient(
            transport=transport, base_url="http://ebbtide.test", headers=headers
        ) as http:
            await _conversation(ctx, http)
            await _proxy(http)
            await _inspector(http, key)
            await _forget_and_purge(ctx, http)


async def _conversation(ctx: ServiceContext, http: httpx.AsyncClient) -> None:
    a, b = SESSIONS
    small = {"context_window": 3_000, "policy": {"floor_turns": 1, "floor_tokens": 0}}
    _ok(await http.post(f"/sessions/{a}/turn", json=turn_body(user(SECRET), **small)))
    image = {"messages": [OPENAI_SHAPES["user parts"]], **small}
    _ok(await http.post(f"/sessions/{a}/turn", json=image))
    for t in range(14):
        body = turn_body(user(f"turn {t} " + words(120, "chat")), **small)
        _ok(await http.post(f"/sessions/{a}/turn", json=body, headers={"Idempotency-Key": f"t{t}"}))
        _ok(await http.post(f"/sessions/{b}/turn", json=body))
    await drain(ctx)  # the embedding worker: claims, units, vectors
    await observe_depth(ctx)
    question = turn_body(user("What was the Zorblax password again?"), recall="force", **small)
    asked = _ok(await http.post(f"/sessions/{a}/turn", json=question))
    assert asked["recall"]["hits"], "the scripted question recalled nothing"
    found = _ok(await http.post(f"/sessions/{a}/recall", json={"query": "staging password"}))
    assert found["results"]
    _ok(await http.post(f"/sessions/{a}/remember", json={"text": "Ship only from Suzhou."}))
    for call in (
        {"type": "help"},
        {"type": "recall", "query": "Zorblax"},
        {"type": "remember", "text": "Never deploy on Fridays."},
        {"type": "status"},
        {"type": "offload", "until_tokens": 500},
    ):
        _ok(await http.post(f"/sessions/{a}/memory", json=call))
    _ok(await http.post(f"/sessions/{a}/turn", json=turn_body(user("next"), **small)))
    _ok(await http.get(f"/sessions/{a}/status"))
    _ok(await http.get(f"/sessions/{a}/events", params={"kind": "turn"}))
    _ok(await http.get(f"/sessions/{a}/chunks/{found['results'][0]['chunk_id']}"))
    png = OPENAI_SHAPES["user parts"]["content"][1]["image_url"]["url"].rpartition(",")[2]
    blob = await http.get(f"/sessions/{a}/blobs/{blob_hash(png)}")
    assert blob.status_code == 200, blob.text


async def _proxy(http: httpx.AsyncClient) -> None:
    """Three calls through the OpenAI SDK; the third edits the history, which archives the
    stored branch."""
    client = openai.AsyncOpenAI(
        base_url="http://ebbtide.test/v1",
        api_key=CLIENT_KEY,  # the upstream's key, passed through
        http_client=http,
        default_headers={
            "X-Ebbtide-Session": PROXIED,
            "X-Ebbtide-Key": http.headers["Authorization"].removeprefix("Bearer "),
        },
        max_retries=0,
    )
    history: list[Any] = [{"role": "user", "content": "Plan a trip."}]
    for follow_up in ("Go to Oslo.", "In May."):
        answer = await client.chat.completions.create(model="gpt-4o", messages=history)
        history += [answer.choices[0].message.model_dump(), {"role": "user", "content": follow_up}]
    edited = [*history[:2], {"role": "user", "content": "Go to Bergen."}]
    await client.chat.completions.create(model="gpt-4o", messages=edited)


async def _inspector(http: httpx.AsyncClient, key: str) -> None:
    a = SESSIONS[0]
    page = await http.post("/ui/login", data={"key": key}, follow_redirects=True)
    assert page.status_code == 200
    ui = {"X-Ebbtide-UI": "1"}
    assert (await http.get("/ui/")).status_code == 200
    assert (await http.get(f"/ui/sessions/{a}")).status_code == 200
    traced = await http.post(
        f"/ui/sessions/{a}/trace", json={"text": "Zorblax", "turn": 3}, headers=ui
    )
    assert traced.status_code == 200, traced.text


async def _forget_and_purge(ctx: ServiceContext, http: httpx.AsyncClient) -> None:
    a = SESSIONS[0]
    found = _ok(
        await http.post(f"/sessions/{a}/memory", json={"type": "recall", "query": "Zorblax"})
    )
    chunk_id = found["result"]["results"][0]["chunk_id"]
    pending = _ok(
        await http.post(f"/sessions/{a}/memory", json={"type": "forget", "chunk_id": chunk_id})
    )
    confirm = {"type": "forget", "confirm": pending["result"]["pending_id"]}
    done = _ok(await http.post(f"/sessions/{a}/memory", json=confirm))
    assert done["result"]["status"] == "deleted"
    assert await purge_expired(ctx, older_than_days=-1) == len(KEYS)  # idle or not: all


def _report(execution: Execution) -> str:
    return f"{execution.origin or '(no store function)'}: {execution.sql[:300]}"


async def test_every_statement_of_a_session_is_bound_to_its_key(
    database: Database, connection: AsyncConnection
) -> None:
    ctx = _context(database)
    log = StatementLog()
    await scripted_session(ctx, log, connection)

    unrouted: list[Execution] = []
    routed = locked = 0
    for execution in log.executions:
        route = routes(execution)
        if not route.touches_distributed:
            continue
        if route.key is None:
            unrouted.append(execution)
            assert not route.locks_rows, f"a lock across sessions: {_report(execution)}"
            continue
        assert route.key in KEYS, _report(execution)
        routed += 1
        locked += route.locks_rows
    unlisted = [_report(e) for e in unrouted if e.origin not in CROSS_SESSION]
    assert unlisted == [], "statements reaching more than one session:\n" + "\n".join(unlisted)
    # the list is what happens: every entry was seen, so none can go stale unnoticed
    assert {execution.origin for execution in unrouted} == set(CROSS_SESSION)
    assert routed > 300 and locked > 0  # the turns ran, row locks included (733, 96 when written)


# --- the same session on hash partitions --------------------------------------------------------


@pytest.fixture(scope="module")
def sharded_url(database_url: str) -> Iterator[str]:
    """A database migrated as any other, then its distributed tables partitioned by hash of
    the session key: eight partitions standing in for shards."""
    with fresh_named_database(database_url, "ebbtide_shards") as url:
        upgrade_head(url)
        partition_by_session(url, SHARDS)
        yield url


@pytest.fixture
async def sharded(sharded_url: str) -> AsyncIterator[AsyncConnection]:
    engine = create_async_engine(async_url(sharded_url))
    try:
        async with engine.connect() as connection:
            transaction = await connection.begin()
            yield connection
            await transaction.rollback()
    finally:
        await engine.dispose()


def _partitions(plan: Any) -> set[tuple[str, int]]:
    """(table, partition number) of every distributed table's partition in a JSON plan."""
    found: set[tuple[str, int]] = set()
    if isinstance(plan, dict):
        name = plan.get("Relation Name")
        table, _, number = str(name).rpartition("_p")
        if table in DISTRIBUTION_COLUMN and number.isdigit():
            assert partition_name(table, int(number)) == name
            found.add((table, int(number)))
        for value in plan.values():
            found |= _partitions(value)
    elif isinstance(plan, list):
        for value in plan:
            found |= _partitions(value)
    return found


async def _explain(connection: AsyncConnection, execution: Execution) -> set[tuple[str, int]]:
    result = await connection.exec_driver_sql(
        "EXPLAIN (FORMAT JSON) " + execution.sql, execution.parameters
    )
    plan = result.scalar_one()
    return _partitions(plan if isinstance(plan, list) else json.loads(plan))


async def test_on_hash_partitions_each_statement_of_a_session_reaches_one_partition(
    sharded: AsyncConnection,
) -> None:
    ctx = _context(Database.bound(sharded))
    log = StatementLog()
    await scripted_session(ctx, log, sharded)

    explained: dict[str, set[tuple[str, int]]] = {}
    cross_session: dict[str, set[tuple[str, int]]] = {}
    for execution in log.executions:
        route = routes(execution)
        if not route.touches_distributed or execution.sql in explained:
            continue
        if route.key is None:
            cross_session[execution.origin] = await _explain(sharded, execution)
        elif not route.is_insert:  # an INSERT's plan does not name the partition it routes to
            explained[execution.sql] = await _explain(sharded, execution)
    spread = {sql[:200]: sorted(p) for sql, p in explained.items() if len({n for _, n in p}) != 1}
    assert spread == {}, "statements reaching more or less than one partition"
    assert len(explained) >= 60, len(explained)  # 73 distinct statements when written
    # and the method can tell: each cross-session scan reaches every partition it reads
    assert set(cross_session) == set(CROSS_SESSION)
    for origin, partitions in cross_session.items():
        assert len({n for _, n in partitions}) == SHARDS, origin


async def test_the_partitioned_schema_is_the_migrated_one_and_keeps_citus_rules(
    sharded: AsyncConnection, connection: AsyncConnection
) -> None:
    """Same tables, columns, defaults, constraints, indexes and foreign keys under the same
    names as the plain schema; only the storage differs."""
    plain, partitioned = await _schema(connection), await _schema(sharded)
    assert partitioned == plain
    assert await citus_rule_breaks(sharded, DISTRIBUTION_COLUMN, REFERENCE_TABLES) == []
    kinds = dict(
        (
            await sharded.execute(
                text("SELECT relname, relkind FROM pg_class WHERE relname = ANY(:t)"),
                {"t": list(DISTRIBUTION_COLUMN)},
            )
        ).all()
    )
    assert set(kinds.values()) == {"p"}
    count = await sharded.scalar(text("SELECT count(*) FROM pg_inherits"))
    assert count >= SHARDS * len(DISTRIBUTION_COLUMN)


_SCHEMA = (
    # columns: name, type, nullability, default, identity
    "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, "
    "pg_get_expr(d.adbin, d.adrelid), a.attidentity FROM pg_attribute AS a "
    "JOIN pg_class AS c ON c.oid = a.attrelid LEFT JOIN pg_attrdef AS d "
    "ON d.adrelid = a.attrelid AND d.adnum = a.attnum JOIN pg_namespace AS n "
    "ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') "
    "AND NOT c.relispartition AND a.attnum > 0 AND NOT a.attisdropped",
    # constraints of the tables themselves (not the copies Postgres makes on partitions)
    "SELECT c.relname, k.conname, pg_get_constraintdef(k.oid) FROM pg_constraint AS k "
    "JOIN pg_class AS c ON c.oid = k.conrelid WHERE NOT c.relispartition AND k.conparentid = 0 "
    "AND c.relnamespace = 'public'::regnamespace",
    # indexes, by name and definition (`ON ONLY` marks a partitioned table's index)
    "SELECT c.relname, i.relname, replace(pg_get_indexdef(x.indexrelid), ' ONLY ', ' ') "
    "FROM pg_index AS x JOIN pg_class AS i ON i.oid = x.indexrelid "
    "JOIN pg_class AS c ON c.oid = x.indrelid WHERE NOT c.relispartition "
    "AND c.relnamespace = 'public'::regnamespace",
    # sequences
    "SELECT relname FROM pg_class WHERE relkind = 'S' AND relnamespace = 'public'::regnamespace",
)


async def _schema(connection: AsyncConnection) -> list[list[tuple[Any, ...]]]:
    return [
        sorted(tuple(row) for row in (await connection.execute(text(query))).all())
        for query in _SCHEMA
    ]


def test_distribute_prints_the_citus_calls_and_refuses_a_database_without_citus(
    cli_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["distribute", "--print"])
    printed = capsys.readouterr().out.splitlines()
    assert printed[:3] == [
        "SELECT create_reference_table('tenants');",
        "SELECT create_reference_table('api_keys');",
        "SELECT create_reference_table('inspector_logins');",
    ]
    assert printed[3] == "SELECT create_distributed_table('sessions', 'id');"
    colocated = {line.split("'")[1] for line in printed[4:]}
    assert colocated == set(DISTRIBUTION_COLUMN) - {"sessions"}
    assert all("'session_id', colocate_with => 'sessions');" in line for line in printed[4:])
    # chunk_units refers to chunks: distributed after it
    assert printed.index(next(p for p in printed if "'chunk_units'" in p)) > printed.index(
        next(p for p in printed if "'chunks'" in p)
    )
    with pytest.raises(SystemExit, match="no citus extension"):
        main(["distribute"])
    with psycopg.connect(cli_database) as db:  # refused before migrating: nothing written
        assert db.execute("SELECT to_regclass('alembic_version')").fetchone() == (None,)


def test_partitioning_refuses_a_database_with_sessions_and_changes_nothing(
    database_url: str,
) -> None:
    with fresh_named_database(database_url, "ebbtide_not_empty") as url:
        upgrade_head(url)
        with psycopg.connect(url) as db:
            db.execute("INSERT INTO tenants (id, name) VALUES ('acme', 'acme')")
            db.execute(
                "INSERT INTO sessions (id, tenant_id, version, turn_count, next_seq, c0_tokens, "
                "policy, calibration_ratio) VALUES ('acme/s', 'acme', 0, 0, 1, 0, '{}', 1)"
            )
        with pytest.raises(NotEmpty, match="sessions has rows"):
            partition_by_session(url, SHARDS)
        with psycopg.connect(url) as db:  # nothing was rebuilt
            kinds = db.execute(
                "SELECT DISTINCT relkind::text FROM pg_class WHERE relname = ANY(%s)",
                (list(DISTRIBUTION_COLUMN),),
            ).fetchall()
            assert kinds == [("r",)]
            assert db.execute("SELECT count(*) FROM sessions").fetchone() == (1,)
