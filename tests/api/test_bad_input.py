"""Bad input: a clear 4xx with {"error": {"code", "message", "details"}} and nothing written."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.main import create_app
from app.services.context import ServiceContext
from tests.builders import turn_body, user
from tests.conftest import make_settings
from tests.integration.helpers import session_rows

GOOD = {"role": "user", "content": "hello"}

BAD_TURNS: list[tuple[str, Any, int, str]] = [
    ("unknown model without window", {"messages": [GOOD], "model": "my-llm"}, 422, "unknown_model"),
    ("no model and no window", {"messages": [GOOD]}, 422, "unknown_model"),
    ("empty messages", {"messages": [], "model": "gpt-4o"}, 422, "invalid_request"),
    ("missing messages", {"model": "gpt-4o"}, 422, "invalid_request"),
    (
        "unknown role",
        {"messages": [{"role": "wizard", "content": "x"}], "model": "gpt-4o"},
        422,
        "invalid_request",
    ),
    (
        "system prompt twice",
        {"messages": [{"role": "system", "content": "x"}, GOOD], "system": "y", "model": "gpt-4o"},
        422,
        "conflicting_system_prompt",
    ),
    (
        "unknown format",
        {"format": "gemini", "messages": [GOOD], "model": "gpt-4o"},
        422,
        "invalid_request",
    ),
    (
        "anthropic tool_use in a user message",
        {
            "format": "anthropic",
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
                }
            ],
            "model": "claude-sonnet-4-5",
        },
        422,
        "invalid_request",
    ),
    (
        "responses call without its id",
        {
            "format": "responses",
            "messages": [{"type": "function_call", "name": "f", "arguments": "{}"}],
            "model": "gpt-4o",
        },
        422,
        "invalid_request",
    ),
    (
        "tool result without its call",
        {
            "messages": [GOOD, {"role": "tool", "tool_call_id": "c9", "content": "r"}],
            "model": "gpt-4o",
        },
        422,
        "orphan_tool_result",
    ),
    (
        "tool message without tool_call_id",
        {"messages": [{"role": "tool", "content": "r"}], "model": "gpt-4o"},
        422,
        "invalid_request",
    ),
    (
        "user message without content",
        {"messages": [{"role": "user"}], "model": "gpt-4o"},
        422,
        "invalid_request",
    ),
    (
        "unknown field",
        {"messages": [GOOD], "model": "gpt-4o", "temperature": 1},
        422,
        "invalid_request",
    ),
    ("window too small", {"messages": [GOOD], "context_window": 10}, 422, "invalid_request"),
    (
        "reserve fills the window",
        {"messages": [GOOD], "context_window": 1000, "reserve_tokens": 1000},
        422,
        "invalid_window",
    ),
    (
        "policy out of order",
        {"messages": [GOOD], "model": "gpt-4o", "policy": {"target_ratio": 0.9}},
        422,
        "invalid_policy",
    ),
    (
        "bad recall mode",
        {"messages": [GOOD], "model": "gpt-4o", "recall": "always"},
        422,
        "invalid_request",
    ),
    ("too many messages", {"messages": [GOOD] * 65, "model": "gpt-4o"}, 422, "too_many_messages"),
    (
        "two tool calls with one id",
        {
            "messages": [
                GOOD,
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "c1", "function": {"name": "a", "arguments": "{}"}},
                        {"id": "c1", "function": {"name": "b", "arguments": "{}"}},
                    ],
                },
            ],
            "model": "gpt-4o",
        },
        422,
        "duplicate_tool_call_id",
    ),
    (
        "NUL in the content",
        {"messages": [{"role": "user", "content": "a\u0000b"}], "model": "gpt-4o"},
        422,
        "invalid_request",
    ),
    (
        "message too long",
        {"messages": [{"role": "user", "content": "x" * 1_000_001}], "model": "gpt-4o"},
        413,
        "message_too_large",
    ),
]


def assert_error_body(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["details"], dict)


@pytest.mark.parametrize(
    ("case", "body", "status", "code"), BAD_TURNS, ids=[case[0] for case in BAD_TURNS]
)
async def test_bad_turn_on_a_new_session_is_rejected_and_writes_nothing(
    client: httpx.AsyncClient,
    connection: AsyncConnection,
    case: str,
    body: Any,
    status: int,
    code: str,
) -> None:
    response = await client.post("/sessions/fresh/turn", json=body)
    assert_error_body(response, status, code)
    assert all(rows == [] for rows in (await session_rows(connection, "fresh")).values())


@pytest.mark.parametrize(
    ("case", "body", "status", "code"), BAD_TURNS[2:], ids=[case[0] for case in BAD_TURNS[2:]]
)
async def test_bad_turn_on_an_existing_session_changes_nothing(
    client: httpx.AsyncClient,
    connection: AsyncConnection,
    case: str,
    body: Any,
    status: int,
    code: str,
) -> None:
    await client.post("/sessions/old/turn", json=turn_body(user("first"), model="gpt-4o"))
    before = await session_rows(connection, "old")
    assert_error_body(await client.post("/sessions/old/turn", json=body), status, code)
    assert await session_rows(connection, "old") == before


async def test_unknown_model_error_names_the_field_to_send(client: httpx.AsyncClient) -> None:
    response = await client.post("/sessions/f/turn", json={"messages": [GOOD], "model": "x1"})
    assert response.json()["error"]["details"] == {"field": "context_window", "model": "x1"}


@pytest.mark.parametrize(
    "body",
    [b'{"messages": [', b'{"messages": "\xff\xfe"}', b"[" * 5000 + b"]" * 5000],
    ids=["truncated", "invalid utf-8", "5000 deep"],
)
async def test_malformed_json_is_a_400(client: httpx.AsyncClient, body: bytes) -> None:
    response = await client.post(
        "/sessions/f/turn", content=body, headers={"Content-Type": "application/json"}
    )
    assert_error_body(response, 400, "malformed_json")


@pytest.mark.parametrize("session", ["has%20space", "%2E", "%2E%2E", "x" * 129])
async def test_invalid_session_id_is_a_422(
    client: httpx.AsyncClient, connection: AsyncConnection, session: str
) -> None:
    response = await client.post(f"/sessions/{session}/turn", json={"messages": [GOOD]})
    assert_error_body(response, 422, "invalid_request")
    total = await connection.scalar(text("SELECT count(*) FROM sessions"))
    assert total == 0


async def test_unknown_route_is_a_404_with_the_error_body(client: httpx.AsyncClient) -> None:
    assert_error_body(await client.get("/nowhere"), 404, "not_found")


@pytest.fixture
async def small_body_client(ctx: ServiceContext) -> AsyncIterator[httpx.AsyncClient]:
    ctx.settings = make_settings(limits={"max_body_bytes": 2_000})
    transport = httpx.ASGITransport(app=create_app(context=ctx))
    async with httpx.AsyncClient(transport=transport, base_url="http://ebbtide.test") as client:
        yield client


async def test_an_over_size_body_is_a_413_and_writes_nothing(
    small_body_client: httpx.AsyncClient, connection: AsyncConnection
) -> None:
    body = turn_body(user("x" * 5_000), model="gpt-4o")
    assert_error_body(
        await small_body_client.post("/sessions/big/turn", json=body), 413, "body_too_large"
    )

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: counted as it streams
        for _ in range(10):
            yield b" " * 500

    streamed = await small_body_client.post(
        "/sessions/big/turn", content=chunked(), headers={"Content-Type": "application/json"}
    )
    assert_error_body(streamed, 413, "body_too_large")
    assert all(rows == [] for rows in (await session_rows(connection, "big")).values())


@pytest.mark.parametrize(
    ("field", "value", "limit"), [("top_k", 21, 20), ("budget_tokens", 4001, 4000)]
)
async def test_recall_over_a_limit_is_a_422_naming_the_limit(
    client: httpx.AsyncClient, connection: AsyncConnection, field: str, value: int, limit: int
) -> None:
    await client.post("/sessions/r/turn", json=turn_body(user("first"), model="gpt-4o"))
    before = await session_rows(connection, "r")
    response = await client.post("/sessions/r/recall", json={"query": "first", field: value})
    assert_error_body(response, 422, "over_limit")
    assert response.json()["error"]["details"] == {"field": field, "limit": limit, "got": value}
    at_limit = await client.post("/sessions/r/recall", json={"query": "first", field: limit})
    assert at_limit.status_code == 200
    assert await session_rows(connection, "r") == before
