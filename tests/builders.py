"""Typed builders for test data: `make_*(**overrides)` instead of shared fixture files."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from app.core.formats import openai
from app.core.messages import Message, ToolCall
from app.core.types import WindowMessage

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def user(content: str) -> Message:
    return Message.of("user", content)


def assistant(content: str | None = None, calls: list[tuple[str, str]] | None = None) -> Message:
    tool_calls = [ToolCall(call_id, name, '{"q": 1}') for call_id, name in calls or []]
    return Message.of("assistant", content, calls=tool_calls)


def tool(call_id: str, content: str) -> Message:
    return Message.of("tool", content, answers=call_id)


def make_window_message(**overrides: Any) -> WindowMessage:
    values: dict[str, Any] = {
        "seq": 1,
        "turn": 1,
        "message": user("hello"),
        "tokens": 10,
        "created_at": T0,
    }
    values.update(overrides)
    return WindowMessage(**values)


# The hash embedder's vectors are hashed words: its recall margins run larger than e5's.
HASH_RECALL = {"auto_min_margin": 0.5, "asked_min_margin": 0.35}


def words(count: int, word: str = "lorem") -> str:
    """`count` tokens of filler under the whitespace counter (and roughly so in tiktoken)."""
    return " ".join(f"{word}{i % 10}" for i in range(count))


def turn_body(*messages: Message, **fields: Any) -> dict[str, Any]:
    return {"messages": [openai.as_json(m) for m in messages], **fields}
