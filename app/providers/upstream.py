"""The provider API the proxy forwards to, over one pooled httpx client.

No answer at all (refused, reset, a timeout before the status line) raises
`UpstreamUnavailable` / `UpstreamTimeout`; any answer, errors included, comes back as it
came so the client sees the provider's own status and body. Bodies are relayed decoded.

A connection that fails before the status line, other than by a timeout, is tried again on
a new one (`connection_retries` times): nothing has reached the client yet, and the usual
cause is a kept-alive connection the upstream closed as the request went out. Idle
connections are dropped after `keepalive_s`, sooner than common servers drop theirs (five
seconds for uvicorn and Node), which makes that race rarer still.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx

from app import metrics
from app.core.errors import UpstreamTimeout, UpstreamUnavailable
from app.core.proxy import UpstreamReply, UpstreamRequest


def _headers(response: httpx.Response) -> tuple[tuple[str, str], ...]:
    return tuple(response.headers.multi_items())


class _Stream:
    """An open streamed answer; `aclose` returns the connection to the pool."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status = response.status_code
        self.headers = _headers(response)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives. A cut or a stall past the timeout raises
        `UpstreamUnavailable` / `UpstreamTimeout`."""
        try:
            async for chunk in self._response.aiter_bytes():
                yield chunk
        except httpx.TimeoutException as error:
            raise UpstreamTimeout("the upstream stopped sending mid-stream") from error
        except httpx.TransportError as error:
            raise UpstreamUnavailable("the upstream cut the stream") from error

    async def read(self) -> bytes:
        try:
            return await self._response.aread()
        except httpx.TimeoutException as error:
            raise UpstreamTimeout("the upstream stopped sending its answer") from error
        except httpx.TransportError as error:
            raise UpstreamUnavailable("the upstream cut its answer") from error

    async def aclose(self) -> None:
        await self._response.aclose()


class HttpUpstream:
    def __init__(
        self,
        *,
        timeout_s: float,
        connect_timeout_s: float,
        keepalive_s: float = 4.0,
        connection_retries: int = 1,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._connection_retries = connection_retries
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            limits=httpx.Limits(keepalive_expiry=keepalive_s),
            transport=transport,
            # The client's own Authorization is forwarded; nothing of the environment is.
            trust_env=False,
        )

    def _request(self, request: UpstreamRequest) -> httpx.Request:
        if request.body is None:
            return self._client.build_request("GET", request.url, headers=request.headers)
        content = json.dumps(request.body, ensure_ascii=False).encode()
        headers = [*request.headers, ("content-type", "application/json")]
        return self._client.build_request("POST", request.url, content=content, headers=headers)

    async def _send(self, request: UpstreamRequest, *, stream: bool) -> httpx.Response:
        retries_left = self._connection_retries
        while True:
            try:
                return await self._client.send(self._request(request), stream=stream)
            except httpx.TimeoutException as error:
                # Not tried again: the upstream may be working on it, and the wait would double.
                raise UpstreamTimeout("the upstream did not answer in time") from error
            except httpx.TransportError as error:
                if retries_left > 0:
                    retries_left -= 1
                    metrics.UPSTREAM_RETRIES.labels(error=type(error).__name__).inc()
                    continue
                raise UpstreamUnavailable(
                    f"the upstream could not be reached ({type(error).__name__})"
                ) from error

    async def send(self, request: UpstreamRequest) -> UpstreamReply:
        response = await self._send(request, stream=True)
        stream = _Stream(response)
        try:
            body = await stream.read()
        finally:
            await stream.aclose()
        return UpstreamReply(response.status_code, stream.headers, body)

    async def open_stream(self, request: UpstreamRequest) -> _Stream:
        return _Stream(await self._send(request, stream=True))

    async def aclose(self) -> None:
        await self._client.aclose()
