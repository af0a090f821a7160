"""The one rule for client text: what Postgres cannot store as sent is refused, never altered."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from app.api.message_schemas import OpenAIMessage
from app.core.inputs import unstorable

OPENAI: TypeAdapter[Any] = TypeAdapter(OpenAIMessage)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("plain 文字 and 😀", None),
        ("a\x00b", "NUL (\\u0000)"),
        ("half an emoji \ud83d", "a lone UTF-16 surrogate"),
        (["ok", ["deep \x00"]], "NUL (\\u0000)"),
        ({"name": "ok", "schema": {"description": "\udfff"}}, "a lone UTF-16 surrogate"),
        ({"key \x00": 1}, "NUL (\\u0000)"),
        (12, None),
        (None, None),
    ],
    ids=["fine", "nul", "surrogate", "nested list", "nested dict", "dict key", "int", "none"],
)
def test_unstorable_finds_the_first_problem_anywhere_inside(value: object, problem: str) -> None:
    assert unstorable(value) == problem


def test_a_message_with_unstorable_text_is_refused() -> None:
    with pytest.raises(ValidationError, match="NUL"):
        OPENAI.validate_python({"role": "user", "content": "ok", "name": "bad\x00"})
    with pytest.raises(ValidationError, match="surrogate"):
        OPENAI.validate_python({"role": "user", "content": "ok", "x_unknown": "\ud83d"})
    assert OPENAI.validate_python({"role": "user", "content": "😀"}).content == "😀"
