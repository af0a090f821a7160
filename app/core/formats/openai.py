"""OpenAI Chat Completions messages, read into the one message model and rendered from it.

Read: `system` and `developer` messages (role `system` inside), `user` content as a string or
parts (`text`, `image_url`, `input_audio`, `file`), `assistant` replies as received (content
as a string or parts, `refusal`, `audio`, `tool_calls`, and the reasoning that
OpenAI-compatible providers return: `reasoning_content` from DeepSeek and Qwen, LiteLLM's
`thinking_blocks` with their signatures), `tool` results. A part of an unknown type is kept
as an opaque block.

Rendered: a message posted in this format comes back as posted. Others are rendered from their
parts; one message may become several (an Anthropic user message that carries tool results
becomes `tool` messages, then the rest as a user message).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

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
    Role,
    Text,
    ToolCall,
    ToolResult,
)

# What each posted role is inside: `developer` is OpenAI's newer name for `system`.
ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}


def data_uri(media_type: str | None, data: str) -> str:
    return f"data:{media_type or 'application/octet-stream'};base64,{data}"


def split_data_uri(uri: str) -> tuple[str | None, str] | None:
    """(media type, base64 payload) of a `data:…;base64,` URI, else None."""
    if not uri.startswith("data:") or ";base64," not in uri:
        return None
    head, _, payload = uri.partition(";base64,")
    return head.removeprefix("data:") or None, payload


def image_from(url: object, detail: str | None, file_id: str | None = None) -> Media:
    """An image part's media: inline when its URL is a data URI, else a link or file id."""
    inline = split_data_uri(url) if isinstance(url, str) else None
    if inline is not None:
        return Media("image", media_type=inline[0], data=inline[1], detail=detail)
    return Media("image", url=url if isinstance(url, str) else None, file_id=file_id, detail=detail)


def file_from(
    file_data: object, file_id: str | None, filename: str | None, url: str | None = None
) -> Media:
    """A file part's media: `file_data` is a data URI (or, as some clients send, bare base64)."""
    inline = split_data_uri(str(file_data or ""))
    return Media(
        "file",
        media_type=inline[0] if inline else None,
        data=inline[1] if inline else (str(file_data) if file_data is not None else None),
        url=url,
        file_id=file_id,
        filename=filename,
    )


def _image(part: JsonObject) -> Media:
    image = part.get("image_url") or {}
    return image_from(str(image.get("url", "")), image.get("detail"))


def _file(part: JsonObject) -> Media:
    file = part.get("file") or {}
    return file_from(file.get("file_data"), file.get("file_id"), file.get("filename"))


def read_part(part: JsonObject) -> Part:
    kind = part.get("type")
    if kind == "text":
        return Text(str(part.get("text", "")))
    if kind == "image_url":
        return _image(part)
    if kind == "input_audio":
        audio = part.get("input_audio") or {}
        fmt = audio.get("format")
        return Media("audio", media_type=f"audio/{fmt}" if fmt else None, data=audio.get("data"))
    if kind == "file":
        return _file(part)
    if kind == "refusal":
        return Refusal(str(part.get("refusal", "")))
    return Opaque(Format.OPENAI, part)


def read_content(content: Any) -> tuple[Part, ...]:
    if content is None:
        return ()
    if isinstance(content, str):
        return (Text(content),)
    return tuple(read_part(part) for part in content)


def _reasoning(raw: JsonObject) -> list[Part]:
    blocks = raw.get("thinking_blocks")
    if blocks:
        return [
            Reasoning(
                text=str(block.get("thinking", "")),
                signature=block.get("signature"),
                encrypted=block.get("data") if block.get("type") == "redacted_thinking" else None,
                provider="anthropic",  # LiteLLM's carrier for Claude's thinking
            )
            for block in blocks
        ]
    text = raw.get("reasoning_content")
    return [Reasoning(text=str(text))] if text else []


def _call(raw: JsonObject) -> ToolCall:
    if raw.get("type") == "custom":  # a custom tool's free-text input
        custom = raw.get("custom") or {}
        return ToolCall(str(raw["id"]), str(custom.get("name", "")), str(custom.get("input", "")))
    function = raw.get("function") or {}
    return ToolCall(str(raw["id"]), str(function.get("name", "")), function.get("arguments") or "")


def read_message(raw: JsonObject) -> Message:
    """A stored or validated OpenAI message (`created_at` already taken out)."""
    role = ROLES[raw["role"]]
    parts: list[Part]
    if role == "tool":
        parts = [ToolResult(str(raw["tool_call_id"]), _result_content(raw.get("content")))]
    else:
        parts = _reasoning(raw) if role == "assistant" else []
        parts.extend(read_content(raw.get("content")))
        if raw.get("refusal"):
            parts.append(Refusal(str(raw["refusal"])))
        if raw.get("audio"):
            parts.append(Media("audio", file_id=str(raw["audio"].get("id", ""))))
        parts.extend(_call(call) for call in raw.get("tool_calls") or [])
    return Message(role, tuple(parts), name=raw.get("name"), posted=Posted(Format.OPENAI, raw))


def _result_content(content: Any) -> tuple[Text | Media, ...]:
    return tuple(p for p in read_content(content) if isinstance(p, Text | Media))


def render_part(part: Part) -> JsonObject | None:
    """A content part, or None when Chat Completions has no place for it."""
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, Refusal):
        return {"type": "refusal", "refusal": part.text}
    if isinstance(part, Media):
        return _render_media(part)
    if isinstance(part, Opaque) and part.format is Format.OPENAI:
        return part.data
    return None


def _render_media(media: Media) -> JsonObject | None:
    if media.kind == "image" and (media.data or media.url):
        url = data_uri(media.media_type, media.data) if media.data else media.url
        image: JsonObject = {"url": url}
        if media.detail:
            image["detail"] = media.detail
        return {"type": "image_url", "image_url": image}
    if media.kind == "audio" and media.data:
        fmt = (media.media_type or "audio/wav").removeprefix("audio/")
        return {"type": "input_audio", "input_audio": {"data": media.data, "format": fmt}}
    if media.kind == "file":
        file: JsonObject = {}
        if media.data:
            file["file_data"] = data_uri(media.media_type, media.data)
        if media.file_id:
            file["file_id"] = media.file_id
        if media.filename:
            file["filename"] = media.filename
        return {"type": "file", "file": file} if file else None
    return None


def _content(parts: Sequence[Part]) -> str | list[JsonObject] | None:
    """A lone text part as a string (what every OpenAI-compatible server takes), else parts."""
    if len(parts) == 1 and isinstance(parts[0], Text):
        return parts[0].text
    rendered = [r for r in (render_part(p) for p in parts) if r is not None]
    return rendered or None


def _assistant(message: Message) -> JsonObject:
    reasoning = [p for p in message.parts if isinstance(p, Reasoning)]
    said = [p for p in message.parts if isinstance(p, Text | Opaque)]
    refusals = [p for p in message.parts if isinstance(p, Refusal)]
    out: JsonObject = {"role": "assistant"}
    content = _content(said)
    if content is not None or not message.calls:
        out["content"] = content
    if refusals:
        out["refusal"] = "\n".join(p.text for p in refusals)
    if message.calls:
        out["tool_calls"] = [call.as_openai() for call in message.calls]
    words = "\n".join(p.text for p in reasoning if p.text)
    if words:
        out["reasoning_content"] = words
    sealed = [p for p in reasoning if p.sealed_for_anthropic]
    if sealed:
        out["thinking_blocks"] = [_thinking_block(p) for p in sealed]
    return out


def _thinking_block(part: Reasoning) -> JsonObject:
    if part.encrypted:
        return {"type": "redacted_thinking", "data": part.encrypted}
    return {"type": "thinking", "thinking": part.text, "signature": part.signature}


def _results(message: Message) -> list[JsonObject]:
    out: list[JsonObject] = []
    for result in message.results:
        content = _content(result.content)
        out.append(
            {
                "role": "tool",
                "tool_call_id": result.call_id,
                "content": content if isinstance(content, str) else result.text,
            }
        )
    return out


def render_message(message: Message) -> list[JsonObject]:
    """The message as Chat Completions takes it (one message may become several)."""
    if message.posted is not None and message.posted.format is Format.OPENAI:
        return [message.posted.raw]
    if message.role == "assistant":
        return [_assistant(message)]
    out = _results(message)
    rest = [p for p in message.parts if not isinstance(p, ToolResult)]
    if rest:
        role = "system" if message.role == "system" else "user"
        body: JsonObject = {"role": role, "content": _content(rest) or ""}
        if message.name:
            body["name"] = message.name
        out.append(body)
    return out


def merged_assistant_runs(messages: Sequence[Message]) -> list[Message]:
    """Consecutive assistant messages posted one item each (Responses `function_call` and
    `reasoning` items) as one message: Chat Completions wants one assistant message with all
    the calls its tool messages answer."""
    out: list[Message] = []
    for message in messages:
        previous = out[-1] if out else None
        if (
            previous is not None
            and message.role == previous.role == "assistant"
            and not _posted_here(previous)
            and not _posted_here(message)
        ):
            out[-1] = Message("assistant", previous.parts + message.parts, previous.name)
        else:
            out.append(message)
    return out


def _posted_here(message: Message) -> bool:
    return message.posted is not None and message.posted.format is Format.OPENAI


def as_json(message: Message) -> JsonObject:
    """One message as a client posts it in this format, `created_at` included when known."""
    rendered = render_message(message)
    if len(rendered) != 1:
        raise ValueError(f"a {message.role} message with these parts is not one OpenAI message")
    if message.created_at is None:
        return rendered[0]
    return {**rendered[0], "created_at": message.created_at.isoformat()}


def call_arguments_json(calls: Sequence[ToolCall]) -> str:
    """The calls as OpenAI's token-counting recipe sees them."""
    return json.dumps([call.as_openai() for call in calls], ensure_ascii=False)
