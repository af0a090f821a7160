"""Checks a value against a provider SDK's own request types.

The SDKs declare requests as TypedDicts whose lists are `Iterable`s, which pydantic checks
only when they are iterated, and whose unknown keys it drops silently. `conforms` iterates
everything and compares: a value conforms when the SDK's type reads it back whole.
"""

from __future__ import annotations

from typing import Any

from anthropic.types import MessageParam, TextBlockParam
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputItemParam
from pydantic import TypeAdapter

OPENAI_MESSAGE: TypeAdapter[Any] = TypeAdapter(ChatCompletionMessageParam)
ANTHROPIC_MESSAGE: TypeAdapter[Any] = TypeAdapter(MessageParam)
ANTHROPIC_SYSTEM_BLOCK: TypeAdapter[Any] = TypeAdapter(TextBlockParam)
RESPONSES_ITEM: TypeAdapter[Any] = TypeAdapter(ResponseInputItemParam)


def _materialised(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _materialised(item) for key, item in value.items()}
    if isinstance(value, list | tuple) or type(value).__name__ == "ValidatorIterator":
        return [_materialised(item) for item in value]
    return value


def conforms(adapter: TypeAdapter[Any], value: Any) -> bool:
    """True when `value` is an instance of the SDK type, every key included."""
    return bool(_materialised(adapter.validate_python(value)) == value)


def all_conform(adapter: TypeAdapter[Any], values: list[Any]) -> bool:
    return all(conforms(adapter, value) for value in values)
