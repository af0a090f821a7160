"""The one message model every format is read into and rendered from (docs/DESIGN.md §6).

A message is a role and ordered parts: text, media (image, audio, file), a tool call, a tool
result, reasoning (with the provider's signature), a refusal, or an opaque block of a kind this
service does not know (kept as it came). Roles are the conversation's: `system` (an instruction
said mid-conversation; the leading one is C0, kept apart), `user`, `assistant`, and `tool`
(results only, as OpenAI posts them; an Anthropic user message may carry results too).

`posted` keeps what the client sent, in its format, key for key. A prompt in the same format
gives that object back unchanged; another format is rendered from the parts. The parts hold
everything a format needs; only provider-specific fields that another format has no place for
(`cache_control`, `annotations`, ids of stored items) stay behind in `posted`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

JsonObject = dict[str, Any]
Role = Literal["system", "user", "assistant", "tool"]
MediaKind = Literal["image", "audio", "file"]


class Format(StrEnum):
    """A wire format: what a client posts, and what a prompt is rendered in."""

    OPENAI = "openai"  # Chat Completions messages
    ANTHROPIC = "anthropic"  # Messages API
    RESPONSES = "responses"  # Responses API input items


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Media:
    """An image, audio clip or file: inline bytes (`data`, base64), a link the provider
    fetches (`url`), or a provider's file id. `detail` is OpenAI's image detail."""

    kind: MediaKind
    media_type: str | None = None
    data: str | None = None
    url: str | None = None
    file_id: str | None = None
    filename: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class ToolCall:
    """A call the model made; `arguments` is the JSON text of its input."""

    id: str
    name: str
    arguments: str = ""

    def as_openai(self) -> JsonObject:
        return {"id": self.id, "type": "function", "function": self._function()}

    def _function(self) -> JsonObject:
        return {"name": self.name, "arguments": self.arguments}

    def input_object(self) -> JsonObject:
        """The arguments as Anthropic's `input`, which must be an object: `{}` when empty,
        and arguments that are not a JSON object (a model can emit broken ones) kept whole
        under `arguments`."""
        if not self.arguments.strip():
            return {}
        try:
            value = json.loads(self.arguments)
        except ValueError:
            return {"arguments": self.arguments}
        return value if isinstance(value, dict) else {"arguments": self.arguments}


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    content: tuple[Text | Media, ...] = ()
    is_error: bool = False

    @property
    def text(self) -> str:
        return "\n".join(p.text for p in self.content if isinstance(p, Text))


@dataclass(frozen=True)
class Reasoning:
    """The model's thinking. `signature` (Anthropic thinking) or `encrypted` (Anthropic
    redacted thinking, OpenAI encrypted reasoning) must go back unchanged to `provider`, the
    only one that can read them; plain reasoning text (DeepSeek, Qwen) has no provider."""

    text: str = ""
    signature: str | None = None
    encrypted: str | None = None
    provider: Literal["anthropic", "openai"] | None = None

    @property
    def sealed_for_anthropic(self) -> bool:
        return self.provider == "anthropic" and bool(self.signature or self.encrypted)


@dataclass(frozen=True)
class Refusal:
    text: str


@dataclass(frozen=True)
class Opaque:
    """A block of a kind this service does not model, kept as it came in its format."""

    format: Format
    data: JsonObject

    @property
    def json_text(self) -> str:
        return json.dumps(self.data, ensure_ascii=False)


Part = Text | Media | ToolCall | ToolResult | Reasoning | Refusal | Opaque


@dataclass(frozen=True)
class Posted:
    """The message as the client sent it (`created_at` aside), in `format`."""

    format: Format
    raw: JsonObject


@dataclass(frozen=True)
class Message:
    role: Role
    parts: tuple[Part, ...]
    name: str | None = None
    # When it was said: stored, shown in chunk headers and recall items, and matched by dates
    # in questions. None: the time the service received it.
    created_at: datetime | None = None
    posted: Posted | None = field(default=None, compare=False)

    @classmethod
    def of(
        cls,
        role: Role,
        text: str | None = None,
        *,
        calls: Iterable[ToolCall] = (),
        answers: str | None = None,
        name: str | None = None,
        created_at: datetime | None = None,
    ) -> Message:
        """A plain message: text, an assistant's calls, or (role `tool`) the result of call
        `answers`."""
        if answers is not None:
            result = ToolResult(answers, (Text(text),) if text is not None else ())
            return cls(role, (result,), name=name, created_at=created_at)
        parts: list[Part] = [Text(text)] if text is not None else []
        parts.extend(calls)
        return cls(role, tuple(parts), name=name, created_at=created_at)

    @property
    def words(self) -> str:
        """What the speaker said: its text and refusals (tool results aside)."""
        return "\n".join(p.text for p in self.parts if isinstance(p, Text | Refusal) and p.text)

    @property
    def text(self) -> str:
        """Everything in words: text and refusals, and the text of tool results."""
        pieces = (p.text for p in self.parts if isinstance(p, Text | Refusal | ToolResult))
        return "\n".join(piece for piece in pieces if piece)

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolCall))

    @property
    def results(self) -> tuple[ToolResult, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolResult))

    @property
    def answered_ids(self) -> tuple[str, ...]:
        return tuple(r.call_id for r in self.results)

    @property
    def media(self) -> tuple[Media, ...]:
        """Every image, clip and file, tool results' included."""
        found: list[Media] = []
        for part in self.parts:
            if isinstance(part, Media):
                found.append(part)
            elif isinstance(part, ToolResult):
                found.extend(p for p in part.content if isinstance(p, Media))
        return tuple(found)

    def with_words(self, text: str) -> Message:
        """The message with `text` in place of everything it said in words (an oversize
        message's stub): the first text, or the first tool result's text, holds it; calls,
        result ids and media stay. No longer the client's posted object."""
        placed = False
        parts: list[Part] = []
        for part in self.parts:
            if isinstance(part, Text | Refusal):
                if not placed:
                    parts.append(Text(text))
                    placed = True
            elif isinstance(part, ToolResult) and part.text:
                kept: tuple[Text | Media, ...] = tuple(
                    p for p in part.content if isinstance(p, Media)
                )
                content = kept if placed else (Text(text), *kept)
                parts.append(replace(part, content=content))
                placed = True
            else:
                parts.append(part)
        if not placed:
            parts.insert(0, Text(text))
        return Message(self.role, tuple(parts), self.name, self.created_at)
