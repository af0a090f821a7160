"""The statement reader behind the routing tests (tests/integration/routing.py): what binds a
distributed table to one session key, and what does not."""

from __future__ import annotations

from typing import Any

from tests.integration.routing import Execution, Route, routes


def route(sql: str, **parameters: Any) -> Route:
    return routes(Execution(sql, parameters, ""))


def test_an_equality_on_the_key_binds_the_table() -> None:
    found = route("SELECT id FROM chunks WHERE chunks.session_id = %(s)s AND kind = 'x'", s="t/a")
    assert found.key == "t/a" and not found.locks_rows
    assert route("SELECT * FROM sessions WHERE id = CAST(%(s)s AS VARCHAR)", s="t/a").key == "t/a"
    assert route("SELECT * FROM notes WHERE session_id IN (%(s)s)", s="t/a").key == "t/a"
    assert route("SELECT * FROM notes WHERE session_id = 't/b' FOR UPDATE").locks_rows


def test_what_does_not_bind_one_key() -> None:
    assert route("SELECT * FROM chunks WHERE kind = %(k)s", k="x").key is None
    either = "SELECT * FROM chunks WHERE session_id = %(s)s OR kind = 'x'"
    assert route(either, s="t/a").key is None
    two = "SELECT * FROM chunks WHERE session_id IN (%(a)s, %(b)s)"
    assert route(two, a="t/a", b="t/b").key is None
    clash = "SELECT * FROM chunks WHERE session_id = %(a)s AND session_id = %(b)s"
    assert route(clash, a="t/a", b="t/b").key is None
    assert route("SELECT * FROM chunks WHERE id = %(s)s", s="t/a").key is None  # not the key


def test_a_join_binds_through_the_key_columns_only() -> None:
    paired = (
        "SELECT * FROM chunks AS c JOIN chunk_units AS u "
        "ON u.session_id = c.session_id AND u.chunk_id = c.id WHERE c.session_id = %(s)s"
    )
    assert route(paired, s="t/a").key == "t/a"
    by_id = (
        "SELECT * FROM chunks AS c JOIN chunk_units AS u ON u.chunk_id = c.id "
        "WHERE c.session_id = %(s)s"
    )
    unbound = route(by_id, s="t/a")
    assert unbound.key is None
    assert [(u.table, bool(u.keys)) for u in unbound.uses] == [
        ("chunks", True),
        ("chunk_units", False),
    ]


def test_subqueries_and_ctes_are_read_as_levels_of_their_own() -> None:
    correlated = (
        "SELECT * FROM blobs WHERE blobs.session_id = %(s)s AND NOT EXISTS (SELECT 1 FROM "
        "chunks WHERE chunks.session_id = blobs.session_id)"
    )
    assert route(correlated, s="t/a").key == "t/a"
    on_another_column = (
        "SELECT * FROM blobs WHERE blobs.session_id = %(s)s AND NOT EXISTS (SELECT 1 FROM "
        "chunks WHERE chunks.id = blobs.hash)"
    )
    assert route(on_another_column, s="t/a").key is None
    cte = (
        "WITH m AS (SELECT id FROM chunks WHERE session_id = %(s)s) "
        "SELECT * FROM m JOIN unnest(ARRAY[1]) AS q(n) ON true"
    )
    assert route(cte, s="t/a").key == "t/a"
    loose_cte = "WITH m AS (SELECT id FROM chunks) SELECT * FROM m"
    assert route(loose_cte).key is None


def test_an_insert_is_routed_by_the_keys_of_its_rows() -> None:
    one = "INSERT INTO events (session_id, kind) VALUES (%(s0)s, 'a'), (%(s1)s, 'b')"
    assert route(one, s0="t/a", s1="t/a").key == "t/a"
    assert route(one, s0="t/a", s1="t/b").key is None
    from_select = "INSERT INTO events (session_id, kind) SELECT session_id, kind FROM events"
    assert route(from_select).key is None
    reference = route("INSERT INTO tenants (id, name) VALUES (%(t)s, %(t)s)", t="acme")
    assert not reference.touches_distributed


def test_updates_and_deletes_bind_their_target() -> None:
    update = "UPDATE chunks SET tokens = 1 WHERE session_id = %(s)s AND id = %(c)s"
    assert route(update, s="t/a", c="ck").key == "t/a"
    assert route("DELETE FROM sessions WHERE updated_at < now()").key is None
    assert route("SAVEPOINT sa_savepoint_1").uses == ()
