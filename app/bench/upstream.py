"""A scripted OpenAI- and Anthropic-compatible model API: the upstream of the proxy's tests and
of its latency measurement (scripts/measure_proxy.py). It serves Chat Completions, Responses
and Messages, the model list and Anthropic's token count.

It records every request it receives (path, headers, JSON body) and answers from a script:
a reply (text and tool calls, streamed as the provider streams when asked), an error status
with its body, a stall longer than the proxy's timeout, or a stream cut half-way. With the
script empty it replies "ok <n>". It serves in-process (`app`, for httpx's ASGI transport)
or on loopback (`serve_in_thread`, for the SDKs' sync clients and a live `ebbtide serve`).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from app.loopback import free_loopback_port

Json = dict[str, Any]


@dataclass(frozen=True)
class Call:
    """A tool call the scripted model makes."""

    id: str
    name: str
    arguments: Json


@dataclass(frozen=True)
class Answer:
    kind: Literal["reply", "status", "stall", "cut"] = "reply"
    text: str = ""
    calls: tuple[Call, ...] = ()
    status: int = 200
    body: Json | None = None
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    cached_tokens: int = 0
    # Streams: after the first piece of text, wait for this (set by a client that has seen
    # that piece) before sending the rest; unset after `seconds`, the rest says "BUFFERED".
    gate: threading.Event | None = None


def reply(text: str = "", *calls: Call, cached_tokens: int = 0) -> Answer:
    return Answer(text=text, calls=calls, cached_tokens=cached_tokens)


def status(code: int, body: Json, **headers: str) -> Answer:
    return Answer(kind="status", status=code, body=body, headers=headers)


def stall(seconds: float) -> Answer:
    return Answer(kind="stall", seconds=seconds)


def gated(text: str, gate: threading.Event, seconds: float = 10.0) -> Answer:
    """A streamed reply that waits, after its first piece, for the client to have seen it."""
    return Answer(text=text, gate=gate, seconds=seconds)


def cut(text: str = "half a reply") -> Answer:
    """A streamed reply whose connection drops before it is complete."""
    return Answer(kind="cut", text=text)


@dataclass(frozen=True)
class Seen:
    path: str
    headers: dict[str, str]
    body: Json


def _prompt_tokens(body: Json) -> int:
    """What the scripted model says the prompt cost: a rough four characters a token."""
    return max(1, len(json.dumps([body.get("system"), body.get("messages")])) // 4)


def _sse(data: Json | str, event: str | None = None) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def _pieces(text: str) -> list[str]:
    """The text in three deltas, as a model streams it."""
    step = max(1, len(text) // 3)
    return [text[i : i + step] for i in range(0, len(text), step)] or [""]


class _CutStream(Exception):
    """Raised inside a streamed body: the server drops the connection mid-response."""


async def _passed(answer: Answer) -> bool:
    """True once the gate (if any) opens, within the answer's seconds."""
    if answer.gate is None:
        return True
    return await asyncio.to_thread(answer.gate.wait, answer.seconds)


def _openai_message(answer: Answer) -> Json:
    message: Json = {"role": "assistant", "content": answer.text or None, "refusal": None}
    if answer.calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for c in answer.calls
        ]
    return message


def _openai_usage(body: Json, answer: Answer) -> Json:
    prompt = _prompt_tokens(body)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": 7,
        "total_tokens": prompt + 7,
        "prompt_tokens_details": {"cached_tokens": answer.cached_tokens},
    }


def _openai_chunk(model: str, delta: Json, finish: str | None = None) -> Json:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }


async def _openai_events(body: Json, answer: Answer) -> AsyncIterator[bytes]:
    model = body["model"]
    yield _sse(_openai_chunk(model, {"role": "assistant", "content": ""}))
    for index, piece in enumerate(_pieces(answer.text) if answer.text else []):
        yield _sse(_openai_chunk(model, {"content": piece}))
        await asyncio.sleep(0)
        if index == 0 and not await _passed(answer):
            yield _sse(_openai_chunk(model, {"content": " BUFFERED"}))
    if answer.kind == "cut":
        raise _CutStream
    for index, c in enumerate(answer.calls):
        arguments = json.dumps(c.arguments)
        function = {"name": c.name, "arguments": ""}
        head = {"index": index, "id": c.id, "type": "function", "function": function}
        yield _sse(_openai_chunk(model, {"tool_calls": [head]}))
        for piece in _pieces(arguments):
            yield _sse(
                _openai_chunk(
                    model, {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
                )
            )
    finish = "tool_calls" if answer.calls else "stop"
    yield _sse(_openai_chunk(model, {}, finish))
    if (body.get("stream_options") or {}).get("include_usage"):
        usage_chunk = {
            **_openai_chunk(model, {}),
            "choices": [],
            "usage": _openai_usage(body, answer),
        }
        yield _sse(usage_chunk)
    yield _sse("[DONE]")


def _anthropic_blocks(answer: Answer) -> list[Json]:
    blocks: list[Json] = []
    if answer.text:
        blocks.append({"type": "text", "text": answer.text, "citations": None})
    blocks.extend(
        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in answer.calls
    )
    return blocks


def _anthropic_usage(body: Json, answer: Answer) -> Json:
    prompt = _prompt_tokens(body)
    return {
        "input_tokens": prompt - answer.cached_tokens,
        "cache_read_input_tokens": answer.cached_tokens,
        "cache_creation_input_tokens": 0,
        "output_tokens": 7,
    }


def _anthropic_message(body: Json, answer: Answer, content: list[Json]) -> Json:
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": content,
        "stop_reason": "tool_use" if answer.calls else "end_turn",
        "stop_sequence": None,
        "usage": _anthropic_usage(body, answer),
    }


async def _anthropic_events(body: Json, answer: Answer) -> AsyncIterator[bytes]:
    start = _anthropic_message(body, answer, [])
    start["stop_reason"] = None
    yield _sse({"type": "message_start", "message": start}, "message_start")
    index = 0
    if answer.text:
        block = {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": ""},
        }
        yield _sse(block, "content_block_start")
        for piece_index, piece in enumerate(_pieces(answer.text)):
            if piece_index == 1 and not await _passed(answer):
                piece = " BUFFERED"
            delta = {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": piece},
            }
            yield _sse(delta, "content_block_delta")
            await asyncio.sleep(0)
        if answer.kind == "cut":
            raise _CutStream
        yield _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
        index = 1
    for offset, c in enumerate(answer.calls):
        at = index + offset
        head = {"type": "tool_use", "id": c.id, "name": c.name, "input": {}}
        yield _sse(
            {"type": "content_block_start", "index": at, "content_block": head},
            "content_block_start",
        )
        for piece in _pieces(json.dumps(c.arguments)):
            delta = {"type": "input_json_delta", "partial_json": piece}
            yield _sse(
                {"type": "content_block_delta", "index": at, "delta": delta}, "content_block_delta"
            )
        yield _sse({"type": "content_block_stop", "index": at}, "content_block_stop")
    stop = "tool_use" if answer.calls else "end_turn"
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": None},
        "usage": {"output_tokens": 7},
    }
    yield _sse(delta, "message_delta")
    yield _sse({"type": "message_stop"}, "message_stop")


def _responses_output(answer: Answer) -> list[Json]:
    output: list[Json] = []
    if answer.text:
        text = {"type": "output_text", "text": answer.text, "annotations": [], "logprobs": []}
        output.append(
            {
                "id": "msg_scripted",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [text],
            }
        )
    output.extend(
        {
            "id": f"fc_{c.id}",
            "type": "function_call",
            "status": "completed",
            "call_id": c.id,
            "name": c.name,
            "arguments": json.dumps(c.arguments),
        }
        for c in answer.calls
    )
    return output


def _responses_usage(body: Json, answer: Answer) -> Json:
    prompt = max(1, len(json.dumps(body.get("input"))) // 4)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": answer.cached_tokens},
        "output_tokens": 7,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + 7,
    }


def _response(body: Json, answer: Answer | None, output: list[Json]) -> Json:
    return {
        "id": "resp_scripted",
        "object": "response",
        "created_at": 0,
        "status": "completed" if answer is not None else "in_progress",
        "model": body["model"],
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": body.get("tools") or [],
        "usage": _responses_usage(body, answer) if answer is not None else None,
    }


async def _responses_events(body: Json, answer: Answer) -> AsyncIterator[bytes]:
    number = iter(range(1_000_000))

    def event(kind: str, **data: Any) -> bytes:
        return _sse({"type": kind, "sequence_number": next(number), **data}, kind)

    yield event("response.created", response=_response(body, None, []))
    output = _responses_output(answer)
    if answer.text:
        item = {**output[0], "status": "in_progress", "content": []}
        yield event("response.output_item.added", output_index=0, item=item)
        for piece in _pieces(answer.text):
            yield event(
                "response.output_text.delta",
                item_id=item["id"],
                output_index=0,
                content_index=0,
                delta=piece,
                logprobs=[],
            )
            await asyncio.sleep(0)
        if answer.kind == "cut":
            raise _CutStream
        yield event("response.output_item.done", output_index=0, item=output[0])
    for index, item in enumerate(output[1:] if answer.text else output):
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=_response(body, answer, output))


def _openai_completion(body: Json, answer: Answer) -> Json:
    choice = {"index": 0, "message": _openai_message(answer), "logprobs": None}
    choice["finish_reason"] = "tool_calls" if answer.calls else "stop"
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [choice],
        "usage": _openai_usage(body, answer),
    }


def _whole_response(body: Json, answer: Answer) -> Json:
    return _response(body, answer, _responses_output(answer))


def _whole_message(body: Json, answer: Answer) -> Json:
    return _anthropic_message(body, answer, _anthropic_blocks(answer))


MODELS = ("scripted-small", "scripted-large")


class ScriptedUpstream:
    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.script: deque[Answer] = deque()
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self._chat_completions)
        self.app.post("/v1/responses")(self._responses)
        self.app.post("/v1/messages")(self._messages)
        self.app.post("/v1/messages/count_tokens")(self._count_tokens)
        self.app.get("/v1/models")(self._models)
        self.app.get("/v1/models/{model_id}")(self._model)

    def then(self, *answers: Answer) -> None:
        self.script.extend(answers)

    def last(self) -> Seen:
        return self.seen[-1]

    async def _next(self, request: Request) -> tuple[Json, Answer]:
        body = await request.json()
        self.seen.append(Seen(request.url.path, dict(request.headers), body))
        answer = self.script.popleft() if self.script else reply(f"ok {len(self.seen)}")
        if answer.kind == "stall":
            await asyncio.sleep(answer.seconds)
            answer = reply(f"late {len(self.seen)}")
        return body, answer

    async def _scripted(
        self,
        request: Request,
        events: Callable[[Json, Answer], AsyncIterator[bytes]],
        whole: Callable[[Json, Answer], Json],
        id_header: str,
    ) -> Response:
        """The script's next answer to a model call: its error status, its events when the
        call streams, else the whole reply with a request id."""
        body, answer = await self._next(request)
        if answer.kind == "status":
            return JSONResponse(answer.body, status_code=answer.status, headers=answer.headers)
        if body.get("stream"):
            return StreamingResponse(events(body, answer), media_type="text/event-stream")
        return JSONResponse(whole(body, answer), headers={id_header: f"req_{len(self.seen)}"})

    async def _chat_completions(self, request: Request) -> Response:
        return await self._scripted(request, _openai_events, _openai_completion, "x-request-id")

    async def _responses(self, request: Request) -> Response:
        return await self._scripted(request, _responses_events, _whole_response, "x-request-id")

    async def _messages(self, request: Request) -> Response:
        return await self._scripted(request, _anthropic_events, _whole_message, "request-id")

    def _look(self, request: Request) -> None:
        self.seen.append(Seen(request.url.path, dict(request.headers), {}))

    def _model_entry(self, request: Request, name: str) -> Json:
        if "anthropic-version" in request.headers:
            return {
                "type": "model",
                "id": name,
                "display_name": name,
                "created_at": "2026-01-01T00:00:00Z",
            }
        return {"id": name, "object": "model", "created": 0, "owned_by": "scripted"}

    async def _models(self, request: Request) -> Response:
        self._look(request)
        data = [self._model_entry(request, name) for name in MODELS]
        if "anthropic-version" in request.headers:
            page = {"data": data, "has_more": False, "first_id": MODELS[0], "last_id": MODELS[-1]}
            return JSONResponse(page)
        return JSONResponse({"object": "list", "data": data})

    async def _model(self, request: Request, model_id: str) -> Response:
        self._look(request)
        if model_id not in MODELS:
            error = {
                "message": f"The model '{model_id}' does not exist",
                "type": "invalid_request_error",
            }
            return JSONResponse({"error": error}, status_code=404)
        return JSONResponse(self._model_entry(request, model_id))

    async def _count_tokens(self, request: Request) -> Response:
        body = await request.json()
        self.seen.append(Seen(request.url.path, dict(request.headers), body))
        return JSONResponse({"input_tokens": _prompt_tokens(body)})


@contextmanager
def serve_in_thread(upstream: ScriptedUpstream) -> Iterator[str]:
    """Serves the upstream on loopback from a thread of its own; yields its base URL."""
    port = free_loopback_port()
    config = uvicorn.Config(upstream.app, host="127.0.0.1", port=port, log_level="critical")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        threading.Event().wait(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
