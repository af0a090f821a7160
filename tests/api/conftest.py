"""The live server shared by the tests that need a whole `ebbtide serve` with keys."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from app.main import build_context
from app.services.auth import create_key
from app.store.migrate import upgrade_head
from tests.api.live import LiveServer, fresh_named_database, live_server
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
