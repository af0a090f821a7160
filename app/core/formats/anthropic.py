"""Anthropic Messages, read into the one message model and rendered from it.

Read: `user` and `assistant` messages whose content is a string or blocks: `text`, `image`
and `document` (base64, URL or file sources), `tool_use`, `tool_result` (a string or blocks,
`is_error`), `thinking` (with its signature) and `redacted_thinking`. A block of another type
(server tools, search results, …) is kept as an opaque block, and so are the fields of known
blocks (`cache_control`, `citations`) through the posted message.

Rendered (`render_messages`): the Messages API's rules hold for the whole list, not message by
message. Consecutive messages of one role are merged into one; inside a user message the
`tool_result` blocks come first; the first message is a user message; text blocks are never
empty. Parts Anthropic has no place for (audio, reasoning without a signature, another
format's opaque blocks) are left out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from app.core.messages import (
    Format,
    JsonObject,
    Media,
    MediaKind,
    Message,
    Opaque,
    Part,
    Posted,
    Reasoning,
    Refusal,
    Role,
    Text,
    ToolCall,
    ToolResult,
)

# Opens a window whose oldest messages were offloaded and that now starts with the model's
# reply: Anthropic requires the first message to be the user's.
ARCHIVED_OPENING = "(Earlier turns of this conversation are in Ebbtide's archive.)"
SYSTEM_NOTE = "[system] "  # marks an instruction said mid-conversation, sent as user text


def _source(media: Media) -> JsonObject | None:
    if media.data:
        return {"type": "base64", "media_type": media.media_type, "data": media.data}
    if media.url:
        return {"type": "url", "url": media.url}
    if media.file_id:
        return {"type": "file", "file_id": media.file_id}
    return None


def _read_source(kind: str, block: JsonObject) -> Media | Text:
    media_kind: MediaKind = "image" if kind == "image" else "file"
    source = block.get("source") or {}
    if source.get("type") == "text":  # a plain-text document: its words, searchable
        return Text(str(source.get("data", "")))
    return Media(
        media_kind,
        media_type=source.get("media_type"),
        data=source.get("data"),
        url=source.get("url"),
        file_id=source.get("file_id"),
        filename=block.get("title"),
    )


def _result_content(content: Any) -> tuple[Text | Media, ...]:
    if content is None:
        return ()
    if isinstance(content, str):
        return (Text(content),)
    parts = (read_block(block) for block in content)
    return tuple(p for p in parts if isinstance(p, Text | Media))


def read_block(block: JsonObject) -> Part:
    kind = block.get("type")
    if kind == "text":
        return Text(str(block.get("text", "")))
    if kind in ("image", "document"):
        return _read_source(str(kind), block)
    if kind == "tool_use":
        arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
        return ToolCall(str(block["id"]), str(block.get("name", "")), arguments)
    if kind == "tool_result":
        return ToolResult(
            str(block["tool_use_id"]),
            _result_content(block.get("content")),
            is_error=bool(block.get("is_error", False)),
        )
    if kind == "thinking":
        signature = block.get("signature")
        return Reasoning(str(block.get("thinking", "")), signature, provider="anthropic")
    if kind == "redacted_thinking":
        return Reasoning(encrypted=str(block.get("data", "")), provider="anthropic")
    return Opaque(Format.ANTHROPIC, block)


def read_content(content: Any) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (Text(content),)
    return tuple(read_block(block) for block in content)


def read_message(raw: JsonObject) -> Message:
    """A stored or validated Anthropic message (`created_at` already taken out)."""
    role: Role = "assistant" if raw["role"] == "assistant" else "user"
    return Message(role, read_content(raw["content"]), posted=Posted(Format.ANTHROPIC, raw))


def system_text(system: Any) -> str:
    """The words of a top-level `system` (a string or text blocks)."""
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    return "\n\n".join(str(b.get("text", "")) for b in system if b.get("type") == "text")


def _media_block(media: Media) -> JsonObject | None:
    source = _source(media)
    if source is None or media.kind == "audio":
        return None
    if media.kind == "image":
        return {"type": "image", "source": source}
    return {"type": "document", "source": source}


def render_block(part: Part) -> JsonObject | None:
    """The part as a content block, or None when Anthropic has no place for it."""
    if isinstance(part, Text | Refusal):
        return {"type": "text", "text": part.text} if part.text else None
    if isinstance(part, Media):
        return _media_block(part)
    if isinstance(part, ToolCall):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": part.input_object()}
    if isinstance(part, ToolResult):
        return _result_block(part)
    if isinstance(part, Reasoning):
        if not part.sealed_for_anthropic:
            return None  # Anthropic refuses thinking it did not sign
        if part.encrypted:
            return {"type": "redacted_thinking", "data": part.encrypted}
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    if part.format is Format.ANTHROPIC:
        return part.data
    return None


def _result_block(result: ToolResult) -> JsonObject:
    blocks = [b for b in (render_block(p) for p in result.content) if b is not None]
    block: JsonObject = {"type": "tool_result", "tool_use_id": result.call_id}
    if blocks:
        block["content"] = blocks
    if result.is_error:
        block["is_error"] = True
    return block


def _blocks(message: Message) -> list[JsonObject]:
    """The message's content as a list of blocks (a posted string becomes one text block)."""
    if message.posted is not None and message.posted.format is Format.ANTHROPIC:
        content = message.posted.raw["content"]
        return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    blocks = [b for b in (render_block(p) for p in message.parts) if b is not None]
    if message.role == "system" and blocks and blocks[0]["type"] == "text":
        blocks[0] = {"type": "text", "text": SYSTEM_NOTE + blocks[0]["text"]}
    return blocks


def render_one(message: Message) -> JsonObject:
    """One message on its own (how a message built in code is stored in this format)."""
    role = "assistant" if message.role == "assistant" else "user"
    return {"role": role, "content": _blocks(message)}


def _merge(out: list[JsonObject], role: str, message: Message) -> None:
    if out and out[-1]["role"] == role:
        previous = out[-1]
        previous["content"] = _as_blocks(previous["content"]) + _blocks(message)
    elif message.posted is not None and message.posted.format is Format.ANTHROPIC:
        out.append(dict(message.posted.raw))
    else:
        out.append({"role": role, "content": _blocks(message)})


def _as_blocks(content: Any) -> list[JsonObject]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def results_first(message: JsonObject) -> JsonObject:
    """A user message with its tool results before anything else, as the API requires."""
    content = message["content"]
    if isinstance(content, str):
        return message
    results = [b for b in content if b.get("type") == "tool_result"]
    if not results or content[: len(results)] == results:
        return message
    rest = [b for b in content if b.get("type") != "tool_result"]
    return {**message, "content": results + rest}


def render_messages(messages: Sequence[Message]) -> list[JsonObject]:
    """The window as the Messages API takes it (see the module's rules)."""
    out: list[JsonObject] = []
    for message in messages:
        role = "assistant" if message.role == "assistant" else "user"
        _merge(out, role, message)
    out = [m for m in out if m["content"]]
    out = [results_first(m) if m["role"] == "user" else m for m in out]
    if out and out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": ARCHIVED_OPENING})
    return out
