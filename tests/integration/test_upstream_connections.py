"""The proxy's connections to its upstream, against a raw HTTP/1.1 server on loopback that
can close a kept-alive connection as the next request arrives: the race behind the soak's
502s (docs/RELIABILITY.md, "Soak"), made to happen every time."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from prometheus_client import REGISTRY

from app.core.errors import UpstreamUnavailable
from app.core.proxy import UpstreamRequest
from app.loopback import free_loopback_port
from app.providers.upstream import HttpUpstream

ANSWER = json.dumps({"choices": [{"message": {"role": "assistant", "content": "ok"}}]}).encode()
HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    + f"content-length: {len(ANSWER)}\r\n\r\n".encode()
)


@dataclass
class ClosingUpstream:
    """Answers the first request on each connection and keeps it alive; a second request on
    the same connection is read and the connection closed, unanswered."""

    url: str
    connections: int = 0
    answered: int = 0


async def _read_request(reader: asyncio.StreamReader) -> bool:
    """One request off the connection (headers and body); False when the client closed it."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return False
    length = 0
    for line in head.decode("latin-1").split("\r\n"):
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    await reader.readexactly(length)
    return True


@pytest.fixture
async def closing_upstream() -> AsyncIterator[ClosingUpstream]:
    port = free_loopback_port()
    upstream = ClosingUpstream(url=f"http://127.0.0.1:{port}/v1/chat/completions")

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream.connections += 1
        if await _read_request(reader):
            writer.write(HEAD + ANSWER)
            await writer.drain()
            upstream.answered += 1
            await _read_request(reader)  # the next one on this connection: not answered
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", port)
    async with server:
        yield upstream


def _call(url: str) -> UpstreamRequest:
    return UpstreamRequest(url=url, headers=(), body={"model": "m", "messages": []})


def _retries(error: str) -> float:
    sample = "ebbtide_proxy_upstream_retries_total"
    return REGISTRY.get_sample_value(sample, {"error": error}) or 0.0


async def test_a_kept_alive_connection_closed_unanswered_is_tried_again_on_a_new_one(
    closing_upstream: ClosingUpstream,
) -> None:
    upstream = HttpUpstream(timeout_s=5, connect_timeout_s=5)
    before = _retries("RemoteProtocolError")
    try:
        first = await upstream.send(_call(closing_upstream.url))
        second = await upstream.send(_call(closing_upstream.url))  # on the kept connection
    finally:
        await upstream.aclose()
    assert (first.status, second.status) == (200, 200)
    assert json.loads(second.body) == json.loads(ANSWER)
    assert closing_upstream.connections == 2 and closing_upstream.answered == 2
    assert _retries("RemoteProtocolError") == before + 1


async def test_without_retries_the_same_close_is_upstream_unavailable(
    closing_upstream: ClosingUpstream,
) -> None:
    upstream = HttpUpstream(timeout_s=5, connect_timeout_s=5, connection_retries=0)
    try:
        await upstream.send(_call(closing_upstream.url))
        with pytest.raises(UpstreamUnavailable, match="RemoteProtocolError"):
            await upstream.send(_call(closing_upstream.url))
    finally:
        await upstream.aclose()
    assert closing_upstream.answered == 1


async def test_an_idle_connection_past_keepalive_is_not_used_again(
    closing_upstream: ClosingUpstream,
) -> None:
    upstream = HttpUpstream(timeout_s=5, connect_timeout_s=5, keepalive_s=0.05)
    before = _retries("RemoteProtocolError")
    try:
        await upstream.send(_call(closing_upstream.url))
        await asyncio.sleep(0.2)  # four times the keep-alive: the pool drops the connection
        second = await upstream.send(_call(closing_upstream.url))
    finally:
        await upstream.aclose()
    assert second.status == 200
    assert closing_upstream.connections == 2
    assert _retries("RemoteProtocolError") == before  # a new connection, not a retry


async def test_a_refused_connection_is_tried_once_more_then_upstream_unavailable() -> None:
    upstream = HttpUpstream(timeout_s=5, connect_timeout_s=5)
    before = _retries("ConnectError")
    url = f"http://127.0.0.1:{free_loopback_port()}/v1/chat/completions"  # nothing listens
    try:
        with pytest.raises(UpstreamUnavailable, match="ConnectError"):
            await upstream.send(_call(url))
    finally:
        await upstream.aclose()
    assert _retries("ConnectError") == before + 1
