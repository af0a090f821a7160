"""The README's agent loop (scripts/agent_loop.py) against a running server, with the OpenAI
client talking to a scripted chat endpoint: the model calls the memory tool from
`GET /tools/memory`, and the recalled text reaches its next prompt."""

from __future__ import annotations

import json
from typing import Any

import httpx
from openai import OpenAI

from ebbtide.client import Ebbtide
from scripts.agent_loop import run_agent
from tests.api.live import LiveServer
from tests.api.test_mcp import SECRET, converse


class ScriptedModel:
    """An OpenAI-compatible chat endpoint: whatever the user says, it asks memory for the
    password, then answers with what the tool said."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        last = body["messages"][-1]
        if last["role"] == "tool":
            message: dict[str, Any] = {
                "role": "assistant",
                "content": f"Memory says: {last['content']}",
            }
        else:
            arguments = json.dumps({"type": "recall", "query": "Zorblax staging password"})
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "memory", "arguments": arguments},
                    }
                ],
            }
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return httpx.Response(
            200,
            json={
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [choice],
            },
        )


def test_the_model_recalls_through_the_memory_tool(
    keys_and_server: tuple[LiveServer, dict[str, str]],
) -> None:
    live, keys = keys_and_server
    converse(live.base, keys["full"], "agent")
    model = ScriptedModel()
    llm = OpenAI(
        base_url="http://llm.test/v1",
        api_key="unused",
        http_client=httpx.Client(transport=httpx.MockTransport(model)),
    )
    with Ebbtide(live.base, api_key=keys["default"]) as ebbtide:
        replies = list(
            run_agent(ebbtide, llm, "agent", "gpt-4o", ["Let us continue with the deployment."])
        )

    assert len(replies) == 1 and SECRET in replies[0]
    offered = model.requests[0]["tools"][0]["function"]
    assert (
        offered["name"] == "memory"
        and "forget" not in offered["parameters"]["properties"]["type"]["enum"]
    )
    assert SECRET not in json.dumps(model.requests[0]["messages"])  # not recalled by itself
    tool_message = model.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and SECRET in tool_message["content"]
