"""Every client's messages in, byte for byte back out, through POST /sessions/{id}/turn.

The messages are what the providers' SDKs and LangChain build or return; the prompts are
checked against the SDKs' request types (tests/sdk_types.py).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
from anthropic.types import Message as AnthropicReply
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from openai.types.chat import ChatCompletion

from app.core.blobs import BLOB_REF_PREFIX
from app.core.formats.anthropic import ARCHIVED_OPENING
from tests.sdk_types import (
    ANTHROPIC_MESSAGE,
    ANTHROPIC_SYSTEM_BLOCK,
    OPENAI_MESSAGE,
    RESPONSES_ITEM,
    all_conform,
)
from tests.unit.test_formats import (
    ANTHROPIC_SHAPES,
    OPENAI_SHAPES,
    PNG,
    PROVIDER_SHAPES,
    RESPONSES_SHAPES,
)

WINDOW = {"context_window": 32_000}


async def turn(client: httpx.AsyncClient, session: str, **body: Any) -> dict[str, Any]:
    response = await client.post(f"/sessions/{session}/turn", json={**WINDOW, **body})
    assert response.status_code == 200, response.text
    return response.json()


def unmarked(message: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic message without `cache_control` on its blocks."""
    content = message["content"]
    if isinstance(content, str):
        return message
    blocks = [{k: v for k, v in b.items() if k != "cache_control"} for b in content]
    return {**message, "content": blocks}


def exact(messages: list[dict[str, Any]]) -> list[str]:
    """Messages as JSON text, so key order counts too."""
    return [json.dumps(m) for m in messages]


OPENING = {"role": "user", "content": ARCHIVED_OPENING}


async def test_openai_messages_of_every_shape_come_back_as_posted(
    client: httpx.AsyncClient,
) -> None:
    posted: list[dict[str, Any]] = []
    user_turns = [OPENAI_SHAPES["user parts"], OPENAI_SHAPES["named user"]]
    replies = [
        OPENAI_SHAPES["refusal only"],
        OPENAI_SHAPES["audio only"],
        OPENAI_SHAPES["assistant parts"],
    ]
    replies += [PROVIDER_SHAPES["deepseek reasoning"], PROVIDER_SHAPES["unknown fields"]]
    for index, reply in enumerate(replies):
        new = [reply, user_turns[index % 2]]
        body = await turn(client, "oa", messages=new)
        posted += new
        assert body["prompt_format"] == "openai" and body["system"] is None
        # the conversation opens with a reply: the placeholder user line goes first
        assert exact(body["messages"]) == exact([OPENING, *posted])


async def test_a_tool_loop_with_thinking_signatures_keeps_them_unchanged(
    client: httpx.AsyncClient,
) -> None:
    call = PROVIDER_SHAPES["litellm thinking blocks"]
    result = OPENAI_SHAPES["tool parts"]
    await turn(client, "think", messages=[{"role": "user", "content": "what is 6 x 7?"}])
    body = await turn(client, "think", messages=[call, result])
    assert exact(body["messages"][-2:]) == exact([call, result])
    claude = await turn(
        client, "think", messages=[{"role": "user", "content": "thanks"}], prompt_format="anthropic"
    )
    blocks = [b for m in claude["messages"] if isinstance(m["content"], list) for b in m["content"]]
    [thinking] = [b for b in blocks if b["type"] == "thinking"]
    assert thinking["signature"] == "sig-1"


async def test_a_leading_developer_message_is_the_system_prompt(client: httpx.AsyncClient) -> None:
    developer = OPENAI_SHAPES["developer"]
    body = await turn(client, "dev", messages=[developer, {"role": "user", "content": "hi"}])
    assert body["messages"][0] == developer
    later = await turn(client, "dev", messages=[{"role": "user", "content": "again"}])
    assert later["messages"][0] == developer  # C0 stays, in the form it came in


async def test_an_sdk_reply_is_posted_back_as_it_was_received(client: httpx.AsyncClient) -> None:
    completion = ChatCompletion.model_validate(
        {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-4o",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "refusal": "No.",
                        "annotations": [],
                    },
                }
            ],
        }
    )
    reply = completion.choices[0].message.model_dump(mode="json")
    await turn(client, "sdk", messages=[{"role": "user", "content": "q"}])
    body = await turn(client, "sdk", messages=[reply, {"role": "user", "content": "why?"}])
    assert body["messages"][-2] == reply


async def test_anthropic_turns_come_back_as_posted_with_system_blocks(
    client: httpx.AsyncClient,
) -> None:
    system = [{"type": "text", "text": "You check tides.", "cache_control": {"type": "ephemeral"}}]
    reply = AnthropicReply.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
            "content": ANTHROPIC_SHAPES["thinking and tool_use"]["content"],
        }
    )
    content = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
    assistant = {"role": "assistant", "content": content}
    first = [ANTHROPIC_SHAPES["image"]]
    result = {**ANTHROPIC_SHAPES["tool_result"]}
    result["content"] = [b for b in result["content"] if b.get("tool_use_id") != "toolu_2"]
    second = [assistant, result]
    base = {"format": "anthropic", "model": "claude-sonnet-4-5"}
    await turn(client, "an", messages=first, system=system, **base)
    body = await turn(client, "an", messages=second, **base)
    assert body["prompt_format"] == "anthropic"
    assert body["system"][0] == {**system[0]} and all_conform(
        ANTHROPIC_SYSTEM_BLOCK, body["system"]
    )
    assert all_conform(ANTHROPIC_MESSAGE, body["messages"])
    # Ebbtide places the cache breakpoints; apart from them the messages are as posted.
    assert [unmarked(m) for m in body["messages"]] == [unmarked(m) for m in [*first, *second]]
    as_openai = await turn(
        client, "an", messages=[{"role": "user", "content": "ok"}], prompt_format="openai", **base
    )
    plain = [
        {k: v for k, v in m.items() if k not in ("reasoning_content", "thinking_blocks")}
        for m in as_openai["messages"]
    ]
    assert all_conform(OPENAI_MESSAGE, plain)


async def test_responses_items_come_back_as_posted(client: httpx.AsyncClient) -> None:
    items = [RESPONSES_SHAPES[name] for name in ("input parts", "reasoning", "function_call")]
    more = [RESPONSES_SHAPES["function_call_output"], RESPONSES_SHAPES["easy message"]]
    await turn(client, "rs", format="responses", messages=items, model="gpt-4o")
    body = await turn(client, "rs", format="responses", messages=more)
    assert body["prompt_format"] == "responses"
    assert exact(body["messages"]) == exact([*items, *more])
    assert all_conform(RESPONSES_ITEM, body["messages"])


async def test_langchain_messages_with_images_are_accepted(client: httpx.AsyncClient) -> None:
    history = [
        SystemMessage("You describe pictures."),
        HumanMessage(
            content=[
                {"type": "text", "text": "What is this?"},
                {"type": "image", "base64": PNG, "mime_type": "image/png"},
            ]
        ),
        AIMessage("", tool_calls=[{"id": "t1", "name": "zoom", "args": {"x": 2}}]),
        ToolMessage("zoomed", tool_call_id="t1"),
    ]
    messages = convert_to_openai_messages(history)
    body = await turn(client, "lc", messages=messages)
    assert exact(body["messages"]) == exact(messages)
    assert all_conform(OPENAI_MESSAGE, body["messages"])


async def test_a_single_system_prompt_turns_a_late_instruction_into_user_text(
    client: httpx.AsyncClient,
) -> None:
    body = await turn(
        client,
        "single",
        system="rules",
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "developer", "content": "late instruction"},
            {"role": "user", "content": "and?"},
        ],
        prompt_format="openai-single-system",
    )
    assert body["messages"] == [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "[system] late instruction"},
        {"role": "user", "content": "and?"},
    ]


async def test_an_offloaded_image_is_kept_once_by_hash_and_served_back(
    client: httpx.AsyncClient,
) -> None:
    image = OPENAI_SHAPES["user parts"]
    small = {"context_window": 3_000, "policy": {"floor_turns": 1, "floor_tokens": 0}}
    chunk_ids: list[str] = []
    for _ in range(4):
        body = await turn(client, "img", messages=[image], **small)
        chunk_ids += body["offload"]["chunk_ids"]
    assert len(chunk_ids) >= 2, "the image turns were not offloaded"
    chunks = [(await client.get(f"/sessions/img/chunks/{c}")).json() for c in chunk_ids]
    assert all(PNG not in json.dumps(chunk) for chunk in chunks)  # references, not payloads
    refs = {
        part["image_url"]["url"].rpartition(BLOB_REF_PREFIX)[2]
        for chunk in chunks
        for message in chunk["messages"]
        for part in message["posted"]["content"]
        if part["type"] == "image_url" and BLOB_REF_PREFIX in part["image_url"]["url"]
    }
    [blob_hash] = refs  # one picture posted four times is stored once
    assert all(f"sha256 {blob_hash}" in chunk["raw_text"] for chunk in chunks)
    served = await client.get(f"/sessions/img/blobs/{blob_hash}")
    assert served.status_code == 200 and served.headers["content-type"] == "image/png"
    assert served.content == base64.b64decode(PNG)
    missing = await client.get(f"/sessions/img/blobs/{'0' * 64}")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "blob_not_found"
