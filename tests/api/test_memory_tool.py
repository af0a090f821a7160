"""The `memory` tool over HTTP: every type, scopes, remember limits and duplicates, the
two-step forget that really deletes, strict-mode nulls ignored, and bad calls refused with
nothing written."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.services.auth import create_key
from app.services.context import ServiceContext
from tests.api.test_auth import bearer
from tests.builders import turn_body, user, words
from tests.integration.helpers import session_rows
from tests.integration.test_encryption import tables_holding

# The notes keep the password as a stated fact; the second sentence is the archive's alone, so
# the chunk still says something the prompt does not (recall never injects what it already
# holds).
SECRET = (
    "The staging database password is Zorblax-4471. Priya set it up on the Lisbon replica "
    "after the outage."
)
WINDOW = 4000
ALL = ["memory:read", "memory:write", "memory:offload", "memory:forget"]


async def converse(client: httpx.AsyncClient, session: str, headers: dict[str, str]) -> None:
    """The secret first, then enough talk to offload it."""
    first = turn_body(user(SECRET), context_window=WINDOW)
    assert (await client.post(f"/sessions/{session}/turn", json=first, headers=headers)).is_success
    for t in range(40):
        body = turn_body(user(f"turn {t} " + words(60, "chat")), context_window=WINDOW)
        response = await client.post(f"/sessions/{session}/turn", json=body, headers=headers)
        assert response.status_code == 200


async def memory(
    client: httpx.AsyncClient, session: str, headers: dict[str, str], **call: Any
) -> httpx.Response:
    return await client.post(f"/sessions/{session}/memory", json=call, headers=headers)


@pytest.fixture
async def full(ctx: ServiceContext) -> dict[str, str]:
    return bearer(await create_key(ctx, "acme", ALL))


@pytest.fixture
async def default(ctx: ServiceContext) -> dict[str, str]:
    return bearer(await create_key(ctx, "acme", ["memory:read", "memory:write"]))


async def test_help_lists_only_the_types_the_key_may_call(
    client: httpx.AsyncClient, full: dict[str, str], default: dict[str, str]
) -> None:
    await converse(client, "h", default)
    limited = (await memory(client, "h", default, type="help")).json()
    assert list(limited["result"]["types"]) == ["help", "recall", "remember", "carry", "status"]
    assert "Use when" in limited["text"] and "no match" in limited["text"]
    everything = (await memory(client, "h", full, type="help")).json()
    assert "forget" in everything["result"]["types"] and "offload" in everything["text"]


async def test_tool_definitions_in_both_forms_follow_the_scopes(
    client: httpx.AsyncClient, full: dict[str, str], default: dict[str, str]
) -> None:
    limited = (await client.get("/tools/memory", headers=default)).json()
    function = limited["openai"]["function"]
    assert limited["openai"]["type"] == "function" and function["name"] == "memory"
    assert function["parameters"]["properties"]["type"]["enum"] == limited["types"]
    assert (
        "forget" not in limited["types"] and "confirm" not in function["parameters"]["properties"]
    )
    assert "call with" in function["description"].lower() and "help" in function["description"]
    anthropic = limited["anthropic"]
    assert anthropic["name"] == "memory" and anthropic["input_schema"] == function["parameters"]
    everything = (await client.get("/tools/memory", headers=full)).json()
    assert everything["types"] == [
        "help",
        "recall",
        "remember",
        "carry",
        "status",
        "offload",
        "forget",
    ]


async def test_recall_returns_headed_raw_text_or_no_match_and_skips_what_was_injected(
    client: httpx.AsyncClient, default: dict[str, str]
) -> None:
    await converse(client, "r", default)
    found = (await memory(client, "r", default, type="recall", query="Zorblax-4471")).json()
    assert found["text"].startswith("#1 (confidence ") and "| turn 1-" in found["text"]
    assert SECRET in found["text"]
    chunk_id = found["result"]["results"][0]["chunk_id"]

    nothing = (await memory(client, "r", default, type="recall", query="Quuxington")).json()
    assert nothing["text"] == "no match" and nothing["result"]["no_match"]

    # The notes hold the password itself (a stated identifier): the turn asks after what only
    # the archive holds, so its chunk is injected.
    asked = turn_body(user("Where did Priya set up the replica after the outage?"), recall="force")
    turn = (await client.post("/sessions/r/turn", json=asked, headers=default)).json()
    assert chunk_id in [hit["chunk_id"] for hit in turn["recall"]["hits"]]
    again = (await memory(client, "r", default, type="recall", query="Zorblax-4471")).json()
    assert again["result"]["results"] == [] and again["result"]["already_in_context"] == [chunk_id]
    assert "already in your context" in again["text"]


async def test_status(client: httpx.AsyncClient, default: dict[str, str]) -> None:
    await converse(client, "s", default)
    status = (await memory(client, "s", default, type="status")).json()
    assert status["result"]["counts"]["chunks"] > 0
    assert "offloaded into" in status["text"] and "watermark" in status["text"]


async def test_remember_stores_once_and_makes_a_constraint_a_fact(
    client: httpx.AsyncClient, connection: AsyncConnection, default: dict[str, str]
) -> None:
    await converse(client, "m", default)
    point = "Only ship orders from the Suzhou warehouse."
    stored = (await memory(client, "m", default, type="remember", text=point)).json()
    chunk_id = stored["result"]["chunk_id"]
    assert not stored["result"]["duplicate"] and stored["result"]["facts"] == ["constraint"]
    again = await client.post("/sessions/m/remember", json={"text": point}, headers=default)
    assert again.json() == {"chunk_id": chunk_id, "duplicate": True, "facts": []}
    kinds = await connection.scalar(
        text("SELECT count(*) FROM chunks WHERE session_id = 'acme/m' AND kind = 'remember'")
    )
    assert kinds == 1
    found = (await memory(client, "m", default, type="recall", query="Suzhou warehouse")).json()
    assert chunk_id in [r["chunk_id"] for r in found["result"]["results"]]
    nxt = turn_body(user("next"))
    notes = (await client.post("/sessions/m/turn", json=nxt, headers=default)).json()["notes"]
    assert point.rstrip(".") in (notes["text"] or "")


async def test_a_near_duplicate_by_vector_answers_the_stored_id(
    client: httpx.AsyncClient, default: dict[str, str]
) -> None:
    await converse(client, "near", default)
    point = "Always quote prices in euros, including VAT, for every customer in Germany."
    stored = await client.post("/sessions/near/remember", json={"text": point}, headers=default)
    near = await client.post(
        "/sessions/near/remember", json={"text": point.replace("Always", "always")}, headers=default
    )
    assert near.json() == {"chunk_id": stored.json()["chunk_id"], "duplicate": True, "facts": []}
    other = await client.post(
        "/sessions/near/remember", json={"text": "Ship everything by sea."}, headers=default
    )
    assert not other.json()["duplicate"]


async def test_remember_limits_answer_413_and_429_and_write_nothing(
    ctx: ServiceContext,
    client: httpx.AsyncClient,
    connection: AsyncConnection,
    default: dict[str, str],
) -> None:
    await converse(client, "lim", default)
    before = await session_rows(connection, "lim", "acme")
    assert before["sessions"] and before["chunks"]  # the rows compared below are there
    too_long = await memory(client, "lim", default, type="remember", text="x" * 1001)
    assert too_long.status_code == 413 and too_long.json()["error"]["code"] == "remember_too_long"
    assert await session_rows(connection, "lim", "acme") == before
    for i in range(10):
        ok = await client.post(
            "/sessions/lim/remember",
            json={"text": f"Point {i}: {words(5, f'p{i}x')}"},
            headers=default,
        )
        assert ok.status_code == 200 and not ok.json()["duplicate"], ok.text
    during = await session_rows(connection, "lim", "acme")
    limited = await client.post(
        "/sessions/lim/remember", json={"text": "one more"}, headers=default
    )
    assert limited.status_code == 429 and limited.json()["error"]["code"] == "rate_limited"
    assert int(limited.headers["Retry-After"]) >= 1
    assert await session_rows(connection, "lim", "acme") == during


async def test_offload_needs_its_scope_and_the_next_turn_carries_it_out(
    client: httpx.AsyncClient, full: dict[str, str], default: dict[str, str]
) -> None:
    await converse(client, "o", full)
    refused = await memory(client, "o", default, type="offload")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    scheduled = (await memory(client, "o", full, type="offload", until_tokens=500)).json()
    assert scheduled["result"]["scheduled"] and scheduled["result"]["until_tokens"] == 500
    turn = (
        await client.post("/sessions/o/turn", json=turn_body(user("next")), headers=full)
    ).json()
    assert turn["offload"]["triggered"]
    usage = turn["usage"]
    assert usage["prompt_tokens"] < usage["trigger_ratio"] * usage["watermark_base"]


async def test_forget_is_two_step_and_leaves_no_trace(
    client: httpx.AsyncClient,
    connection: AsyncConnection,
    full: dict[str, str],
    default: dict[str, str],
) -> None:
    await converse(client, "f", full)
    found = (await memory(client, "f", full, type="recall", query="Zorblax-4471")).json()
    chunk_id = found["result"]["results"][0]["chunk_id"]
    assert (await memory(client, "f", default, type="forget", chunk_id=chunk_id)).status_code == 403

    pending = (await memory(client, "f", full, type="forget", chunk_id=chunk_id)).json()["result"]
    assert pending["status"] == "pending" and pending["preview"][0]["chunk_id"] == chunk_id
    assert await tables_holding(connection, "Zorblax") != []  # nothing deleted yet

    confirm = {"type": "forget", "confirm": pending["pending_id"]}
    assert (
        await client.post("/sessions/f/memory", json=confirm, headers=default)
    ).status_code == 403
    done = (await client.post("/sessions/f/memory", json=confirm, headers=full)).json()
    assert done["result"]["status"] == "deleted" and done["result"]["chunks_deleted"] == 1

    rows = await connection.scalar(
        text("SELECT count(*) FROM chunks WHERE session_id = 'acme/f' AND id = :id"),
        {"id": chunk_id},
    )
    vectors = await connection.scalar(
        text("SELECT count(embedding) FROM chunks WHERE id = :id"), {"id": chunk_id}
    )
    assert rows == 0 and vectors == 0
    assert await tables_holding(connection, "Zorblax") == []
    assert await tables_holding(connection, "staging database password") == []
    audit = await connection.scalar(
        text("SELECT count(*) FROM events WHERE session_id = 'acme/f' AND kind = 'forget'")
    )
    assert audit == 1
    after = (await memory(client, "f", full, type="recall", query="Zorblax-4471")).json()
    assert after["result"]["no_match"]
    replay = (await client.post("/sessions/f/memory", json=confirm, headers=full)).json()
    assert replay["error"]["code"] == "forget_request_not_found"
    nxt = await client.post("/sessions/f/turn", json=turn_body(user("go on")), headers=full)
    assert nxt.status_code == 200 and "Zorblax" not in nxt.text


async def test_a_retry_after_a_forget_is_refused_and_never_stored_twice(
    client: httpx.AsyncClient, connection: AsyncConnection, full: dict[str, str]
) -> None:
    first = turn_body(user(SECRET), context_window=WINDOW)
    retry_headers = {**full, "Idempotency-Key": "the-first-turn"}
    answered = await client.post("/sessions/late/turn", json=first, headers=retry_headers)
    assert answered.status_code == 200
    for t in range(40):
        body = turn_body(user(f"turn {t} " + words(60, "chat")))
        assert (await client.post("/sessions/late/turn", json=body, headers=full)).is_success
    found = (await memory(client, "late", full, type="recall", query="Zorblax-4471")).json()
    chunk_id = found["result"]["results"][0]["chunk_id"]
    pending = (await memory(client, "late", full, type="forget", chunk_id=chunk_id)).json()
    confirm = {"type": "forget", "confirm": pending["result"]["pending_id"]}
    assert (await memory(client, "late", full, **confirm)).status_code == 200
    before = await session_rows(connection, "late", "acme")
    assert before["idempotency"] and before["messages"]  # the record stays, without its answer

    retried = await client.post("/sessions/late/turn", json=first, headers=retry_headers)
    assert retried.status_code == 409 and retried.json()["error"]["code"] == "replay_forgotten"
    assert await session_rows(connection, "late", "acme") == before
    assert await tables_holding(connection, "Zorblax") == []


async def test_forgetting_an_oversize_message_replaces_its_stub_in_the_window(
    client: httpx.AsyncClient, connection: AsyncConnection, full: dict[str, str]
) -> None:
    dump = "\n".join([words(40, "log"), SECRET, *(words(40, "log") for _ in range(30))])
    body = turn_body(user(dump), context_window=WINDOW)
    turn = (await client.post("/sessions/big/turn", json=body, headers=full)).json()
    [chunk_id] = turn["offload"]["oversize_chunk_ids"]
    pending = (await memory(client, "big", full, type="forget", chunk_id=chunk_id)).json()
    confirm = {"type": "forget", "confirm": pending["result"]["pending_id"]}
    assert (await client.post("/sessions/big/memory", json=confirm, headers=full)).is_success
    assert await tables_holding(connection, "Zorblax") == []
    nxt = (
        await client.post("/sessions/big/turn", json=turn_body(user("go on")), headers=full)
    ).json()
    assert nxt["messages"][-2] == {
        "role": "user",
        "content": f"[content removed by a forget request; it was stored as {chunk_id}]",
    }


STRICT_FIELDS = (
    "query",
    "top_k",
    "text",
    "tags",
    "until_tokens",
    "chunk_id",
    "turn_start",
    "turn_end",
    "confirm",
)


def strict(**given: Any) -> dict[str, Any]:
    """A call as strict function-calling sends it: every field, null where unused."""
    return {"type": None, **dict.fromkeys(STRICT_FIELDS), **given}


async def test_strict_mode_nulls_are_ignored_for_every_type(
    client: httpx.AsyncClient, full: dict[str, str]
) -> None:
    await converse(client, "strict", full)
    for call in (
        strict(type="help"),
        strict(type="status"),
        strict(type="recall", query="Zorblax-4471"),
        strict(type="remember", text="Only ship from the Suzhou warehouse."),
        strict(type="offload"),
    ):
        response = await memory(client, "strict", full, **call)
        assert response.status_code == 200, (call["type"], response.text)
        assert response.json()["type"] == call["type"]
    found = await memory(client, "strict", full, **strict(type="recall", query="Zorblax-4471"))
    chunk_id = found.json()["result"]["results"][0]["chunk_id"]
    pending = await memory(client, "strict", full, **strict(type="forget", chunk_id=chunk_id))
    assert pending.status_code == 200 and pending.json()["result"]["status"] == "pending"
    untyped = await memory(client, "strict", full, **strict())
    assert untyped.status_code == 422 and untyped.json()["error"]["code"] == "unknown_type"


BAD_CALLS: list[tuple[str, dict[str, Any], int, str]] = [
    ("unknown type", {"type": "erase"}, 422, "unknown_type"),
    ("missing type", {"query": "x"}, 422, "unknown_type"),
    ("recall without query", {"type": "recall"}, 422, "invalid_request"),
    ("unknown field", {"type": "status", "verbose": True}, 422, "invalid_request"),
    ("top_k over the limit", {"type": "recall", "query": "x", "top_k": 21}, 422, "over_limit"),
    ("forget naming nothing", {"type": "forget"}, 422, "invalid_forget"),
    ("remember only white space", {"type": "remember", "text": " \n\t "}, 422, "remember_empty"),
    (
        "forget a range past int32",
        {"type": "forget", "turn_start": 2**31, "turn_end": 2**31},
        422,
        "invalid_request",
    ),
    (
        "forget with both",
        {"type": "forget", "chunk_id": "c", "turn_start": 1},
        422,
        "invalid_forget",
    ),
    (
        "forget reversed range",
        {"type": "forget", "turn_start": 5, "turn_end": 2},
        422,
        "invalid_forget",
    ),
    (
        "forget of an unknown chunk",
        {"type": "forget", "chunk_id": "ck_none"},
        404,
        "chunk_not_found",
    ),
    (
        "confirm of an unknown id",
        {"type": "forget", "confirm": "fg_none"},
        404,
        "forget_request_not_found",
    ),
]


@pytest.mark.parametrize(
    ("case", "call", "status", "code"), BAD_CALLS, ids=[c[0] for c in BAD_CALLS]
)
async def test_bad_calls_are_refused_and_write_nothing(
    client: httpx.AsyncClient,
    connection: AsyncConnection,
    full: dict[str, str],
    case: str,
    call: dict[str, Any],
    status: int,
    code: str,
) -> None:
    await client.post(
        "/sessions/bad/turn", json=turn_body(user("hi"), context_window=WINDOW), headers=full
    )
    before = await session_rows(connection, "bad", "acme")
    assert before["sessions"] and before["messages"]  # the rows compared below are there
    response = await memory(client, "bad", full, **call)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    if code == "unknown_type":
        assert "recall" in response.json()["error"]["details"]["valid_types"]
    assert await session_rows(connection, "bad", "acme") == before


async def test_another_tenant_gets_404(
    ctx: ServiceContext, client: httpx.AsyncClient, full: dict[str, str]
) -> None:
    await converse(client, "mine", full)
    other = bearer(await create_key(ctx, "globex", ALL))
    for call in (
        {"type": "help"},
        {"type": "status"},
        {"type": "recall", "query": "Zorblax"},
        {"type": "remember", "text": "x"},
    ):
        response = await memory(client, "mine", other, **call)
        assert response.status_code == 404, call
