"""The proxy over long conversations (in-process, the SDKs' async clients): a history ten
times the window, tool loops of a hundred calls through each route, diverging histories
archived as branches, usage feeding the session, and who may call."""

from __future__ import annotations

import json
import logging
from itertools import pairwise
from typing import Any

import openai
import pytest
from prometheus_client import REGISTRY

from app.bench.upstream import Call, Seen, reply
from app.providers.tokenizer import counter_for_model
from app.services.auth import create_key
from tests.api.proxy_helpers import CLIENT_KEY, Proxy

WINDOW = 4000
LOOP_CALLS = 100
# About 430 tokens of tool output a call: a hundred calls are ten windows of history.
TOOL_OUTPUT = " ".join(
    f"row {i}: sensor reading {i * 37 % 1000} within tolerance" for i in range(48)
)


def prompt_tokens(seen: Seen, model: str) -> int:
    """The prompt's size counted on its own (not Ebbtide's estimate): every text, argument
    and tool name, four tokens of framing a message."""
    count = counter_for_model(model).count
    total = 0
    blocks = seen.body.get("system") or []
    for message in [*blocks, *seen.body["messages"]]:
        total += 4 + count(json.dumps(message.get("content"), ensure_ascii=False))
        for call in message.get("tool_calls") or ():
            total += count(call["function"]["name"] + call["function"]["arguments"])
    return total


def assert_openai_tool_pairs_intact(messages: list[dict[str, Any]]) -> None:
    """Every result answers a call made before it, and every call is answered."""
    open_calls: set[str] = set()
    for message in messages:
        for call in message.get("tool_calls") or ():
            open_calls.add(call["id"])
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, "a result whose call is gone"
            open_calls.discard(message["tool_call_id"])
    assert not open_calls, "a call whose result is gone"


def assert_anthropic_tool_pairs_intact(messages: list[dict[str, Any]]) -> None:
    for before, after in pairwise(messages):
        calls = {
            b["id"]
            for b in before["content"]
            if isinstance(b, dict) and b.get("type") == "tool_use"
        }
        results = {
            b["tool_use_id"]
            for b in (after["content"] if isinstance(after["content"], list) else [])
            if b.get("type") == "tool_result"
        }
        assert calls <= results, "a tool_use not answered first thing in the next message"
    for message in messages:
        if message["role"] == "user" and isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    assert any(
                        b.get("id") == block["tool_use_id"]
                        for m in messages
                        for b in (m["content"] if isinstance(m["content"], list) else [])
                    ), "a result whose call is gone"


async def test_a_hundred_call_tool_loop_keeps_every_prompt_in_the_window(proxy: Proxy) -> None:
    client = proxy.openai(headers={"X-Ebbtide-Context-Window": str(WINDOW)})
    history: list[Any] = [{"role": "user", "content": "Check every sensor, one call each."}]
    proxy.upstream.then(
        *(reply("", Call(f"call_{i}", "read_sensor", {"n": i})) for i in range(LOOP_CALLS))
    )
    for i in range(LOOP_CALLS):
        answer = await client.chat.completions.create(model="gpt-4o", messages=history)
        sent = proxy.upstream.last()
        assert sent.body["messages"][-1] == history[-1], "the newest input is not last"
        assert sent.headers["authorization"] == f"Bearer {CLIENT_KEY}"
        assert prompt_tokens(sent, "gpt-4o") <= WINDOW
        assert_openai_tool_pairs_intact(sent.body["messages"])
        history += [
            answer.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": f"call_{i}", "content": f"sensor {i}: {TOOL_OUTPUT}"},
        ]
    history_tokens = prompt_tokens(Seen("", {}, {"messages": history}), "gpt-4o")
    assert history_tokens >= 10 * WINDOW
    rows = await proxy.stored()
    assert len(rows) == 1 + 2 * LOOP_CALLS - 1  # the first user input, each call and result
    assert {state for _, _, state in rows} == {"window", "offloaded"}


def unmarked(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic content as blocks, without the cache breakpoints the prompt adds."""
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    return [{k: v for k, v in b.items() if k != "cache_control"} for b in blocks]


async def test_a_hundred_call_tool_loop_through_messages(proxy: Proxy) -> None:
    client = proxy.anthropic(headers={"X-Ebbtide-Context-Window": str(WINDOW)})
    history: list[Any] = [{"role": "user", "content": "Check every sensor, one call each."}]
    proxy.upstream.then(
        *(reply("", Call(f"toolu_{i}", "read_sensor", {"n": i})) for i in range(LOOP_CALLS))
    )
    for i in range(LOOP_CALLS):
        answer = await client.messages.create(
            model="claude-sonnet-4-5", max_tokens=256, system="Be exact.", messages=history
        )
        sent = proxy.upstream.last()
        assert unmarked(sent.body["messages"][-1]["content"]) == unmarked(history[-1]["content"])
        assert sent.body["messages"][0]["role"] == "user"
        assert prompt_tokens(sent, "claude-sonnet-4-5") <= WINDOW
        assert_anthropic_tool_pairs_intact(sent.body["messages"])
        history += [
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in answer.content],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{i}",
                        "content": f"sensor {i}: {TOOL_OUTPUT}",
                    }
                ],
            },
        ]
    assert prompt_tokens(Seen("", {}, {"messages": history}), "claude-sonnet-4-5") >= 10 * WINDOW


async def test_a_long_history_arriving_at_once_is_offloaded_in_that_call(proxy: Proxy) -> None:
    history: list[Any] = []
    for i in range(60):
        history += [
            {"role": "user", "content": f"Question {i}: {TOOL_OUTPUT}"},
            {"role": "assistant", "content": f"Answer {i}."},
        ]
    history.append({"role": "user", "content": "And now?"})
    client = proxy.openai(headers={"X-Ebbtide-Context-Window": str(WINDOW)})
    await client.chat.completions.create(model="gpt-4o", messages=history)
    sent = proxy.upstream.last()
    assert prompt_tokens(sent, "gpt-4o") <= WINDOW
    assert sent.body["messages"][-1] == {"role": "user", "content": "And now?"}
    states = [state for _, _, state in await proxy.stored()]
    assert states.count("offloaded") > 60


async def test_an_edited_message_archives_the_stored_branch_and_the_client_version_wins(
    proxy: Proxy,
) -> None:
    client = proxy.openai()
    history: list[Any] = [{"role": "user", "content": "Plan a trip."}]
    for follow_up in ("Go to Oslo.", "In May."):
        answer = await client.chat.completions.create(model="gpt-4o", messages=history)
        history += [answer.choices[0].message.model_dump(), {"role": "user", "content": follow_up}]
    await client.chat.completions.create(model="gpt-4o", messages=history)
    assert len(await proxy.stored()) == 6

    edited = [*history[:2], {"role": "user", "content": "Go to Bergen."}]
    await client.chat.completions.create(model="gpt-4o", messages=edited)
    assert [m["content"] for m in proxy.upstream.last().body["messages"]] == [
        "Plan a trip.",
        "ok 1",
        "Go to Bergen.",
    ]
    rows = await proxy.stored()
    # turn 2 opened with the first reply: the branch starts there, and the client's copy of
    # that reply is stored again, live
    assert [(role, state) for _, role, state in rows] == [
        ("user", "window"),
        *[(role, "superseded") for role in ("assistant", "user", "assistant", "user", "assistant")],
        ("assistant", "window"),
        ("user", "window"),
        ("assistant", "window"),
    ]
    status = (await proxy.http.get("/sessions/p1/status")).json()
    assert status["counts"]["superseded_messages"] == 5
    events = (await proxy.http.get("/sessions/p1/events", params={"kind": "branch"})).json()
    (branch,) = events["events"]
    assert branch["payload"]["from_seq"] == 2 and branch["payload"]["messages"] == 5


async def test_a_regenerated_reply_supersedes_the_one_stored(proxy: Proxy) -> None:
    client = proxy.openai()
    history: list[Any] = [{"role": "user", "content": "Name a color."}]
    await client.chat.completions.create(model="gpt-4o", messages=history)
    again = await client.chat.completions.create(model="gpt-4o", messages=history)
    assert again.choices[0].message.content == "ok 2"
    assert [m["role"] for m in proxy.upstream.last().body["messages"]] == ["user"]
    assert [(r, s) for _, r, s in await proxy.stored()] == [
        ("user", "window"),
        ("assistant", "superseded"),
        ("assistant", "window"),
    ]


async def test_an_edit_inside_offloaded_history_takes_its_chunks_out_of_recall(
    proxy: Proxy,
) -> None:
    client = proxy.openai(headers={"X-Ebbtide-Context-Window": str(WINDOW)})
    history: list[Any] = [{"role": "user", "content": "The vault code is 7419. Keep it in mind."}]
    for i in range(40):
        answer = await client.chat.completions.create(model="gpt-4o", messages=history)
        history += [
            answer.choices[0].message.model_dump(),
            {"role": "user", "content": f"Step {i}: {TOOL_OUTPUT}"},
        ]
    chunks = (
        await proxy.http.get("/sessions/p1/events", params={"kind": "turn", "limit": 500})
    ).json()
    offloaded = [cid for e in chunks["events"] for cid in e["payload"]["offload"]["chunk_ids"]]
    assert offloaded, "the conversation never offloaded"

    rewritten = [{"role": "user", "content": "There is no vault. What code did I give you?"}]
    await client.chat.completions.create(model="gpt-4o", messages=rewritten)
    assert "7419" not in json.dumps(proxy.upstream.last().body["messages"])
    first_chunk = (await proxy.http.get(f"/sessions/p1/chunks/{offloaded[0]}")).json()
    assert first_chunk["superseded_turn"] is not None and "7419" in first_chunk["raw_text"]
    recalled = (
        await proxy.http.post("/sessions/p1/recall", json={"query": "vault code 7419"})
    ).json()
    assert recalled["results"] == []


def sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def test_the_providers_usage_calibrates_the_estimate_and_counts_cache_hits(
    proxy: Proxy,
) -> None:
    client = proxy.openai()
    before = sample("ebbtide_provider_cached_prompt_tokens_total")
    proxy.upstream.then(reply("first", cached_tokens=3))
    await client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Hi " * 50}]
    )
    assert sample("ebbtide_provider_cached_prompt_tokens_total") - before == 3
    status = (await proxy.http.get("/sessions/p1/status")).json()
    # the scripted model counts four characters a token, well off the real tokenizer
    assert status["calibration_ratio"] != 1.0
    events = (await proxy.http.get("/sessions/p1/events", params={"kind": "reply"})).json()
    (recorded,) = events["events"]
    assert recorded["payload"]["observed_cached_tokens"] == 3


async def test_with_keys_the_caller_names_its_ebbtide_key_apart_from_the_providers(
    proxy: Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    key = await create_key(proxy.ctx, "acme", ["memory:read", "memory:write"])
    reader = await create_key(proxy.ctx, "acme", ["memory:read"])
    messages: list[Any] = [{"role": "user", "content": "Secret plans for Tuesday."}]
    with pytest.raises(openai.AuthenticationError, match="X-Ebbtide-Key"):
        await proxy.openai().chat.completions.create(model="gpt-4o", messages=messages)
    with pytest.raises(openai.PermissionDeniedError):
        await proxy.openai(headers={"X-Ebbtide-Key": reader}).chat.completions.create(
            model="gpt-4o", messages=messages
        )
    assert proxy.upstream.seen == []
    caplog.set_level(logging.DEBUG)
    client = proxy.openai(headers={"X-Ebbtide-Key": key})
    await client.chat.completions.create(model="gpt-4o", messages=messages)
    seen = proxy.upstream.last()
    assert seen.headers["authorization"] == f"Bearer {CLIENT_KEY}"
    assert "x-ebbtide-key" not in seen.headers
    status = await proxy.http.get("/sessions/p1/status", headers={"Authorization": f"Bearer {key}"})
    assert status.status_code == 200
    logged = caplog.text
    assert CLIENT_KEY not in logged and key not in logged and "Secret plans" not in logged
