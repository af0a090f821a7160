"""OpenAI Responses API input items, read into the one message model and rendered from it.

Rendered from parts (a message that came in another format): the model's words as an
assistant message, its calls as `function_call` items, results as `function_call_output`;
reasoning is left out (see `render_message`).

One item is one message: a `message` item (the `type` may be left out; content a string or
`input_text` / `input_image` / `input_file` / `input_audio` parts, or, from the model,
`output_text` and `refusal`), a `function_call` (an assistant message with one call), a
`function_call_output` (a tool result), a `reasoning` item (its summary and text, and its
`encrypted_content`). Any other item (built-in tool calls, item references) is kept opaque.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.core.formats.openai import ROLES, data_uri, file_from, image_from
from app.core.messages import (
    Format,
    JsonObject,
    Media,
    Message,
    Opaque,
    Part,
    Posted,
    Reasoning,
    Refusal,
    Text,
    ToolCall,
    ToolResult,
)


def _image(part: JsonObject) -> Media:
    return image_from(part.get("image_url"), part.get("detail"), part.get("file_id"))


def _file(part: JsonObject) -> Media:
    return file_from(
        part.get("file_data"), part.get("file_id"), part.get("filename"), part.get("file_url")
    )


def read_part(part: JsonObject) -> Part:
    kind = part.get("type")
    if kind in ("input_text", "output_text"):
        return Text(str(part.get("text", "")))
    if kind == "refusal":
        return Refusal(str(part.get("refusal", "")))
    if kind == "input_image":
        return _image(part)
    if kind == "input_file":
        return _file(part)
    if kind == "input_audio":
        audio = part.get("input_audio") or {}
        fmt = audio.get("format")
        return Media("audio", media_type=f"audio/{fmt}" if fmt else None, data=audio.get("data"))
    return Opaque(Format.RESPONSES, part)


def _content(content: Any) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (Text(content),)
    return tuple(read_part(part) for part in content or [])


def _reasoning(item: JsonObject) -> tuple[Part, ...]:
    pieces = [str(s.get("text", "")) for s in item.get("summary") or []]
    pieces += [str(c.get("text", "")) for c in item.get("content") or []]
    text = "\n".join(p for p in pieces if p)
    return (Reasoning(text, encrypted=item.get("encrypted_content"), provider="openai"),)


def read_item(raw: JsonObject) -> Message:
    """A stored or validated input item (`created_at` already taken out)."""
    kind = raw.get("type", "message")
    posted = Posted(Format.RESPONSES, raw)
    if kind == "message":
        return Message(ROLES[raw["role"]], _content(raw.get("content")), posted=posted)
    if kind == "function_call":
        call = ToolCall(str(raw["call_id"]), str(raw["name"]), str(raw.get("arguments", "")))
        return Message("assistant", (call,), posted=posted)
    if kind == "function_call_output":
        output = raw.get("output")
        content = tuple(p for p in _content(output) if isinstance(p, Text | Media))
        return Message("tool", (ToolResult(str(raw["call_id"]), content),), posted=posted)
    if kind == "reasoning":
        return Message("assistant", _reasoning(raw), posted=posted)
    return Message("assistant", (Opaque(Format.RESPONSES, raw),), posted=posted)


def _render_media(media: Media) -> JsonObject | None:
    if media.kind == "image":
        url = data_uri(media.media_type, media.data) if media.data else media.url
        image: JsonObject = {"type": "input_image", "detail": media.detail or "auto"}
        if url:
            image["image_url"] = url
        if media.file_id:
            image["file_id"] = media.file_id
        return image if url or media.file_id else None
    if media.kind == "file":
        file: JsonObject = {"type": "input_file"}
        if media.data:
            file["file_data"] = data_uri(media.media_type, media.data)
        for key, value in (
            ("file_url", media.url),
            ("file_id", media.file_id),
            ("filename", media.filename),
        ):
            if value:
                file[key] = value
        return file
    return None  # audio goes to Chat Completions, not to Responses input


def _render_part(part: Part) -> JsonObject | None:
    if isinstance(part, Text | Refusal):
        return {"type": "input_text", "text": part.text}
    if isinstance(part, Media):
        return _render_media(part)
    if isinstance(part, Opaque) and part.format is Format.RESPONSES:
        return part.data
    return None


def _message_item(role: str, parts: Sequence[Part]) -> JsonObject | None:
    if role == "assistant":  # an output message needs the id the API gave it: words only
        words = "\n".join(p.text for p in parts if isinstance(p, Text | Refusal) and p.text)
        return {"role": "assistant", "content": words} if words else None
    content = [r for r in (_render_part(p) for p in parts) if r is not None]
    return {"role": role, "content": content} if content else None


def render_message(message: Message) -> list[JsonObject]:
    """The message as input items (one message may become several)."""
    if message.posted is not None and message.posted.format is Format.RESPONSES:
        return [message.posted.raw]
    role = "user" if message.role == "tool" else message.role
    # Reasoning from elsewhere is left out: a reasoning item needs the id OpenAI gave it, and
    # another provider's encrypted thinking means nothing to OpenAI.
    calls = [_function_call(p) for p in message.parts if isinstance(p, ToolCall)]
    results = [_function_output(p) for p in message.parts if isinstance(p, ToolResult)]
    said = [p for p in message.parts if isinstance(p, Text | Refusal | Media | Opaque)]
    item = _message_item(role, said)
    words = [item] if item is not None else []
    # The model's words come before its calls; tool results come before the user's new words.
    return words + calls if role == "assistant" else results + words


def _function_call(call: ToolCall) -> JsonObject:
    return {
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments,
    }


def _function_output(result: ToolResult) -> JsonObject:
    return {"type": "function_call_output", "call_id": result.call_id, "output": result.text}
