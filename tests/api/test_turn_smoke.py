from __future__ import annotations

import httpx

from tests.builders import turn_body, user, words


async def test_first_turn_creates_session_and_returns_prompt(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/sessions/s1/turn",
        json=turn_body(user("hello there"), system="You are terse.", model="gpt-4o"),
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hello there"},
    ]
    assert body["usage"]["context_window"] == 128_000
    assert body["offload"]["triggered"] is False


async def test_long_conversation_offloads(client: httpx.AsyncClient) -> None:
    triggered = 0
    for i in range(60):
        response = await client.post(
            "/sessions/s2/turn",
            json=turn_body(user(f"turn {i} " + words(150)), context_window=8000),
        )
        assert response.status_code == 200, response.text
        body = response.json()
        triggered += body["offload"]["triggered"]
        assert body["usage"]["prompt_tokens"] <= 0.95 * body["usage"]["budget"]
    assert triggered >= 2
