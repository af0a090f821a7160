"""Wire formats of messages: reading a posted or stored message, and the shapes every prompt
format shares. One module per format holds its reading and rendering rules."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.core.formats import anthropic, openai, responses
from app.core.messages import Format, JsonObject, Message, Posted, ToolResult


def read_posted(fmt: Format, raw: JsonObject) -> Message:
    """A message from its posted form (validated when it was posted)."""
    if fmt is Format.ANTHROPIC:
        return anthropic.read_message(raw)
    if fmt is Format.RESPONSES:
        return responses.read_item(raw)
    return openai.read_message(raw)


def render_single(fmt: Format, message: Message) -> JsonObject:
    """The message as one object of `fmt` (how it is stored when it was not posted as it is:
    built in code, or changed into a stub)."""
    if message.posted is not None and message.posted.format is fmt:
        return message.posted.raw
    if fmt is Format.ANTHROPIC:
        return anthropic.render_one(message)
    rendered = (responses.render_message if fmt is Format.RESPONSES else openai.render_message)(
        message
    )
    if len(rendered) != 1:
        raise ValueError(f"a {message.role} message with these parts is not one {fmt} object")
    return rendered[0]


def posted_form(message: Message) -> Posted:
    """What is stored of a message: as posted, or as OpenAI renders it."""
    return message.posted or Posted(Format.OPENAI, render_single(Format.OPENAI, message))


def stubbed(message: Message, stub: str) -> Message:
    """An oversize message with its words replaced by the stub, kept in its posted format."""
    changed = message.with_words(stub)
    fmt = message.posted.format if message.posted else Format.OPENAI
    return replace(changed, posted=Posted(fmt, render_single(fmt, changed)))


@dataclass(frozen=True)
class SystemPrompt:
    """C0's words and, when it came in a format, its posted form: OpenAI or Responses
    leading `system` / `developer` messages (a list), or Anthropic's top-level `system`
    (a string or text blocks, `cache_control` included)."""

    text: str
    format: Format | None = None
    posted: Any = None

    def to_json(self) -> JsonObject:
        return {"text": self.text, "format": self.format, "posted": self.posted}

    @classmethod
    def from_json(cls, stored: JsonObject) -> SystemPrompt:
        fmt = stored.get("format")
        return cls(str(stored["text"]), Format(fmt) if fmt else None, stored.get("posted"))


def leading_system(messages: Sequence[Message]) -> int:
    """How many of the posted messages, from the first, are system messages (C0)."""
    count = 0
    for message in messages:
        if message.role != "system":
            break
        count += 1
    return count


def system_from_messages(fmt: Format, messages: Sequence[Message]) -> SystemPrompt:
    """C0 from leading `system` / `developer` messages of an OpenAI or Responses turn."""
    text = "\n\n".join(m.text for m in messages)
    posted = [m.posted.raw for m in messages if m.posted is not None]
    return SystemPrompt(text, fmt, posted)


def split_results(message: Message) -> list[Message]:
    """A message that carries tool results and other parts (an Anthropic user message) as a
    `tool` message with the results, then the rest: formats where results are messages of
    their own need the call's answers right after the call."""
    results = tuple(p for p in message.parts if isinstance(p, ToolResult))
    if not results or message.role == "tool":
        return [message]
    rest = tuple(p for p in message.parts if not isinstance(p, ToolResult))
    split = [Message("tool", results, created_at=message.created_at)]
    if rest:
        split.append(Message(message.role, rest, message.name, message.created_at))
    return split
