"""A typed client of Ebbtide's HTTP API, sync (`Ebbtide`) and async (`AsyncEbbtide`).

    from ebbtide.client import Ebbtide

    ebbtide = Ebbtide("http://127.0.0.1:8000", api_key=None)
    turn = ebbtide.turn("ticket-4711", [{"role": "user", "content": "Hello"}], model="gpt-4o")
    reply = openai.chat.completions.create(model="gpt-4o", messages=turn.messages)

Every turn carries an Idempotency-Key, generated per call and reused by its retries, so a turn
whose answer was lost on the way is answered again and stored once. 429 and 503 answers and
connection failures are retried with exponential backoff, honouring `Retry-After`; other
errors raise `EbbtideError` with the service's code, message and details.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

import httpx
from pydantic import BaseModel

from ebbtide.types import (
    Chunk,
    JsonObject,
    MemoryAnswer,
    RecallAnswer,
    Remembered,
    Status,
    ToolDefinitions,
    TurnResult,
)

MEMORY_TOOL = "memory"
RETRIED_STATUSES = frozenset({429, 503})
Answer = TypeVar("Answer", bound=BaseModel)


class EbbtideError(Exception):
    """An error answer: the HTTP status and the body's `code`, `message` and `details`."""

    def __init__(self, status: int, code: str, message: str, details: JsonObject) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.details = status, code, message, details

    @classmethod
    def of(cls, response: httpx.Response) -> EbbtideError:
        try:
            error = response.json()["error"]
            return cls(response.status_code, error["code"], error["message"], error["details"])
        except (ValueError, KeyError, TypeError):
            return cls(response.status_code, "http_error", response.text[:500], {})


@dataclass(frozen=True)
class Retries:
    """How often and how long to wait: `base_s` doubled each attempt, at most `max_s`, or
    the server's `Retry-After` when it says (capped the same way)."""

    attempts: int = 3
    base_s: float = 0.5
    max_s: float = 20.0

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        after = response.headers.get("retry-after") if response is not None else None
        if after is not None:
            try:
                return min(self.max_s, max(0.0, float(after)))
            except ValueError:
                pass
        return min(self.max_s, self.base_s * 2.0**attempt)


@dataclass(frozen=True)
class _Call(Generic[Answer]):
    """One request, with its answer's type; the key stays the same across retries."""

    method: Literal["GET", "POST"]
    path: str
    answer: type[Answer]
    body: JsonObject | None = None
    headers: dict[str, str] = field(default_factory=dict)


def _without_none(values: dict[str, Any]) -> JsonObject:
    return {key: value for key, value in values.items() if value is not None}


def _turn(
    session_id: str, messages: Sequence[JsonObject], options: dict[str, Any]
) -> _Call[TurnResult]:
    key = options.pop("idempotency_key", None) or f"ebt-{uuid.uuid4()}"
    body = {"messages": list(messages), **_without_none(options)}
    return _Call("POST", f"/sessions/{session_id}/turn", TurnResult, body, {"Idempotency-Key": key})


def _recall(
    session_id: str, query: str, top_k: int | None, budget_tokens: int | None
) -> _Call[RecallAnswer]:
    body = _without_none({"query": query, "top_k": top_k, "budget_tokens": budget_tokens})
    return _Call("POST", f"/sessions/{session_id}/recall", RecallAnswer, body)


def _remember(session_id: str, text: str, tags: Sequence[str] | None) -> _Call[Remembered]:
    body = _without_none({"text": text, "tags": list(tags) if tags is not None else None})
    return _Call("POST", f"/sessions/{session_id}/remember", Remembered, body)


def _memory(session_id: str, arguments: JsonObject) -> _Call[MemoryAnswer]:
    return _Call("POST", f"/sessions/{session_id}/memory", MemoryAnswer, arguments)


@dataclass(frozen=True)
class ToolCallRequest:
    """A model's call of the memory tool, from an OpenAI tool call or an Anthropic
    `tool_use` block (SDK objects or their dicts)."""

    id: str
    arguments: JsonObject
    provider: Literal["openai", "anthropic"]

    @classmethod
    def of(cls, call: Any) -> ToolCallRequest | None:
        """The call, or None when it is no call of the memory tool."""
        data = call if isinstance(call, dict) else call.model_dump()
        if data.get("type") == "tool_use":
            if data.get("name") != MEMORY_TOOL:
                return None
            return cls(data["id"], dict(data.get("input") or {}), "anthropic")
        function = data.get("function") or {}
        if function.get("name") != MEMORY_TOOL:
            return None
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = {"type": "invalid", "arguments": function.get("arguments")}
        return cls(data["id"], arguments if isinstance(arguments, dict) else {}, "openai")

    def result(self, text: str, *, is_error: bool = False) -> JsonObject:
        """The message (OpenAI) or content block (Anthropic) that answers the call."""
        if self.provider == "openai":
            return {"role": "tool", "tool_call_id": self.id, "content": text}
        block: JsonObject = {"type": "tool_result", "tool_use_id": self.id, "content": text}
        if is_error:
            block["is_error"] = True
        return block


def _answer_text(outcome: MemoryAnswer | EbbtideError) -> tuple[str, bool]:
    if isinstance(outcome, EbbtideError):
        return f"memory tool error ({outcome.code}): {outcome.message}", True
    return outcome.text, False


class _Base:
    def __init__(self, base_url: str, api_key: str | None, retries: Retries) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.retries = retries

    def _request(self, call: _Call[Any]) -> dict[str, Any]:
        return {
            "method": call.method,
            "url": self.base_url + call.path,
            "json": call.body,
            "headers": {**self.headers, **call.headers},
        }

    def _done(self, call: _Call[Answer], response: httpx.Response) -> Answer:
        if response.is_success:
            return call.answer.model_validate(response.json())
        raise EbbtideError.of(response)

    def _retry(self, attempt: int, response: httpx.Response | None) -> float | None:
        """The pause before the next attempt, or None when this answer is final."""
        if attempt + 1 >= self.retries.attempts:
            return None
        if response is not None and response.status_code not in RETRIED_STATUSES:
            return None
        return self.retries.delay(attempt, response)


class Ebbtide(_Base):
    """The sync client. `http` may be your own httpx.Client (its base URL is not used)."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        api_key: str | None = None,
        *,
        timeout_s: float = 30.0,
        retries: Retries = Retries(),
        http: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(base_url, api_key, retries)
        self.http = http or httpx.Client(timeout=timeout_s)
        self._sleep = sleep

    def _run(self, call: _Call[Answer]) -> Answer:
        attempt = 0
        while True:
            try:
                response = self.http.request(**self._request(call))
            except httpx.TransportError:
                if (pause := self._retry(attempt, None)) is None:
                    raise
            else:
                if (pause := self._retry(attempt, response)) is None:
                    return self._done(call, response)
            self._sleep(pause)
            attempt += 1

    def turn(self, session_id: str, messages: Sequence[JsonObject], **options: Any) -> TurnResult:
        """Posts the turn's new messages; `options` are the turn's fields (`system`,
        `model`, `tools`, `context_window`, `format`, `prompt_format`, `recall`,
        `carry_facts={"from": session, "ids": [...]}`, …) and `idempotency_key` (default: a
        new one)."""
        return self._run(_turn(session_id, messages, options))

    def recall(
        self,
        session_id: str,
        query: str,
        *,
        top_k: int | None = None,
        budget_tokens: int | None = None,
    ) -> RecallAnswer:
        return self._run(_recall(session_id, query, top_k, budget_tokens))

    def remember(self, session_id: str, text: str, tags: Sequence[str] | None = None) -> Remembered:
        return self._run(_remember(session_id, text, tags))

    def status(self, session_id: str) -> Status:
        return self._run(_Call("GET", f"/sessions/{session_id}/status", Status))

    def chunk(self, session_id: str, chunk_id: str) -> Chunk:
        return self._run(_Call("GET", f"/sessions/{session_id}/chunks/{chunk_id}", Chunk))

    def memory(self, session_id: str, arguments: JsonObject) -> MemoryAnswer:
        return self._run(_memory(session_id, arguments))

    def memory_tool(self) -> ToolDefinitions:
        """The memory tool's definitions, with only the types this key may call."""
        return self._run(_Call("GET", "/tools/memory", ToolDefinitions))

    def run_memory_call(self, session_id: str, call: Any) -> JsonObject | None:
        """Runs a model's memory tool call and answers the message (or block) to send back;
        an error is answered to the model, not raised. None: not a memory tool call."""
        request = ToolCallRequest.of(call)
        if request is None:
            return None
        try:
            outcome: MemoryAnswer | EbbtideError = self.memory(session_id, request.arguments)
        except EbbtideError as error:
            outcome = error
        text, failed = _answer_text(outcome)
        return request.result(text, is_error=failed)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Ebbtide:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class AsyncEbbtide(_Base):
    """The async client; the same methods, awaited."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        api_key: str | None = None,
        *,
        timeout_s: float = 30.0,
        retries: Retries = Retries(),
        http: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(base_url, api_key, retries)
        self.http = http or httpx.AsyncClient(timeout=timeout_s)

    async def _run(self, call: _Call[Answer]) -> Answer:
        attempt = 0
        while True:
            try:
                response = await self.http.request(**self._request(call))
            except httpx.TransportError:
                if (pause := self._retry(attempt, None)) is None:
                    raise
            else:
                if (pause := self._retry(attempt, response)) is None:
                    return self._done(call, response)
            await asyncio.sleep(pause)
            attempt += 1

    async def turn(
        self, session_id: str, messages: Sequence[JsonObject], **options: Any
    ) -> TurnResult:
        return await self._run(_turn(session_id, messages, options))

    async def recall(
        self,
        session_id: str,
        query: str,
        *,
        top_k: int | None = None,
        budget_tokens: int | None = None,
    ) -> RecallAnswer:
        return await self._run(_recall(session_id, query, top_k, budget_tokens))

    async def remember(
        self, session_id: str, text: str, tags: Sequence[str] | None = None
    ) -> Remembered:
        return await self._run(_remember(session_id, text, tags))

    async def status(self, session_id: str) -> Status:
        return await self._run(_Call("GET", f"/sessions/{session_id}/status", Status))

    async def chunk(self, session_id: str, chunk_id: str) -> Chunk:
        return await self._run(_Call("GET", f"/sessions/{session_id}/chunks/{chunk_id}", Chunk))

    async def memory(self, session_id: str, arguments: JsonObject) -> MemoryAnswer:
        return await self._run(_memory(session_id, arguments))

    async def memory_tool(self) -> ToolDefinitions:
        return await self._run(_Call("GET", "/tools/memory", ToolDefinitions))

    async def run_memory_call(self, session_id: str, call: Any) -> JsonObject | None:
        request = ToolCallRequest.of(call)
        if request is None:
            return None
        try:
            outcome: MemoryAnswer | EbbtideError = await self.memory(session_id, request.arguments)
        except EbbtideError as error:
            outcome = error
        text, failed = _answer_text(outcome)
        return request.result(text, is_error=failed)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncEbbtide:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()


@contextmanager
def sync_client(given: Ebbtide | str, api_key: str | None = None) -> Iterator[Ebbtide]:
    """`given` itself when it is a client (whoever made it closes it), else a client of that
    base URL, closed when the block ends: adapters that are handed a URL leak no socket."""
    if isinstance(given, Ebbtide):
        yield given
        return
    with Ebbtide(given, api_key) as made:
        yield made


@asynccontextmanager
async def async_client(
    given: AsyncEbbtide | str, api_key: str | None = None
) -> AsyncIterator[AsyncEbbtide]:
    """As `sync_client`, for the async client."""
    if isinstance(given, AsyncEbbtide):
        yield given
        return
    async with AsyncEbbtide(given, api_key) as made:
        yield made
