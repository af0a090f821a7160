"""Server-sent events as the providers stream them, and the reply they add up to.

The proxy relays a stream event by event, each event's bytes exactly as the upstream sent
them, and meanwhile assembles the assistant message from the deltas: text, tool calls (their
arguments arrive as JSON fragments), reasoning and its signature. A stream is complete only
when it says so — Chat Completions with `[DONE]` (or a `finish_reason`), Messages with
`message_stop`, Responses with `response.completed` (or `response.incomplete`, whose output
the model did say); a stream that ends otherwise was cut, and nothing of it is recorded.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from app.core.messages import Format, JsonObject
from app.core.proxy import (
    ProviderReply,
    ProviderUsage,
    anthropic_usage,
    openai_usage,
    responses_reply,
    without_nulls,
)

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
DONE = "[DONE]"


@dataclass(frozen=True)
class SseEvent:
    """One event: its `event:` name (None when unnamed), its data lines joined, and its bytes
    as received (blank line included)."""

    name: str | None
    data: str
    raw: bytes

    @cached_property
    def parsed(self) -> Any:
        """The data as JSON (read once), or None when it is not JSON (`[DONE]`, a ping)."""
        try:
            return json.loads(self.data)
        except ValueError:
            return None


def _parse(raw: bytes) -> SseEvent:
    name = None
    data: list[str] = []
    for line in raw.decode("utf-8", errors="replace").splitlines():
        key, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if key == "event":
            name = value
        elif key == "data":
            data.append(value)
    return SseEvent(name, "\n".join(data), raw)


@dataclass
class SseReader:
    """Splits a byte stream into events, however the bytes were chunked."""

    pending: bytes = b""

    def feed(self, chunk: bytes) -> list[SseEvent]:
        self.pending += chunk
        events = []
        while (found := _EVENT_END.search(self.pending)) is not None:
            raw, self.pending = self.pending[: found.end()], self.pending[found.end() :]
            events.append(_parse(raw))
        return events

    def rest(self) -> SseEvent | None:
        """What is left when the stream ends: an event the upstream did not close."""
        if not self.pending.strip():
            return None
        raw, self.pending = self.pending, b""
        return _parse(raw)


@dataclass
class _ToolCallParts:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class OpenAIStream:
    """A Chat Completions stream's first choice, added up."""

    text: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, _ToolCallParts] = field(default_factory=dict)
    usage: ProviderUsage = field(default_factory=ProviderUsage)
    finished: bool = False  # a finish_reason came
    done: bool = False  # `[DONE]` came

    @property
    def complete(self) -> bool:
        return self.done or self.finished

    @staticmethod
    def usage_only(event: SseEvent) -> bool:
        """The chunk `include_usage` adds: usage and no choices."""
        data = event.parsed
        return isinstance(data, dict) and data.get("choices") == [] and "usage" in data

    def feed(self, event: SseEvent) -> None:
        if event.data.strip() == DONE:
            self.done = True
            return
        data = event.parsed
        if not isinstance(data, dict):
            return
        if data.get("usage"):
            self.usage = openai_usage(data["usage"])
        for choice in data.get("choices") or ():
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: JsonObject) -> None:
        if choice.get("finish_reason"):
            self.finished = True
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return
        for key, into in (
            ("content", self.text),
            ("refusal", self.refusal),
            ("reasoning_content", self.reasoning),
        ):
            if isinstance(delta.get(key), str):
                into.append(delta[key])
        for call in delta.get("tool_calls") or ():
            if isinstance(call, dict):
                self._call(call)

    def _call(self, call: JsonObject) -> None:
        parts = self.calls.setdefault(int(call.get("index", 0)), _ToolCallParts())
        parts.id = call.get("id") or parts.id
        function = call.get("function") or {}
        parts.name = function.get("name") or parts.name
        if isinstance(function.get("arguments"), str):
            parts.arguments.append(function["arguments"])

    def posted(self) -> tuple[JsonObject, ...]:
        return (self.message(),)

    def message(self) -> JsonObject:
        """The assistant message as Chat Completions would have answered it unstreamed."""
        text = "".join(self.text)
        message: JsonObject = {"role": "assistant", "content": text or None}
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": parts.id,
                    "type": "function",
                    "function": {"name": parts.name, "arguments": "".join(parts.arguments)},
                }
                for _, parts in sorted(self.calls.items())
            ]
        elif message["content"] is None:
            message["content"] = ""
        return message


@dataclass
class AnthropicStream:
    """A Messages stream's content blocks, added up."""

    blocks: dict[int, JsonObject] = field(default_factory=dict)
    partial_json: dict[int, list[str]] = field(default_factory=dict)
    usage: ProviderUsage = field(default_factory=ProviderUsage)
    complete: bool = False  # `message_stop` came

    def feed(self, event: SseEvent) -> None:
        data = event.parsed
        if not isinstance(data, dict):
            return
        kind = data.get("type") or event.name
        if kind == "message_start" and isinstance(data.get("message"), dict):
            self._usage(data["message"].get("usage"))
        elif kind == "message_delta":
            self._usage(data.get("usage"))
        elif kind == "message_stop":
            self.complete = True
        elif kind == "content_block_start" and isinstance(data.get("content_block"), dict):
            self.blocks[int(data.get("index", 0))] = dict(data["content_block"])
        elif kind == "content_block_delta" and isinstance(data.get("delta"), dict):
            self._delta(int(data.get("index", 0)), data["delta"])

    def _usage(self, usage: Any) -> None:
        found = anthropic_usage(usage)
        if found.prompt_tokens is not None:
            self.usage = found

    def _delta(self, index: int, delta: JsonObject) -> None:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + str(delta.get("text", ""))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + str(delta.get("signature", ""))
        elif kind == "input_json_delta":
            self.partial_json.setdefault(index, []).append(str(delta.get("partial_json", "")))
        elif kind == "citations_delta" and delta.get("citation") is not None:
            block["citations"] = [*(block.get("citations") or []), delta["citation"]]

    def posted(self) -> tuple[JsonObject, ...]:
        return (self.message(),)

    def message(self) -> JsonObject:
        """The assistant message as Messages would have answered it unstreamed."""
        content = []
        for index, block in sorted(self.blocks.items()):
            if index in self.partial_json:
                fragments = "".join(self.partial_json[index])
                try:
                    block = {**block, "input": json.loads(fragments) if fragments else {}}
                except ValueError:
                    block = {**block, "input": {"arguments": fragments}}
            content.append(without_nulls(block))
        return {"role": "assistant", "content": content}


# Responses events that close the response with what the model said, and the one that
# closes it failed (an error the upstream reported: nothing to record, nothing to add).
RESPONSE_CLOSED = frozenset({"response.completed", "response.incomplete"})
RESPONSE_FAILED = "response.failed"


@dataclass
class ResponsesStream:
    """A Responses stream: its closing event carries the whole response, output and usage."""

    closed: ProviderReply | None = None

    @property
    def complete(self) -> bool:
        return self.closed is not None

    @property
    def usage(self) -> ProviderUsage:
        return self.closed.usage if self.closed is not None else ProviderUsage()

    @staticmethod
    def closes(event: SseEvent) -> bool:
        data = event.parsed
        return isinstance(data, dict) and data.get("type") in RESPONSE_CLOSED

    def feed(self, event: SseEvent) -> None:
        if self.closes(event):
            self.closed = responses_reply(event.parsed.get("response"))

    def posted(self) -> tuple[JsonObject, ...]:
        return self.closed.posted if self.closed is not None else ()


StreamedReply = OpenAIStream | AnthropicStream | ResponsesStream


def streamed_reply(fmt: Format) -> StreamedReply:
    """An empty reply to add a stream of the format's events up into."""
    if fmt is Format.OPENAI:
        return OpenAIStream()
    return AnthropicStream() if fmt is Format.ANTHROPIC else ResponsesStream()


def ends_stream(fmt: Format, event: SseEvent) -> bool:
    """The event after which the reply is whole: `[DONE]`, `message_stop`, or the
    response's closing event."""
    if fmt is Format.OPENAI:
        return event.data.strip() == DONE
    if fmt is Format.RESPONSES:
        return ResponsesStream.closes(event)
    data = event.parsed
    return isinstance(data, dict) and data.get("type") == "message_stop"


CUT_MESSAGE = "the upstream's stream ended before it was complete; nothing of it was recorded"


def stream_cut_event(fmt: Format) -> bytes:
    """The error event that ends a cut stream, in the provider's form: OpenAI's clients raise
    on an event whose data has `error` (Chat Completions chunks and Responses events alike),
    Messages clients on an `error` event."""
    if fmt is not Format.ANTHROPIC:
        error = {"message": CUT_MESSAGE, "type": "upstream_stream_cut", "code": "stream_cut"}
        data = {"error": error} if fmt is Format.OPENAI else {"type": "error", "error": error}
        name = "" if fmt is Format.OPENAI else "event: error\n"
        return f"{name}data: {json.dumps(data)}\n\n".encode()
    body = {"type": "error", "error": {"type": "api_error", "message": CUT_MESSAGE}}
    return f"event: error\ndata: {json.dumps(body)}\n\n".encode()


def is_error_event(event: SseEvent) -> bool:
    """An error the upstream itself reported mid-stream (then it needs no second one)."""
    if event.name in ("error", RESPONSE_FAILED):
        return True
    data = event.parsed
    return isinstance(data, dict) and (
        data.get("type") in ("error", RESPONSE_FAILED) or "error" in data
    )
