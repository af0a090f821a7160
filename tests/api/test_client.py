"""The typed client against the service: the async client in-process, the sync client
against a live `ebbtide serve` with keys. Every answer parses into its model."""

from __future__ import annotations

import httpx

from ebbtide.client import AsyncEbbtide, Ebbtide, EbbtideError
from tests.api.live import LiveServer


async def test_the_async_client_runs_a_conversation_and_a_memory_call(
    client: httpx.AsyncClient,
) -> None:
    ebbtide = AsyncEbbtide("http://ebbtide.test", http=client)
    first = await ebbtide.turn(
        "c1",
        [{"role": "user", "content": "Only ship from the Ningbo warehouse."}],
        model="gpt-4o",
        system="You plan shipments.",
    )
    assert first.turn == 1 and first.messages[-1]["content"].startswith("Only ship")
    assert first.usage.context_window == 128_000 and first.usage.level == "normal"
    remembered = await ebbtide.remember("c1", "The pallet count is 48.")
    assert remembered.chunk_id
    found = await ebbtide.recall("c1", "The pallet count", top_k=3)
    assert found.results and "48" in found.results[0].text
    status = await ebbtide.status("c1")
    assert status.turns == 1 and status.counts.window_messages == 1
    chunk = await ebbtide.chunk("c1", remembered.chunk_id)
    assert "48" in chunk.raw_text
    tools = await ebbtide.memory_tool()
    assert tools.openai["function"]["name"] == "memory" and "recall" in tools.types
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "memory", "arguments": '{"type": "status"}'},
    }
    answered = await ebbtide.run_memory_call("c1", call)
    assert answered is not None and answered["tool_call_id"] == "call_1" and answered["content"]
    forbidden = await ebbtide.run_memory_call(
        "c1", {"type": "tool_use", "id": "t1", "name": "memory", "input": {"type": "offload"}}
    )
    assert forbidden is not None and forbidden["is_error"]
    assert await ebbtide.run_memory_call("c1", {"type": "tool_use", "id": "t", "name": "x"}) is None
    carried = await ebbtide.turn(
        "c2",
        [{"role": "user", "content": "Same rules for the new route."}],
        model="gpt-4o",
        carry_facts={"from": "c1", "ids": [f.id for f in status.facts]},
    )
    assert [(f.carried_from, f.kind) for f in carried.notes.facts] == [("c1", "constraint")]
    try:
        await ebbtide.status("no-such-session")
    except EbbtideError as error:
        assert error.status == 404 and error.code == "session_not_found"
    else:
        raise AssertionError("an unknown session answered")


def test_the_sync_client_with_a_key_gets_a_retried_turn_answered_once(
    keys_and_server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, keys = keys_and_server
    messages = [{"role": "user", "content": "Draft the Q3 budget."}]
    with Ebbtide(live.base, api_key=keys["default"]) as ebbtide:
        first = ebbtide.turn("client-sync", messages, model="gpt-4o", idempotency_key="turn-1")
        again = ebbtide.turn("client-sync", messages, model="gpt-4o", idempotency_key="turn-1")
        assert again == first
        assert ebbtide.status("client-sync").turns == 1
    with Ebbtide(live.base) as anonymous:
        try:
            anonymous.status("client-sync")
        except EbbtideError as error:
            assert error.status == 401
        else:
            raise AssertionError("no key, and an answer")
