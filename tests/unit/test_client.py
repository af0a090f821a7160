"""The typed client (ebbtide/client.py): its models are the OpenAPI contract's, its retries
keep one Idempotency-Key and honour Retry-After, and it answers a model's memory tool call.
The server here is httpx's mock transport; tests/api/test_client.py runs it against the app."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from ebbtide import types
from ebbtide.client import Ebbtide, EbbtideError, Retries, ToolCallRequest
from tests.conftest import PROJECT_ROOT

CONTRACT = json.loads((PROJECT_ROOT / "openapi" / "openapi.json").read_text())["components"][
    "schemas"
]
MODELS: dict[type[BaseModel], str] = {
    types.TurnResult: "TurnResponse",
    types.Usage: "Usage",
    types.OffloadReport: "OffloadReport",
    types.RecallReport: "RecallReport",
    types.RecallHit: "RecallHit",
    types.NotesView: "NotesView",
    types.Fact: "FactView",
    types.RecallAnswer: "RecallResponse",
    types.Recalled: "RecallResult",
    types.Remembered: "RememberResponse",
    types.Counts: "Counts",
    types.Status: "StatusView",
    types.Chunk: "ChunkView",
    types.MemoryAnswer: "MemoryResponse",
    types.ToolDefinitions: "ToolDefinitions",
}


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_each_answer_model_is_its_contract_component(model: type[BaseModel]) -> None:
    component = CONTRACT[MODELS[model]]
    fields = set(model.model_fields)
    assert fields <= set(component["properties"]), "a field the contract does not have"
    assert set(component.get("required", [])) <= fields, "a required field the client lacks"


def answer(status: int, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.Response(status, json=body, headers=headers)


REMEMBERED = {"chunk_id": "c1", "duplicate": False, "facts": []}
BUSY = {"error": {"code": "database_unavailable", "message": "down", "details": {}}}


class Server:
    """Answers from a list, in order, and keeps the requests."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        found = self.answers.pop(0)
        if isinstance(found, Exception):
            raise found
        return found


def client(server: Server, slept: list[float], attempts: int = 3) -> Ebbtide:
    return Ebbtide(
        "http://ebbtide.test",
        api_key="ebt_key",
        retries=Retries(attempts=attempts, base_s=0.5, max_s=5),
        http=httpx.Client(transport=httpx.MockTransport(server)),
        sleep=slept.append,
    )


def test_a_turn_is_retried_under_one_idempotency_key_honouring_retry_after() -> None:
    busy = answer(503, BUSY, **{"Retry-After": "2"})
    limited = answer(429, {"error": {"code": "rate_limited", "message": "x", "details": {}}})
    server = Server(busy, limited, httpx.ConnectError("refused"), answer(200, REMEMBERED))
    slept: list[float] = []
    with pytest.raises(httpx.ConnectError):
        client(server, slept).turn("s1", [{"role": "user", "content": "hi"}], model="gpt-4o")
    assert slept == [2.0, 1.0]  # the server's Retry-After, then 0.5 × 2
    keys = {request.headers["Idempotency-Key"] for request in server.requests}
    assert len(keys) == 1 and next(iter(keys)).startswith("ebt-")
    body = json.loads(server.requests[0].content)
    assert body == {"messages": [{"role": "user", "content": "hi"}], "model": "gpt-4o"}
    assert server.requests[0].headers["Authorization"] == "Bearer ebt_key"


def test_a_lost_connection_is_retried_and_a_final_answer_parsed() -> None:
    server = Server(httpx.ReadError("reset"), answer(200, REMEMBERED))
    slept: list[float] = []
    found = client(server, slept).remember("s1", "Ship only from Ningbo.", tags=["ops"])
    assert found == types.Remembered(chunk_id="c1", duplicate=False, facts=[])
    assert slept == [0.5]
    assert json.loads(server.requests[1].content) == {
        "text": "Ship only from Ningbo.",
        "tags": ["ops"],
    }


def test_an_error_answer_raises_with_the_services_code() -> None:
    refused = {
        "error": {
            "code": "unknown_model",
            "message": "send context_window",
            "details": {"field": "context_window"},
        }
    }
    slept: list[float] = []
    with pytest.raises(EbbtideError) as raised:
        client(Server(answer(422, refused)), slept).turn("s1", [], idempotency_key="k1")
    assert raised.value.status == 422 and raised.value.code == "unknown_model"
    assert raised.value.details == {"field": "context_window"} and slept == []
    # retries spent: the last 503 is the answer
    with pytest.raises(EbbtideError, match="database_unavailable"):
        client(Server(answer(503, BUSY), answer(503, BUSY)), slept, attempts=2).status("s1")
    not_json = httpx.Response(502, text="<html>bad gateway</html>")
    with pytest.raises(EbbtideError, match="http_error"):
        client(Server(not_json), slept).recall("s1", "q", top_k=2)
    assert Retries(max_s=3).delay(9, answer(503, BUSY, **{"Retry-After": "soon"})) == 3


def test_a_memory_call_of_either_provider_is_run_and_answered_in_its_form() -> None:
    memory = {"type": "recall", "text": "[ts | turn 1-2 | c1] ...", "result": {}}
    server = Server(
        answer(200, memory),
        answer(200, memory),
        answer(
            403, {"error": {"code": "forbidden", "message": "lacks memory:forget", "details": {}}}
        ),
    )
    slept: list[float] = []
    ebbtide = client(server, slept)
    openai_call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "memory", "arguments": '{"type": "recall", "query": "budget"}'},
    }
    assert ebbtide.run_memory_call("s1", openai_call) == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": memory["text"],
    }
    assert json.loads(server.requests[0].content) == {"type": "recall", "query": "budget"}
    anthropic_call = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "memory",
        "input": {"type": "recall", "query": "x"},
    }
    assert ebbtide.run_memory_call("s1", anthropic_call) == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": memory["text"],
    }
    refused = ebbtide.run_memory_call(
        "s1", {**anthropic_call, "input": {"type": "forget", "chunk_id": "c1"}}
    )
    assert refused is not None and refused["is_error"] and "forbidden" in refused["content"]
    assert (
        ebbtide.run_memory_call(
            "s1", {"type": "tool_use", "id": "t", "name": "search", "input": {}}
        )
        is None
    )
    assert ToolCallRequest.of({"id": "c", "function": {"name": "other", "arguments": "{}"}}) is None
    broken = ToolCallRequest.of({"id": "c", "function": {"name": "memory", "arguments": "{oops"}})
    assert broken is not None and broken.arguments["type"] == "invalid"
    listed = ToolCallRequest.of({"id": "c", "function": {"name": "memory", "arguments": "[1]"}})
    assert listed is not None and listed.arguments == {}
