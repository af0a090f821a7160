"""The proxy in-process: the app on a rolled-back connection, the scripted upstream behind
httpx's ASGI transport, and the real SDKs' async clients pointed at the app."""

from __future__ import annotations

from dataclasses import dataclass

import anthropic
import httpx
import httpx2
import openai
from sqlalchemy import text
from starlette.types import ASGIApp

from app.bench.upstream import ScriptedUpstream
from app.services.context import ServiceContext

UPSTREAM = "http://upstream.test"
EBBTIDE = "http://ebbtide.test"
CLIENT_KEY = "sk-client-secret-4711"
TIMEOUT_S = 1.0
# The smallest Anthropic Messages call: for tests about what happens around it.
MINIMAL_MESSAGES_BODY = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 5,
    "messages": [{"role": "user", "content": "x"}],
}


def _headers(session: str | None, extra: dict[str, str] | None) -> dict[str, str]:
    return {**({"X-Ebbtide-Session": session} if session else {}), **(extra or {})}


@dataclass
class Proxy:
    ctx: ServiceContext
    upstream: ScriptedUpstream
    http: httpx.AsyncClient
    app: ASGIApp

    def http2(self) -> httpx2.AsyncClient:
        """The Anthropic SDK's HTTP client (it is built on `httpx2`, a fork of httpx)."""
        return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=self.app), base_url=EBBTIDE)

    def openai(
        self, session: str | None = "p1", headers: dict[str, str] | None = None
    ) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=f"{EBBTIDE}/v1",
            api_key=CLIENT_KEY,
            http_client=self.http,
            default_headers=_headers(session, headers),
            max_retries=0,
        )

    def anthropic(
        self, session: str | None = "p1", headers: dict[str, str] | None = None
    ) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            base_url=EBBTIDE,
            api_key=CLIENT_KEY,
            http_client=self.http2(),
            default_headers=_headers(session, headers),
            max_retries=0,
        )

    async def stored(self, session: str = "p1") -> list[tuple[int, str, str]]:
        """(seq, role, state) of the session's messages, oldest first."""
        async with self.ctx.database.transaction() as db:
            rows = await db.execute(
                text("SELECT seq, role, state FROM messages WHERE session_id = :key ORDER BY seq"),
                {"key": f"local/{session}"},
            )
            return [(int(seq), role, state) for seq, role, state in rows]
