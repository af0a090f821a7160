"""POST /sessions/{id}/turn and the read endpoints, over HTTP."""

from __future__ import annotations

import httpx
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.builders import assistant, tool, turn_body, user, words
from tests.integration.helpers import session_rows


async def test_first_turn_creates_the_session_and_returns_the_prompt(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post(
        "/sessions/s1/turn",
        json=turn_body(user("hello there"), system="You are terse.", model="gpt-4o"),
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["turn"] == 1
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hello there"},
    ]
    usage = body["usage"]
    assert usage["context_window"] == 128_000 and usage["reserve_tokens"] == 4096
    assert usage["recall_share_tokens"] == int(0.15 * (128_000 - 4096))
    assert usage["budget"] == 128_000 - 4096  # as the README says: window − reserve
    assert usage["watermark_base"] == usage["budget"] - usage["recall_share_tokens"]
    assert usage["level"] == "normal"
    assert 0 < usage["prompt_tokens"] < 30
    assert body["offload"]["triggered"] is False and body["offload"]["chunk_ids"] == []
    assert body["recall"]["skipped_reason"] == "archive_empty"
    assert set(body["timings_ms"]) >= {"plan", "embed", "db_write", "total"}


async def test_the_session_remembers_system_model_and_window(client: httpx.AsyncClient) -> None:
    await client.post(
        "/sessions/s2/turn", json=turn_body(user("a"), system="rules", context_window=9000)
    )
    second = (await client.post("/sessions/s2/turn", json=turn_body(user("b")))).json()
    assert second["messages"][0] == {"role": "system", "content": "rules"}
    assert second["usage"]["context_window"] == 9000
    assert [m["content"] for m in second["messages"][1:]] == ["a", "b"]


async def test_a_long_conversation_offloads_and_stays_under_the_emergency_line(
    client: httpx.AsyncClient,
) -> None:
    chunk_ids: list[str] = []
    for t in range(60):
        response = await client.post(
            "/sessions/long/turn",
            json=turn_body(user(f"turn {t} " + words(150)), context_window=8000),
        )
        assert response.status_code == 200, response.text
        body = response.json()
        usage = body["usage"]
        limit = 0.95 * usage["watermark_base"] + usage["recall_share_tokens"]
        assert usage["prompt_tokens"] <= min(limit, usage["budget"])
        chunk_ids += body["offload"]["chunk_ids"]
    assert len(chunk_ids) >= 2
    chunk = (await client.get(f"/sessions/long/chunks/{chunk_ids[0]}")).json()
    assert chunk["raw_text"].startswith("[turn 1 · user") and "turn 0 lorem0" in chunk["raw_text"]
    status = (await client.get("/sessions/long/status")).json()
    assert status["turns"] == 60 and status["counts"]["chunks"] == len(chunk_ids)
    assert status["last_offload"]["triggered"] is True
    assert status["level"] in {"normal", "offload"} and status["watermark"] < 0.95


async def test_a_huge_tool_output_is_stubbed_and_fetchable_by_chunk_id(
    client: httpx.AsyncClient,
) -> None:
    log = "\n".join(f"2026-11-30 12:00:{i % 60:02d} INFO step {i} ok" for i in range(3000))
    body = turn_body(
        user("run the job"), assistant(None, [("c1", "run_job")]), tool("c1", log), model="gpt-4o"
    )
    response = (await client.post("/sessions/tools/turn", json=body)).json()
    (chunk_id,) = response["offload"]["oversize_chunk_ids"]
    stub = response["messages"][-1]
    assert stub["role"] == "tool" and stub["tool_call_id"] == "c1"
    assert chunk_id in stub["content"] and "step 0 ok" in stub["content"]
    assert "step 2999 ok" in stub["content"] and "step 1500 ok" not in stub["content"]
    chunk = (await client.get(f"/sessions/tools/chunks/{chunk_id}")).json()
    assert log in chunk["raw_text"] and chunk["kind"] == "oversize"


async def test_a_retried_turn_returns_the_first_response_and_stores_nothing_twice(
    client: httpx.AsyncClient, connection: AsyncConnection
) -> None:
    body = turn_body(user("pay invoice 17"), model="gpt-4o")
    headers = {"Idempotency-Key": "turn-1"}
    first = await client.post("/sessions/idem/turn", json=body, headers=headers)
    again = await client.post("/sessions/idem/turn", json=body, headers=headers)
    assert again.status_code == 200 and again.json() == first.json()
    rows = await session_rows(connection, "idem")
    assert len(rows["messages"]) == 1 and len(rows["events"]) == 1
    other = await client.post("/sessions/idem/turn", json=turn_body(user("other")), headers=headers)
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert await session_rows(connection, "idem") == rows


async def test_observed_prompt_tokens_calibrate_the_estimate(client: httpx.AsyncClient) -> None:
    first = (
        await client.post("/sessions/cal/turn", json=turn_body(user(words(200)), model="gpt-4o"))
    ).json()
    real = first["usage"]["estimated_prompt_tokens"] * 2
    second = (
        await client.post(
            "/sessions/cal/turn", json=turn_body(user("next"), observed_prompt_tokens=real)
        )
    ).json()
    assert second["usage"]["calibration_ratio"] > 1.2
    assert second["usage"]["prompt_tokens"] > second["usage"]["estimated_prompt_tokens"]


async def test_status_and_chunk_of_unknown_ids_are_404(client: httpx.AsyncClient) -> None:
    missing = await client.get("/sessions/nobody/status")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "session_not_found"
    await client.post("/sessions/known/turn", json=turn_body(user("hi"), model="gpt-4o"))
    no_chunk = await client.get("/sessions/known/chunks/ck_missing")
    assert no_chunk.status_code == 404 and no_chunk.json()["error"]["code"] == "chunk_not_found"


async def test_health_readiness_and_metrics(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = (await client.get("/readyz")).json()
    assert ready["status"] == "ready"
    engine = ready["engine"]  # the embedded engine the suite runs on
    assert engine["postgres"].startswith("18.") and engine["vector"] >= "0.8"
    assert engine["lexical"] == "tsvector"
    await client.post("/sessions/m/turn", json=turn_body(user("hi"), model="gpt-4o"))
    metrics = (await client.get("/metrics")).text
    assert 'ebbtide_turns_total{level="normal"}' in metrics


async def test_turn_and_status_show_the_active_facts_with_their_sources(
    client: httpx.AsyncClient,
) -> None:
    body = turn_body(user("只查华东仓，只看缺货商品。"), model="gpt-4o")
    turn = (await client.post("/sessions/facts/turn", json=body)).json()
    assert [(f["kind"], f["text"], f["source_turn"]) for f in turn["notes"]["facts"]] == [
        ("constraint", "只查华东仓", 1),
        ("constraint", "只看缺货商品", 1),
    ]
    # The first turn that gives the notes something to say renders them (once, before any
    # offload): the constraints are in C2 from the start.
    assert turn["notes"]["updated"] is True
    assert "只查华东仓" in turn["notes"]["text"] and "只看缺货商品" in turn["notes"]["text"]
    status = (await client.get("/sessions/facts/status")).json()
    assert [f["text"] for f in status["facts"]] == ["只查华东仓", "只看缺货商品"]
    assert all(f["id"] is not None and f["source_seq"] == 1 for f in status["facts"])


async def test_what_a_new_user_states_is_kept_as_facts_from_the_first_turn(
    client: httpx.AsyncClient,
) -> None:
    """The five messages of issue 33, each to a fresh session: what each states is a fact
    with its source, and in the notes from that turn on."""
    said = {
        "We agreed: the pilot budget is 48,500 euros and the vendor is Kessler Logistics.": [
            ("amount", "48500 EUR"),
            ("party", "Kessler Logistics"),
        ],
        "Priya Raman handles the customs paperwork; her deadline is 14 March.": [
            ("party", "Priya Raman"),
            ("date", "2027-03-14"),
        ],
        "预算定为三万二千元，供应商选顺丰，张伟负责报关，截止日期是3月14日。": [
            ("amount", "32000 CNY"),
            ("party", "顺丰"),
            ("party", "张伟"),
            ("date", "2027-03-14"),
        ],
        "Let's go with option B, the rail route via Duisburg, instead of trucking.": [
            ("decision", None)
        ],
        "Please never ship hazardous goods by air.": [("constraint", None)],
    }
    for index, (text, expected) in enumerate(said.items()):
        body = turn_body(user(text), model="gpt-4o")
        body["messages"][0]["created_at"] = "2027-02-01T09:00:00Z"
        turn = (await client.post(f"/sessions/said-{index}/turn", json=body)).json()
        facts = turn["notes"]["facts"]
        assert [(f["kind"], f["value"]) for f in facts] == expected, text
        assert all(f["source_turn"] == 1 and f["source_seq"] == 1 for f in facts)
        assert turn["notes"]["updated"] and turn["notes"]["text"]
        for _, value in expected:
            assert value is None or value in turn["notes"]["text"]
