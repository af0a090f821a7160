"""Prompt assembly in cache-stable order (docs/DESIGN.md §1), in four prompt formats.

Order: C0 (system prompt) ⊕ C2 (scratchpad block) ⊕ C1 (window, recalled blocks where they
were injected) ⊕ x_t. A recalled block goes just before the user message it was injected with
and stays there until the next offload, so between offloads each prompt extends the one
before; tool results stay right after the call that asked for them.

- `openai`: C0 as posted (or one system message), the notes as a system message, the window
  as posted, each recalled block a system message of its own.
- `openai-single-system`: one leading system message (C0 and the notes), a recalled block
  inside the user message it precedes, an instruction said mid-conversation sent as user
  text, and a user message first: what strict chat templates accept (Qwen, MiniMax, Llama).
- `anthropic`: a top-level `system` (text blocks: C0, the notes) and Messages-API messages;
  a recalled block is a text block of the user turn it precedes. `cache_control`
  breakpoints mark the end of C0 + C2, the end of what the previous turns left in the
  window, and the end of the prompt; Anthropic takes four at most, so markers the client
  put on message blocks give way (those on its system blocks are kept).
- `responses`: Responses API input items, laid out as `openai`.

In every format the conversation after the system messages opens with a user turn: a window
whose oldest messages were offloaded may start with the model's reply or a tool result, and
chat templates (Qwen's, Mistral's) and several providers refuse that, so a placeholder user
line (`ARCHIVED_OPENING`) goes first. It stays until the window's front moves, at an offload.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from app.core.formats import SystemPrompt, anthropic, openai, responses, split_results
from app.core.formats.anthropic import ARCHIVED_OPENING, SYSTEM_NOTE
from app.core.messages import Format, JsonObject, Message, Text
from app.core.types import WindowMessage

NOTES_HEADER = "## Task scratchpad (Ebbtide notes)"
RECALL_HEADER = "## Earlier context recalled by Ebbtide (not in the window right now)"
MAX_CACHE_BREAKPOINTS = 4  # Anthropic's limit per request
CACHE_BREAKPOINT: JsonObject = {"type": "ephemeral"}


class PromptFormat(StrEnum):
    OPENAI = "openai"
    OPENAI_SINGLE_SYSTEM = "openai-single-system"
    ANTHROPIC = "anthropic"
    RESPONSES = "responses"

    @classmethod
    def of_input(cls, fmt: Format) -> PromptFormat:
        """The default prompt format of a turn posted in `fmt`."""
        return cls(fmt.value)


@dataclass(frozen=True)
class RecalledBlock:
    """A recalled block in the prompt's timeline (its window message carries it)."""

    text: str


@dataclass(frozen=True)
class PromptParts:
    """What a prompt is made of; each recalled block rides on the window message it was
    injected before (`WindowMessage.recalled`)."""

    system: SystemPrompt | None
    notes: str | None
    window: Sequence[WindowMessage]
    current_turn: int
    format: PromptFormat = PromptFormat.OPENAI


@dataclass(frozen=True)
class Prompt:
    """The prompt to send: `messages`, and for Anthropic the top-level `system` blocks."""

    format: PromptFormat
    messages: list[JsonObject]
    system: list[JsonObject] | None = None


def recall_insert_index(window: Sequence[WindowMessage], current_turn: int) -> int:
    """Where this turn's recalled block goes: before its last user message that says
    something (`len(window)` when it has none)."""
    for index in range(len(window) - 1, -1, -1):
        item = window[index]
        if item.turn != current_turn:
            break
        if item.message.role == "user" and item.message.words:
            return index
    return len(window)


def anchor_seq(window: Sequence[WindowMessage], current_turn: int) -> int | None:
    index = recall_insert_index(window, current_turn)
    return window[index].seq if index < len(window) else None


def notes_block(notes: str | None) -> str | None:
    return f"{NOTES_HEADER}\n{notes}" if notes else None


def recalled_block(recalled: str | None) -> str | None:
    return f"{RECALL_HEADER}\n{recalled}" if recalled else None


def assemble(parts: PromptParts) -> Prompt:
    if parts.format is PromptFormat.ANTHROPIC:
        return _anthropic(parts)
    if parts.format is PromptFormat.OPENAI_SINGLE_SYSTEM:
        return _single_system(parts)
    as_responses = parts.format is PromptFormat.RESPONSES
    render = responses.render_message if as_responses else openai.render_message
    body: list[JsonObject] = []
    timeline = (
        _timeline(parts.window, split=True)
        if as_responses  # one item per message: nothing to fold
        else _openai_timeline(parts.window)
    )
    for entry in timeline:
        if isinstance(entry, RecalledBlock):
            body.append({"role": "system", "content": entry.text})
        else:
            body.extend(render(entry))
    head = _leading(parts, Format.RESPONSES if as_responses else Format.OPENAI)
    return Prompt(parts.format, opened_by_user(head + body))


def opened_by_user(messages: list[JsonObject]) -> list[JsonObject]:
    """`messages` with the placeholder user line before the first one that is not a system
    message, when that one is not the user's (an assistant message, a tool result, or a
    Responses item such as a function call)."""
    for index, message in enumerate(messages):
        role = message.get("role")
        if role in ("system", "developer"):
            continue
        if role == "user":
            return messages
        return [*messages[:index], {"role": "user", "content": ARCHIVED_OPENING}, *messages[index:]]
    return messages


def _leading(parts: PromptParts, fmt: Format) -> list[JsonObject]:
    """C0 as posted when it came in this format, else one system message; then the notes."""
    head: list[JsonObject] = []
    system = parts.system
    if system is not None and system.format is fmt and isinstance(system.posted, list):
        head.extend(system.posted)
    elif system is not None and system.text:
        head.append({"role": "system", "content": system.text})
    notes = notes_block(parts.notes)
    if notes:
        head.append({"role": "system", "content": notes})
    return head


def _timeline(window: Sequence[WindowMessage], *, split: bool) -> list[Message | RecalledBlock]:
    """The window's messages with each recalled block before the message it came with, after
    that message's tool results when it carries some (`split`)."""
    out: list[Message | RecalledBlock] = []
    for item in window:
        waiting = [RecalledBlock(item.recalled.text)] if item.recalled is not None else []
        for piece in split_results(item.message) if split else [item.message]:
            if waiting and piece.role != "tool":
                out.extend(waiting)
                waiting = []
            out.append(piece)
        out.extend(waiting)
    return out


def _openai_timeline(window: Sequence[WindowMessage]) -> list[Message | RecalledBlock]:
    """As `_timeline`, with runs of assistant items (Responses) fused into one message."""
    out: list[Message | RecalledBlock] = []
    run: list[Message] = []
    for entry in [*_timeline(window, split=True), None]:
        if isinstance(entry, Message):
            run.append(entry)
            continue
        out.extend(openai.merged_assistant_runs(run))
        run = []
        if entry is not None:
            out.append(entry)
    return out


def _single_system(parts: PromptParts) -> Prompt:
    words = [parts.system.text if parts.system else "", notes_block(parts.notes) or ""]
    system = "\n\n".join(w for w in words if w)
    body: list[JsonObject] = []
    pending: list[str] = []
    for entry in _openai_timeline(parts.window):
        if isinstance(entry, RecalledBlock):
            pending.append(entry.text)
            continue
        for out in openai.render_message(_as_user_if_system(entry)):
            if pending and out.get("role") == "user":
                out = _with_text_first(out, "\n\n".join(pending))
                pending = []
            body.append(out)
    if pending:
        body.append({"role": "user", "content": "\n\n".join(pending)})
    head = [{"role": "system", "content": system}] if system else []
    return Prompt(parts.format, opened_by_user(head + body))


def _as_user_if_system(message: Message) -> Message:
    if message.role != "system":
        return message
    parts = tuple(
        Text(SYSTEM_NOTE + p.text) if i == 0 and isinstance(p, Text) else p
        for i, p in enumerate(message.parts)
    )
    return Message("user", parts, message.name, message.created_at)


def _with_text_first(message: JsonObject, text: str) -> JsonObject:
    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": f"{text}\n\n{content}"}
    return {**message, "content": [{"type": "text", "text": text}, *(content or [])]}


def _anthropic_messages(window: Sequence[WindowMessage]) -> list[JsonObject]:
    timeline = [
        Message("user", (Text(e.text),)) if isinstance(e, RecalledBlock) else e
        for e in _timeline(window, split=False)
    ]
    return anthropic.render_messages(timeline)


def _anthropic(parts: PromptParts) -> Prompt:
    system = _anthropic_system(parts)
    messages = _anthropic_messages(parts.window)
    before = _anthropic_messages([item for item in parts.window if item.turn < parts.current_turn])
    marks = _breakpoints(messages, before)
    return Prompt(parts.format, _marked(messages, system, marks), system)


def _anthropic_system(parts: PromptParts) -> list[JsonObject]:
    blocks: list[JsonObject] = []
    system = parts.system
    if system is not None and system.format is Format.ANTHROPIC and system.posted:
        posted = system.posted
        blocks.extend([{"type": "text", "text": posted}] if isinstance(posted, str) else posted)
    elif system is not None and system.text:
        blocks.append({"type": "text", "text": system.text})
    notes = notes_block(parts.notes)
    if notes:
        blocks.append({"type": "text", "text": notes})
    return blocks


def _blocks_of(message: JsonObject) -> list[JsonObject]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _breakpoints(
    messages: Sequence[JsonObject], before: Sequence[JsonObject]
) -> list[tuple[int, int]]:
    """(message, block) positions to mark: the prompt's last block, then the last block that
    earlier turns left (when this turn's messages did not reorder it)."""
    if not messages:
        return []
    marks = [(len(messages) - 1, len(_blocks_of(messages[-1])) - 1)]
    if before:
        index = len(before) - 1
        kept = _blocks_of(before[index])
        if index < len(messages) and _blocks_of(messages[index])[: len(kept)] == kept:
            marks.append((index, len(kept) - 1))
    return list(dict.fromkeys(marks))


def _marked(
    messages: list[JsonObject], system: list[JsonObject], marks: Sequence[tuple[int, int]]
) -> list[JsonObject]:
    """Ebbtide's breakpoints in place of the client's on message blocks (see the module),
    the prompt's end first: it is what the next turn reads back."""
    room = MAX_CACHE_BREAKPOINTS - sum(1 for b in system if "cache_control" in b)
    out = [_without_marks(m) for m in messages]
    for index, block in marks[: max(0, room)]:
        blocks = _blocks_of(out[index])
        blocks[block] = {**blocks[block], "cache_control": CACHE_BREAKPOINT}
        out[index] = {**out[index], "content": blocks}
    room -= len(marks[: max(0, room)])
    if system and room > 0 and "cache_control" not in system[-1]:
        system[-1] = {**system[-1], "cache_control": CACHE_BREAKPOINT}
    return out


def _without_marks(message: JsonObject) -> JsonObject:
    content = message["content"]
    if isinstance(content, str) or not any("cache_control" in b for b in content):
        return message
    blocks = [{k: v for k, v in b.items() if k != "cache_control"} for b in content]
    return {**message, "content": blocks}
