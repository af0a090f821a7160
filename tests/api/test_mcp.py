"""The memory tool over MCP, end to end with the SDK's own client: streamable HTTP at `/mcp`
of a running `ebbtide serve`, and stdio through `ebbtide mcp`."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.core import memory_tool
from app.core.memory_tool import MemoryType
from app.store.database import async_url
from tests.api.live import LiveServer
from tests.builders import HASH_RECALL, turn_body, user, words

SECRET = "The staging database password is Zorblax-4471, do not share it."


def converse(base: str, key: str, session: str) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    bodies = [turn_body(user(SECRET), context_window=4000)] + [
        turn_body(user(f"turn {t} " + words(60, "chat"))) for t in range(40)
    ]
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        for body in bodies:
            assert client.post(f"/sessions/{session}/turn", json=body).status_code == 200


def open_session(base: str, key: str, session: str) -> None:
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as client:
        response = client.post(
            f"/sessions/{session}/turn", json=turn_body(user("hello"), context_window=4000)
        )
        assert response.status_code == 200


async def chunk_rows(url: str, chunk_id: str) -> int:
    engine = create_async_engine(async_url(url))
    try:
        async with engine.connect() as connection:
            query = text("SELECT count(*) FROM chunks WHERE id = :id")
            return int(await connection.scalar(query, {"id": chunk_id}) or 0)
    finally:
        await engine.dispose()


@asynccontextmanager
async def over_http(live: LiveServer, key: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(f"{live.base}/mcp", http_client=http)) as client,
    ):
        yield client


async def call(client: Client, **arguments: Any) -> tuple[str, dict[str, Any] | None, bool]:
    result = await client.call_tool("memory", arguments)
    return result.content[0].text, result.structured_content, bool(result.is_error)  # type: ignore[union-attr]


async def test_every_type_over_streamable_http(
    keys_and_server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, keys = keys_and_server
    await asyncio.to_thread(converse, live.base, keys["full"], "mcp-http")
    async with over_http(live, keys["full"]) as client:
        tools = await client.list_tools()
        assert [t.name for t in tools.tools] == ["memory"]
        schema = tools.tools[0].input_schema
        assert "session_id" in schema["required"]
        # the MCP signature lists the types and arguments by hand: it must follow the tool's
        assert schema["properties"]["type"]["enum"] == [t.value for t in MemoryType]
        assert set(memory_tool.parameters(list(MemoryType))["properties"]) <= set(
            schema["properties"]
        )

        help_text, _, _ = await call(client, session_id="mcp-http", type="help")
        assert "forget" in help_text and "no match" in help_text
        _, status, _ = await call(client, session_id="mcp-http", type="status")
        assert status is not None and status["result"]["counts"]["chunks"] > 0
        found_text, found, _ = await call(
            client, session_id="mcp-http", type="recall", query="Zorblax-4471"
        )
        assert SECRET in found_text and found is not None
        chunk_id = found["result"]["results"][0]["chunk_id"]
        stored_text, _, _ = await call(
            client, session_id="mcp-http", type="remember", text="Always answer in English."
        )
        assert stored_text.startswith("stored as ck_")
        secret = next(f for f in status["result"]["facts"] if f["value"] == "Zorblax-4471")
        await asyncio.to_thread(open_session, live.base, keys["full"], "mcp-carry")
        carried_text, carried, _ = await call(
            client,
            session_id="mcp-carry",
            type="carry",
            from_session="mcp-http",
            fact_ids=[secret["id"]],
        )
        assert carried is not None and carried["result"]["carried"] == [secret["id"]]
        assert carried_text.startswith("carried 1 facts from session mcp-http")
        offload_text, _, _ = await call(
            client, session_id="mcp-http", type="offload", until_tokens=500
        )
        assert "next turn" in offload_text

        _, pending, _ = await call(client, session_id="mcp-http", type="forget", chunk_id=chunk_id)
        assert pending is not None and pending["result"]["status"] == "pending"
        assert await chunk_rows(live.database_url, chunk_id) == 1
        done_text, _, _ = await call(
            client, session_id="mcp-http", type="forget", confirm=pending["result"]["pending_id"]
        )
        assert done_text == f"deleted 1 chunks: {chunk_id}"
    assert await chunk_rows(live.database_url, chunk_id) == 0


async def test_scopes_and_bad_calls_over_http_are_tool_errors(
    keys_and_server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, keys = keys_and_server
    await asyncio.to_thread(converse, live.base, keys["full"], "mcp-scopes")
    async with over_http(live, keys["default"]) as client:
        refused, _, error = await call(client, session_id="mcp-scopes", type="forget", chunk_id="c")
        assert error and "forbidden: this key lacks" in refused
        unknown, _, error = await call(client, session_id="mcp-scopes", type="erase")
        assert error and "'help', 'recall'" in unknown and "'forget'" in unknown
        missing, _, error = await call(client, session_id="nobody", type="status")
        assert error and "session_not_found" in missing
        unstorable, _, error = await call(
            client, session_id="mcp-scopes", type="remember", text="the code is 7731 \x00"
        )
        assert error and "invalid_request" in unstorable and "NUL" in unstorable
    async with over_http(live, "ebt_wrong") as client:
        denied, _, error = await call(client, session_id="mcp-scopes", type="status")
        assert error and "unauthenticated" in denied


def test_the_mcp_path_answers_anything_but_post_at_once(
    keys_and_server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, keys = keys_and_server
    stream = {"Accept": "text/event-stream"}
    for headers in (stream, {**stream, "Authorization": f"Bearer {keys['full']}"}):
        for method in ("GET", "DELETE"):
            response = httpx.request(method, f"{live.base}/mcp", headers=headers, timeout=5)
            assert response.status_code == 405 and response.headers["Allow"] == "POST"
            assert response.json()["error"]["code"] == "method_not_allowed"


@asynccontextmanager
async def over_stdio(live: LiveServer, key: str) -> AsyncIterator[Client]:
    """`ebbtide mcp` as a subprocess, on the served database, with the key in its environment.
    (Entered inside the test: anyio's scopes must close in the task that opened them.)"""
    env = {
        **os.environ,
        "DATABASE_URL": live.database_url,
        "EBBTIDE_EMBEDDER__KIND": "hash",
        **{f"EBBTIDE_RECALL__{name.upper()}": str(value) for name, value in HASH_RECALL.items()},
        "EBBTIDE_API_KEY": key,
    }
    server = StdioServerParameters(command=sys.executable, args=["-m", "app.cli", "mcp"], env=env)
    async with Client(server) as client:
        yield client


async def test_every_type_over_stdio(
    keys_and_server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, keys = keys_and_server
    await asyncio.to_thread(converse, live.base, keys["full"], "mcp-stdio")
    async with over_stdio(live, keys["default"]) as stdio:
        await _call_every_type_with_the_default_key(stdio)


async def _call_every_type_with_the_default_key(stdio: Client) -> None:
    help_text, _, _ = await call(stdio, session_id="mcp-stdio", type="help")
    assert "recall" in help_text and "forget" not in help_text.split("Types you may call:")[1]
    _, status, _ = await call(stdio, session_id="mcp-stdio", type="status")
    assert status is not None and status["result"]["turns"] == 41
    found_text, _, _ = await call(stdio, session_id="mcp-stdio", type="recall", query="Zorblax")
    assert SECRET in found_text
    first, _, _ = await call(
        stdio, session_id="mcp-stdio", type="remember", text="Use metric units."
    )
    again, _, _ = await call(
        stdio, session_id="mcp-stdio", type="remember", text="Use metric units."
    )
    assert first.startswith("stored as") and again.startswith("already stored as")
    for denied_type in ("offload", "forget"):
        refused, _, error = await call(stdio, session_id="mcp-stdio", type=denied_type)
        assert error and "forbidden: this key lacks" in refused, refused
