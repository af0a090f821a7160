"""What client input the service accepts, decided once for every request model.

Text is stored verbatim, so a string Postgres cannot hold as sent is refused, never altered:
NUL (`\\u0000`, which a `text` column rejects) and a lone UTF-16 surrogate (half an emoji, as
buggy JavaScript clients send; it has no UTF-8 form) answer 422 naming the field. The check
covers every string of a request model, inside nested lists and dicts (tool schemas) too.
Integers that land in an `integer` column are bounded by what the column holds.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, field_validator

INT32_MAX = 2**31 - 1  # an `integer` column's largest value


def unstorable(value: Any) -> str | None:
    """What makes `value` (or a string inside it) unstorable, or None when it is fine."""
    if isinstance(value, str):
        if "\x00" in value:
            return "NUL (\\u0000)"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "a lone UTF-16 surrogate"
        return None
    if isinstance(value, dict):
        return next((found for item in value.items() if (found := unstorable(list(item)))), None)
    if isinstance(value, list | tuple):
        return next((found for item in value if (found := unstorable(item))), None)
    return None


class InputModel(BaseModel):
    """Base of every model that parses client input (see the module's rule)."""

    @field_validator("*", mode="after")
    @classmethod
    def _storable_text(cls, value: Any) -> Any:
        problem = unstorable(value)
        if problem is not None:
            raise ValueError(f"text must not contain {problem}")
        return value
