"""Bearer keys, tenants and scopes (docs/DESIGN.md §11)."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from app.cli import check_bind, is_loopback
from app.core.scopes import InvalidTenantName
from app.services.auth import UnknownScope, create_key, keys_exist, revoke_key
from app.services.context import ServiceContext
from tests.builders import turn_body, user
from tests.integration.helpers import session_rows

TURN = turn_body(user("Only ship from the Suzhou warehouse."), model="gpt-4o")


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_without_keys_the_service_is_in_development_mode(
    client: httpx.AsyncClient,
) -> None:
    assert (await client.post("/sessions/dev/turn", json=TURN)).status_code == 200


async def test_once_a_key_exists_every_call_needs_one(
    ctx: ServiceContext, client: httpx.AsyncClient
) -> None:
    key = await create_key(ctx, "acme", ["memory:read", "memory:write"])
    assert key.startswith("ebt_") and len(key) > 30
    missing = await client.post("/sessions/a/turn", json=TURN)
    assert missing.status_code == 401 and missing.headers["WWW-Authenticate"] == "Bearer"
    assert missing.json()["error"]["code"] == "unauthenticated"
    wrong = await client.post("/sessions/a/turn", json=TURN, headers=bearer("ebt_nope"))
    assert wrong.status_code == 401
    ok = await client.post("/sessions/a/turn", json=TURN, headers=bearer(key))
    assert ok.status_code == 200
    assert (await client.get("/sessions/a/status", headers=bearer(key))).status_code == 200


async def test_another_tenants_session_is_not_found_for_every_route(
    ctx: ServiceContext, client: httpx.AsyncClient
) -> None:
    acme = await create_key(ctx, "acme", ["memory:read", "memory:write"])
    globex = await create_key(ctx, "globex", ["memory:read", "memory:write"])
    first = await client.post("/sessions/acme-1/turn", json=TURN, headers=bearer(acme))
    assert first.status_code == 200
    for method, path, body in [
        ("GET", "/sessions/acme-1/status", None),
        ("GET", "/sessions/acme-1/events", None),
        ("GET", "/sessions/acme-1/chunks/ck_any", None),
        ("POST", "/sessions/acme-1/recall", {"query": "warehouse"}),
        ("POST", "/sessions/acme-1/remember", {"text": "Only ship from Guangzhou."}),
        ("POST", "/sessions/acme-1/memory", {"type": "help"}),
    ]:
        response = await client.request(method, path, json=body, headers=bearer(globex))
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "session_not_found"
        assert "Suzhou" not in response.text


async def test_two_tenants_use_the_same_session_id_without_meeting(
    ctx: ServiceContext, client: httpx.AsyncClient, connection: AsyncConnection
) -> None:
    acme = bearer(await create_key(ctx, "acme", ["memory:read", "memory:write"]))
    globex = bearer(await create_key(ctx, "globex", ["memory:read", "memory:write"]))
    said = {"acme": "Ship only from Suzhou.", "globex": "Ship only from Rotterdam."}
    for tenant, headers in (("acme", acme), ("globex", globex)):  # globex "squats" second
        body = {"messages": [{"role": "user", "content": said[tenant]}], "model": "gpt-4o"}
        turn = await client.post("/sessions/shared/turn", json=body, headers=headers)
        assert turn.status_code == 200 and turn.json()["turn"] == 1, turn.text
        assert turn.json()["session_id"] == "shared"
    for tenant, headers, other in (("acme", acme, "globex"), ("globex", globex, "acme")):
        status = (await client.get("/sessions/shared/status", headers=headers)).json()
        assert status["session_id"] == "shared" and status["turns"] == 1
        facts = " ".join(f["text"] for f in status["facts"])
        assert said[tenant].rstrip(".") in facts and said[other].rstrip(".") not in facts
        page = (await client.get("/sessions/shared/events", headers=headers)).text
        again = {"messages": [{"role": "user", "content": "and?"}]}
        prompt = (await client.post("/sessions/shared/turn", json=again, headers=headers)).text
        assert said[tenant] in prompt and said[other] not in prompt + page
    for tenant in ("acme", "globex"):
        rows = await session_rows(connection, "shared", tenant)
        assert len(rows["sessions"]) == 1 and len(rows["messages"]) == 2


async def test_a_key_without_the_scope_is_forbidden_and_writes_nothing(
    ctx: ServiceContext, client: httpx.AsyncClient
) -> None:
    reader = await create_key(ctx, "acme", ["memory:read"])
    refused = await client.post("/sessions/ro/turn", json=TURN, headers=bearer(reader))
    assert refused.status_code == 403 and refused.json()["error"]["details"] == {
        "scope": "memory:write"
    }
    status = await client.get("/sessions/ro/status", headers=bearer(reader))
    assert status.status_code == 404  # the refused turn created nothing
    admin = await create_key(ctx, "acme", ["admin"])
    assert (
        await client.post("/sessions/ro/turn", json=TURN, headers=bearer(admin))
    ).status_code == 200


async def test_a_revoked_key_stops_working(ctx: ServiceContext, client: httpx.AsyncClient) -> None:
    key = await create_key(ctx, "acme", ["memory:read", "memory:write"])
    other = await create_key(ctx, "acme", ["memory:read"])
    assert await revoke_key(ctx, key[:12]) == 1
    assert (
        await client.post("/sessions/r/turn", json=TURN, headers=bearer(key))
    ).status_code == 401
    assert await revoke_key(ctx, other) == 1  # by the whole key too
    assert await revoke_key(ctx, other) == 0
    # no active key left: development mode again
    assert (await client.post("/sessions/r/turn", json=TURN)).status_code == 200


async def test_unknown_scopes_are_refused(ctx: ServiceContext) -> None:
    with pytest.raises(UnknownScope):
        await create_key(ctx, "acme", ["memory:everything"])


async def test_a_tenant_has_one_name_however_it_is_written(
    ctx: ServiceContext, client: httpx.AsyncClient
) -> None:
    plain = await create_key(ctx, "tenantA", ["memory:read", "memory:write"])
    padded = await create_key(ctx, " tenantA ", ["memory:read"])
    wide = await create_key(ctx, "ｔｅｎａｎｔＡ", ["memory:read"])  # full-width letters
    assert (
        await client.post("/sessions/one/turn", json=TURN, headers=bearer(plain))
    ).status_code == 200
    for key in (padded, wide):  # the same tenant: its session is theirs to read
        status = await client.get("/sessions/one/status", headers=bearer(key))
        assert status.status_code == 200
    for refused in ("", "   ", "acme/ops", "ten ant", "café", "-lead", "x" * 65):
        with pytest.raises(InvalidTenantName):
            await create_key(ctx, refused, ["memory:read"])
    assert await keys_exist(ctx)


def test_development_mode_serves_loopback_only() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.internal")
    check_bind("127.0.0.1", keys_exist=False)
    check_bind("0.0.0.0", keys_exist=True)
    with pytest.raises(SystemExit, match=r"refusing to listen on 0\.0\.0\.0"):
        check_bind("0.0.0.0", keys_exist=False)
