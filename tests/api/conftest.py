"""The live server shared by the tests that need a whole `ebbtide serve` with keys, and the
proxy in-process with its scripted upstream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from app.bench.upstream import ScriptedUpstream
from app.main import build_context, create_app
from app.providers.fakes import CountingEmbedder
from app.providers.tokenizer import counter_for_model, default_counter
from app.providers.upstream import HttpUpstream
from app.services.auth import create_key
from app.services.context import ServiceContext
from app.store.database import Database
from app.store.migrate import upgrade_head
from tests.api.live import LiveServer, fresh_named_database, live_server, serving_proxy
from tests.api.proxy_helpers import EBBTIDE, TIMEOUT_S, UPSTREAM, Proxy
from tests.conftest import make_settings

ALL = ["memory:read", "memory:write", "memory:offload", "memory:forget"]


@pytest.fixture(scope="session")
def keys_and_server(
    database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LiveServer, dict[str, str]]]:
    """A served database with two keys of tenant acme: all scopes, and the default ones."""
    with fresh_named_database(database_url, "ebbtide_live") as url:
        upgrade_head(url)
        keys = asyncio.run(_make_keys(url))
        with live_server(url, tmp_path_factory.mktemp("live") / "serve.log") as live:
            yield live, keys


async def _make_keys(url: str) -> dict[str, str]:
    ctx = build_context(make_settings(embedder={"kind": "hash"}), url)
    try:
        return {
            "full": await create_key(ctx, "acme", ALL),
            "default": await create_key(ctx, "acme", ["memory:read", "memory:write"]),
        }
    finally:
        await ctx.aclose()


LIVE_PROXY_TIMEOUT_S = 5.0


@pytest.fixture(scope="module")
def live_proxy(
    database_url: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[tuple[str, ScriptedUpstream]]:
    """A real `ebbtide serve` on a database of the module's own, the scripted upstream behind
    its proxy: the server's base URL and the upstream."""
    name = request.module.__name__.rsplit(".", 1)[-1]
    log = tmp_path_factory.mktemp(name) / "serve.log"
    with serving_proxy(database_url, f"ebbtide_{name}", log, LIVE_PROXY_TIMEOUT_S) as served:
        yield served


@pytest.fixture
def upstream() -> ScriptedUpstream:
    return ScriptedUpstream()


@pytest.fixture
async def proxy(
    database: Database, embedder: CountingEmbedder, upstream: ScriptedUpstream
) -> AsyncIterator[Proxy]:
    settings = make_settings(
        proxy={
            "openai_base_url": f"{UPSTREAM}/v1",
            "anthropic_base_url": UPSTREAM,
            "timeout_s": TIMEOUT_S,
        },
    )
    ctx = ServiceContext(
        database=database,
        counter=default_counter(),
        counters=counter_for_model,
        embedder=embedder,
        settings=settings,
        upstream=HttpUpstream(
            timeout_s=TIMEOUT_S,
            connect_timeout_s=TIMEOUT_S,
            # A scripted cut arrives as a body that ends early (this transport cannot drop a
            # connection; the live tests cut a real one).
            transport=httpx.ASGITransport(app=upstream.app, raise_app_exceptions=False),
        ),
    )
    app = create_app(context=ctx)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=EBBTIDE) as http:
        yield Proxy(ctx, upstream, http, app)
