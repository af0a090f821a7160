"""The rest of the providers' surface through the proxy, with the real SDKs' async clients:
Responses calls as turns, the model list and Anthropic's token count passed through, and
Ebbtide's own refusals in each provider's error shape (the SDKs raise their typed errors)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anthropic
import httpx
import openai
import pytest

from app.bench.upstream import MODELS, Call, cut, reply
from app.main import create_app
from app.services.throttle import Throttle
from app.settings import ThrottleSettings
from tests.api.proxy_helpers import CLIENT_KEY, EBBTIDE, MINIMAL_MESSAGES_BODY, Proxy

MODEL = "gpt-4o"


async def test_a_responses_call_is_a_turn_and_its_output_items_are_recorded(
    proxy: Proxy,
) -> None:
    client = proxy.openai()
    first = await client.responses.create(
        model=MODEL, instructions="You are terse.", input="Name a prime."
    )
    assert first.output_text == "ok 1"
    seen = proxy.upstream.last()
    assert seen.path == "/v1/responses"
    assert seen.headers["authorization"] == f"Bearer {CLIENT_KEY}"
    assert "instructions" not in seen.body  # it is the input's first item instead
    assert seen.body["input"][0] == {"role": "system", "content": "You are terse."}
    assert seen.body["input"][-1] == {"role": "user", "content": "Name a prime."}
    assert await proxy.stored() == [(1, "user", "window"), (2, "assistant", "window")]

    # The usual stateless loop: the output goes back in the input, then the next question.
    history: list[Any] = [
        {"role": "user", "content": "Name a prime."},
        *[item.model_dump(exclude_none=True) for item in first.output],
        {"role": "user", "content": "Another."},
    ]
    await client.responses.create(model=MODEL, instructions="You are terse.", input=history)
    sent = proxy.upstream.last().body["input"]
    assert [item.get("role") for item in sent] == ["system", "user", "assistant", "user"]
    assert [row[1] for row in await proxy.stored()] == ["user", "assistant", "user", "assistant"]


async def test_a_streamed_responses_tool_call_is_recorded_and_its_output_accepted(
    proxy: Proxy,
) -> None:
    proxy.upstream.then(reply("Looking it up.", Call("call_7", "lookup", {"city": "Oslo"})))
    client = proxy.openai()
    question = {"role": "user", "content": "Weather in Oslo?"}
    stream = await client.responses.create(model=MODEL, input=[question], stream=True)
    kinds = [event.type async for event in stream]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    # two output items, one message each: the words and the call
    assert [row[1] for row in await proxy.stored()] == ["user", "assistant", "assistant"]

    completed = proxy.upstream.seen[-1]
    assert completed.body["stream"] is True
    history: list[Any] = [
        question,
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Looking it up.", "annotations": []}],
        },
        {
            "type": "function_call",
            "call_id": "call_7",
            "name": "lookup",
            "arguments": '{"city": "Oslo"}',
        },
        {"type": "function_call_output", "call_id": "call_7", "output": "4 °C, rain"},
    ]
    await client.responses.create(model=MODEL, input=history)
    kinds_sent = [item.get("type", "message") for item in proxy.upstream.last().body["input"]]
    assert kinds_sent == ["message", "message", "function_call", "function_call_output"]
    stored = await proxy.stored()
    assert len(stored) == 5 and all(state == "window" for _, _, state in stored)


async def test_a_cut_responses_stream_raises_in_the_sdk_and_records_nothing(
    proxy: Proxy,
) -> None:
    proxy.upstream.then(cut("half of it"))
    client = proxy.openai()
    stream = await client.responses.create(model=MODEL, input="Tell me a story", stream=True)
    with pytest.raises(openai.APIError, match="nothing of it was recorded"):
        _ = [event async for event in stream]
    assert await proxy.stored() == [(1, "user", "window")]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"previous_response_id": "resp_1"}, "previous_response_id"),
        ({"conversation": "c"}, "conversation"),
    ],
)
async def test_a_conversation_the_provider_keeps_is_refused(
    proxy: Proxy, extra: dict[str, Any], field: str
) -> None:
    client = proxy.openai()
    with pytest.raises(openai.UnprocessableEntityError) as raised:
        await client.responses.create(model=MODEL, input="Hi", **extra)
    error = raised.value.body
    assert isinstance(error, dict)
    assert error["code"] == "unsupported_parameter" and error["param"] == field
    assert "ebbtide unsupported_parameter" in error["message"]
    assert proxy.upstream.seen == [] and await proxy.stored() == []


async def test_several_choices_are_refused_with_a_clear_4xx(proxy: Proxy) -> None:
    client = proxy.openai()
    with pytest.raises(openai.UnprocessableEntityError, match="n > 1 is not supported"):
        await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Hi"}], n=3
        )
    assert proxy.upstream.seen == [] and await proxy.stored() == []
    await client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Hi"}], n=1
    )
    assert len(await proxy.stored()) == 2


async def test_the_model_list_passes_through_for_each_sdk(proxy: Proxy) -> None:
    openai_models = [m.id async for m in proxy.openai().models.list()]
    assert openai_models == list(MODELS)
    assert proxy.upstream.last().path == "/v1/models"
    assert proxy.upstream.last().headers["authorization"] == f"Bearer {CLIENT_KEY}"
    one = await proxy.openai().models.retrieve(MODELS[1])
    assert one.id == MODELS[1]
    with pytest.raises(openai.NotFoundError, match="does not exist"):  # the upstream's 404
        await proxy.openai().models.retrieve("no-such-model")

    anthropic_models = [m.id async for m in proxy.anthropic().models.list()]
    assert anthropic_models == list(MODELS)
    credentials = proxy.upstream.last().headers
    assert "anthropic-version" in credentials  # what told the proxy whose list it is
    assert CLIENT_KEY in (credentials.get("x-api-key"), credentials.get("authorization", "")[7:])
    assert await proxy.stored() == []


async def test_anthropic_token_counts_pass_through_and_store_nothing(proxy: Proxy) -> None:
    counted = await proxy.anthropic().messages.count_tokens(
        model="claude-sonnet-4-5",
        system="Be brief.",
        messages=[{"role": "user", "content": "How long is this?"}],
    )
    assert counted.input_tokens > 0
    seen = proxy.upstream.last()
    assert seen.path == "/v1/messages/count_tokens" and seen.body["system"] == "Be brief."
    assert await proxy.stored() == []
    not_json = await proxy.http.post(
        "/v1/messages/count_tokens",
        content=b"[1, 2",
        headers={"Content-Type": "application/json", "anthropic-version": "2023-06-01"},
    )
    assert not_json.status_code == 400 and not_json.json()["type"] == "error"


async def test_ebbtides_refusals_come_in_each_providers_error_shape(proxy: Proxy) -> None:
    # No upstream to reach: Ebbtide's own 502, raised by each SDK as its own typed error.
    app = create_app(context=replace(proxy.ctx, upstream=None))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=EBBTIDE) as http:
        raw = await http.post(
            "/v1/messages",
            json=MINIMAL_MESSAGES_BODY,
            headers={"X-Ebbtide-Session": "p1"},
        )
        assert raw.status_code == 502
        assert raw.json()["type"] == "error"
        assert raw.json()["error"]["type"] == "api_error"
        assert raw.json()["error"]["message"].startswith("ebbtide upstream_unavailable")
        client = openai.AsyncOpenAI(
            base_url=f"{EBBTIDE}/v1", api_key=CLIENT_KEY, http_client=http, max_retries=0
        )
        with pytest.raises(openai.InternalServerError, match="ebbtide upstream_unavailable"):
            await client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "x"}],
                extra_headers={"X-Ebbtide-Session": "p1"},
            )
    with pytest.raises(anthropic.UnprocessableEntityError, match="ebbtide missing_session"):
        await proxy.anthropic(session=None).messages.create(
            model="claude-sonnet-4-5", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    # a limit, with the provider's type for it, and Ebbtide's own API keeps its own shape
    proxy.ctx.throttle = Throttle(ThrottleSettings(proxy_calls_per_minute=1))
    await proxy.anthropic().messages.create(
        model="claude-sonnet-4-5", max_tokens=5, messages=[{"role": "user", "content": "x"}]
    )
    with pytest.raises(anthropic.RateLimitError) as limited:
        await proxy.anthropic().messages.create(
            model="claude-sonnet-4-5", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    body = limited.value.body
    assert isinstance(body, dict) and body["error"]["type"] == "rate_limit_error"
    own = await proxy.http.get("/sessions/nobody/status")
    assert set(own.json()["error"]) == {"code", "message", "details"}
    unknown = await proxy.http.get("/v1/no-such-route")
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found_error"


async def test_instructions_beside_a_leading_developer_item_keep_both(proxy: Proxy) -> None:
    client = proxy.openai()
    developer = {"role": "developer", "content": "Answer in French."}
    await client.responses.create(
        model=MODEL,
        instructions="You are terse.",
        input=[developer, {"role": "user", "content": "Hi"}],
    )
    sent = proxy.upstream.last().body["input"]
    assert sent[0] == {"role": "system", "content": "You are terse."}  # the instructions: C0
    assert developer["content"] in str(sent[1:])  # said where the caller put it
