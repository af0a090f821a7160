"""Typed builders for test data: `make_*(**overrides)` instead of shared fixture files."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from app.core.types import FunctionCall, Message, ToolCall, WindowMessage

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def user(content: str) -> Message:
    return Message(role="user", content=content)


def assistant(content: str | None = None, calls: list[tuple[str, str]] | None = None) -> Message:
    tool_calls = [
        ToolCall(id=call_id, function=FunctionCall(name=name, arguments='{"q": 1}'))
        for call_id, name in calls or []
    ]
    return Message(role="assistant", content=content, tool_calls=tool_calls or None)


def tool(call_id: str, content: str) -> Message:
    return Message(role="tool", tool_call_id=call_id, content=content)


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
    return {"messages": [m.to_openai() for m in messages], **fields}
