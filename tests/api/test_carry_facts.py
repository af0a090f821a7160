"""A new session that starts from confirmed facts (`carry_facts` on `POST /sessions/{id}/turn`):
each carried fact keeps the session and turn it was said in; another tenant's facts, unknown
ids and forgotten facts are refused with nothing written."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.services.auth import create_key
from app.services.context import ServiceContext
from tests.api.test_auth import bearer
from tests.api.test_memory_tool import ALL, converse, memory
from tests.builders import turn_body, user

STATED = "The pilot budget is 48,500 euros and the vendor is Kessler Logistics."
RULE = "Please never ship hazardous goods by air."


@pytest.fixture
async def acme(ctx: ServiceContext) -> dict[str, str]:
    return bearer(await create_key(ctx, "acme", ALL))


@pytest.fixture
async def other(ctx: ServiceContext) -> dict[str, str]:
    return bearer(await create_key(ctx, "globex", ALL))


async def turn(
    client: httpx.AsyncClient, session: str, headers: dict[str, str], text: str, **fields: Any
) -> httpx.Response:
    body = turn_body(user(text), model="gpt-4o", **fields)
    return await client.post(f"/sessions/{session}/turn", json=body, headers=headers)


async def facts_of(client: httpx.AsyncClient, session: str, headers: dict[str, str]) -> Any:
    return (await client.get(f"/sessions/{session}/status", headers=headers)).json()["facts"]


async def test_a_new_session_starts_from_the_facts_it_names(
    client: httpx.AsyncClient, acme: dict[str, str]
) -> None:
    assert (await turn(client, "old", acme, "hello")).status_code == 200
    assert (await turn(client, "old", acme, STATED)).status_code == 200
    assert (await turn(client, "old", acme, RULE)).status_code == 200
    source = {f["value"] or f["text"]: f for f in await facts_of(client, "old", acme)}
    budget, rule = source["48500 EUR"], source[RULE.removesuffix(".")]
    carry = {"from": "old", "ids": [budget["id"], rule["id"]]}

    started = await turn(client, "new", acme, "Let's plan phase two.", carry_facts=carry)
    assert started.status_code == 200, started.text
    body = started.json()
    carried = [f for f in body["notes"]["facts"] if f["carried_from"] == "old"]
    assert [(f["kind"], f["carried_fact_id"], f["source_turn"]) for f in carried] == [
        ("amount", budget["id"], 2),
        ("constraint", rule["id"], 3),
    ]
    notes = body["notes"]["text"]
    assert "48500 EUR" in notes and "(session old, turn 2)" in notes
    assert "never ship hazardous goods by air (session old, turn 3)" in notes
    assert "Kessler" not in notes  # only what was named, never the history

    again = await turn(client, "new", acme, "And phase three.", carry_facts=carry)
    assert again.status_code == 200
    assert len([f for f in await facts_of(client, "new", acme) if f["carried_from"]]) == 2


async def test_unknown_ids_another_tenants_session_and_itself_are_refused(
    client: httpx.AsyncClient, acme: dict[str, str], other: dict[str, str]
) -> None:
    assert (await turn(client, "kept", acme, STATED)).status_code == 200
    ids = [f["id"] for f in await facts_of(client, "kept", acme)]
    refused = [
        (acme, "fresh", {"from": "kept", "ids": [*ids, 999_999]}),
        (other, "fresh", {"from": "kept", "ids": ids}),  # globex has no session "kept"
        (acme, "kept", {"from": "kept", "ids": ids}),
    ]
    for headers, session, carry in refused:
        response = await turn(client, session, headers, "hi", carry_facts=carry)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "facts_not_carried"
    missing = (await turn(client, "fresh", acme, "hi", carry_facts=refused[0][2])).json()
    assert missing["error"]["details"]["fact_ids"] == [999_999]
    for headers in (acme, other):  # nothing was written: the session was never created
        status = await client.get("/sessions/fresh/status", headers=headers)
        assert status.status_code == 404
    malformed = {"from": "kept", "ids": []}
    assert (await turn(client, "fresh", acme, "hi", carry_facts=malformed)).status_code == 422


async def test_a_forgotten_fact_cannot_be_carried(
    client: httpx.AsyncClient, acme: dict[str, str]
) -> None:
    await converse(client, "told", acme)  # the secret is said, then offloaded
    secret = next(f for f in await facts_of(client, "told", acme) if f["value"] == "Zorblax-4471")
    found = (await memory(client, "told", acme, type="recall", query="Zorblax-4471")).json()
    chunk_id = found["result"]["results"][0]["chunk_id"]
    pending = (await memory(client, "told", acme, type="forget", chunk_id=chunk_id)).json()
    confirm = {"type": "forget", "confirm": pending["result"]["pending_id"]}
    assert (await client.post("/sessions/told/memory", json=confirm, headers=acme)).is_success

    carry = {"from": "told", "ids": [secret["id"]]}
    response = await turn(client, "after", acme, "hi", carry_facts=carry)
    assert response.status_code == 422
    assert response.json()["error"]["details"]["fact_ids"] == [secret["id"]]


async def test_the_memory_tool_carries_facts_into_a_session_once(
    ctx: ServiceContext, client: httpx.AsyncClient, acme: dict[str, str], other: dict[str, str]
) -> None:
    assert (await turn(client, "first", acme, STATED)).status_code == 200
    budget = next(f for f in await facts_of(client, "first", acme) if f["kind"] == "amount")
    assert (await turn(client, "second", acme, "Let's plan phase two.")).status_code == 200
    call = {"type": "carry", "from_session": "first", "fact_ids": [budget["id"]]}

    answer = (await client.post("/sessions/second/memory", json=call, headers=acme)).json()
    assert answer["result"]["carried"] == [budget["id"]]
    assert "carried 1 facts from session first" in answer["text"] and "48500 EUR" in answer["text"]
    carried = [f for f in await facts_of(client, "second", acme) if f["carried_from"]]
    assert [(f["carried_from"], f["carried_fact_id"], f["source_turn"]) for f in carried] == [
        ("first", budget["id"], 1)
    ]
    notes = (await turn(client, "second", acme, "Go on.")).json()["notes"]["text"]
    assert "48500 EUR" in notes and "(session first, turn 1)" in notes

    again = (await client.post("/sessions/second/memory", json=call, headers=acme)).json()
    assert again["result"]["carried"] == [] and again["result"]["already_carried"] == [budget["id"]]
    assert len([f for f in await facts_of(client, "second", acme) if f["carried_from"]]) == 1

    assert (await turn(client, "second", other, "globex's own session")).status_code == 200
    across = await client.post("/sessions/second/memory", json=call, headers=other)
    assert across.status_code == 422 and across.json()["error"]["code"] == "facts_not_carried"
    reader = bearer(await create_key(ctx, "acme", ["memory:read"]))
    denied = await client.post("/sessions/second/memory", json=call, headers=reader)
    assert denied.status_code == 403
