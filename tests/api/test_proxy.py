"""The proxy with the real SDKs' async clients (in-process): history reconciliation, replies
recorded, streaming, credentials, usage and upstream faults."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from app.bench.upstream import Call, cut, reply, status
from tests.api.proxy_helpers import CLIENT_KEY, MINIMAL_MESSAGES_BODY, Proxy


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


def texts(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, ensure_ascii=False)


async def test_a_chat_completions_call_goes_upstream_and_its_reply_is_recorded(
    proxy: Proxy,
) -> None:
    client = proxy.openai()
    history: list[Any] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Name a prime."},
    ]
    first = await client.chat.completions.create(model="gpt-4o", messages=history)
    assert first.choices[0].message.content == "ok 1"
    seen = proxy.upstream.last()
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {CLIENT_KEY}"
    assert seen.body["messages"][0] == {"role": "system", "content": "You are terse."}
    assert seen.body["messages"][-1] == {"role": "user", "content": "Name a prime."}
    assert await proxy.stored() == [(1, "user", "window"), (2, "assistant", "window")]

    # The SDK's own reply object goes back in the history: recognised, not stored twice.
    history += [first.choices[0].message.model_dump(), {"role": "user", "content": "Another."}]
    await client.chat.completions.create(model="gpt-4o", messages=history)
    sent = proxy.upstream.last().body["messages"]
    assert roles(sent) == ["system", "user", "assistant", "user"]
    assert sent[2]["content"] == "ok 1"
    assert [row[1] for row in await proxy.stored()] == ["user", "assistant", "user", "assistant"]


async def test_a_streamed_tool_call_is_assembled_recorded_and_its_result_accepted(
    proxy: Proxy,
) -> None:
    proxy.upstream.then(reply("", Call("call_1", "lookup", {"city": "Oslo"})))
    client = proxy.openai()
    history: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
    stream = await client.chat.completions.create(model="gpt-4o", messages=history, stream=True)
    chunks = [chunk async for chunk in stream]
    calls = [c for chunk in chunks for c in (chunk.choices[0].delta.tool_calls or [])]
    assert calls[0].id == "call_1"
    assert all(chunk.choices for chunk in chunks), "the usage chunk the proxy asked for leaked"
    assert proxy.upstream.last().body["stream_options"] == {"include_usage": True}

    # The client rebuilds the call from its deltas, as SDK users do, and answers it.
    arguments = "".join(c.function.arguments or "" for c in calls if c.function)
    history += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "4 °C, rain"},
    ]
    await client.chat.completions.create(model="gpt-4o", messages=history)
    sent = proxy.upstream.last().body["messages"]
    assert roles(sent) == ["user", "assistant", "tool"]
    assert json.loads(sent[1]["tool_calls"][0]["function"]["arguments"]) == {"city": "Oslo"}
    assert [row[1] for row in await proxy.stored()] == ["user", "assistant", "tool", "assistant"]


async def test_an_anthropic_call_keeps_system_blocks_and_records_the_reply(proxy: Proxy) -> None:
    client = proxy.anthropic()
    system = [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    history: list[Any] = [{"role": "user", "content": "Hello"}]
    first = await client.messages.create(
        model="claude-sonnet-4-5", max_tokens=64, system=system, messages=history
    )
    seen = proxy.upstream.last()
    assert seen.path == "/v1/messages"
    # This SDK sends its key as a bearer token (older ones as x-api-key): forwarded as sent.
    assert CLIENT_KEY in (seen.headers.get("x-api-key") or seen.headers["authorization"])
    assert seen.headers["anthropic-version"]
    assert seen.body["system"][0]["text"] == "Be brief."
    assert seen.body["max_tokens"] == 64
    history += [
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {"role": "user", "content": "Again"},
    ]
    async with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=64, system=system, messages=history
    ) as stream:
        text = "".join([piece async for piece in stream.text_stream])
    assert text == "ok 2"
    assert roles(proxy.upstream.last().body["messages"]) == ["user", "assistant", "user"]
    assert [row[1] for row in await proxy.stored()] == ["user", "assistant", "user", "assistant"]


async def test_an_upstream_error_passes_through_and_a_retry_adds_nothing_twice(
    proxy: Proxy,
) -> None:
    limited = {"error": {"message": "slow down", "type": "rate_limit", "code": "rate_limited"}}
    upstream_headers = {
        "retry-after": "7",
        "x-ratelimit-remaining-requests": "0",
        "set-cookie": "ebbtide_ui_key=planted; Path=/ui",
        "x-upstream-debug": "internal",
    }
    proxy.upstream.then(status(429, limited, **upstream_headers))
    client = proxy.openai()
    history: list[Any] = [{"role": "user", "content": "Hi"}]
    with pytest.raises(openai.RateLimitError) as raised:
        await client.chat.completions.create(model="gpt-4o", messages=history)
    relayed = raised.value.response.headers
    assert relayed["retry-after"] == "7" and relayed["x-ratelimit-remaining-requests"] == "0"
    assert "set-cookie" not in relayed and "x-upstream-debug" not in relayed
    assert raised.value.body == limited["error"]
    assert await proxy.stored() == [(1, "user", "window")]  # the input kept, no reply

    await client.chat.completions.create(model="gpt-4o", messages=history)
    assert await proxy.stored() == [(1, "user", "window"), (2, "assistant", "window")]


async def test_a_cut_stream_raises_in_the_sdk_and_records_nothing(proxy: Proxy) -> None:
    proxy.upstream.then(cut("half of it"))
    client = proxy.openai()
    history: list[Any] = [{"role": "user", "content": "Tell me a story"}]
    stream = await client.chat.completions.create(model="gpt-4o", messages=history, stream=True)
    with pytest.raises(openai.APIError, match="nothing of it was recorded"):
        _ = [chunk async for chunk in stream]
    assert await proxy.stored() == [(1, "user", "window")]


async def test_an_anthropic_cut_stream_raises_in_the_sdk(proxy: Proxy) -> None:
    proxy.upstream.then(cut("half of it"))
    client = proxy.anthropic()
    with pytest.raises(anthropic.APIStatusError, match="nothing of it was recorded"):
        async with client.messages.stream(
            model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "Go"}]
        ) as stream:
            _ = [piece async for piece in stream.text_stream]
    assert await proxy.stored() == [(1, "user", "window")]


async def test_a_call_without_a_session_is_refused_before_anything_is_forwarded(
    proxy: Proxy,
) -> None:
    client = proxy.openai(session=None)
    with pytest.raises(openai.UnprocessableEntityError, match="X-Ebbtide-Session"):
        await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "Hi"}]
        )
    assert proxy.upstream.seen == []
    # `user` is the fallback for clients that cannot set headers.
    await client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Hi"}], user="p1"
    )
    assert await proxy.stored("p1") == [(1, "user", "window"), (2, "assistant", "window")]
    # and `safety_identifier`, OpenAI's successor of `user`
    await client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Hi"}], safety_identifier="p2"
    )
    assert await proxy.stored("p2") == [(1, "user", "window"), (2, "assistant", "window")]


async def test_an_unknown_model_is_told_which_header_names_its_window(proxy: Proxy) -> None:
    client = proxy.openai()
    with pytest.raises(openai.UnprocessableEntityError, match="X-Ebbtide-Context-Window"):
        await client.chat.completions.create(
            model="no-such-model", messages=[{"role": "user", "content": "Hi"}]
        )
    assert proxy.upstream.seen == []


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [{"role": "user", "content": "no model"}]},
        {"model": "gpt-4o", "messages": []},
        {"model": "gpt-4o", "messages": [{"role": "wizard", "content": "?"}]},
        {"model": "gpt-4o", "messages": [{"role": "tool", "content": "no call id"}]},
        {"model": "gpt-4o", "messages": [{"role": "tool", "tool_call_id": "nope", "content": "x"}]},
        {"model": "no-such-model", "messages": [{"role": "user", "content": "window?"}]},
    ],
)
async def test_a_bad_call_is_refused_with_a_4xx_and_forwards_nothing(
    proxy: Proxy, body: dict[str, Any]
) -> None:
    answer = await proxy.http.post(
        "/v1/chat/completions", json=body, headers={"X-Ebbtide-Session": "p1"}
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["message"]
    assert proxy.upstream.seen == []
    assert await proxy.stored() == []


async def test_a_body_that_is_not_json_or_a_bad_session_id_is_refused(proxy: Proxy) -> None:
    broken = await proxy.http.post(
        "/v1/messages",
        content=b"{not json",
        headers={"X-Ebbtide-Session": "p1", "Content-Type": "application/json"},
    )
    assert broken.status_code == 400
    bad_id = await proxy.http.post(
        "/v1/messages",
        json=MINIMAL_MESSAGES_BODY,
        headers={"X-Ebbtide-Session": "no spaces allowed"},
    )
    assert bad_id.status_code == 422
    assert bad_id.json()["error"]["code"] == "invalid_session_id"
    assert bad_id.json()["error"]["details"]["field"] == "X-Ebbtide-Session"
    assert proxy.upstream.seen == []
