"""The one rule for client text: what Postgres cannot store as sent is refused, never altered."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.core.inputs import unstorable
from app.core.types import Message


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


def test_a_message_with_unstorable_text_names_its_field() -> None:
    with pytest.raises(ValidationError) as raised:
        Message.model_validate({"role": "user", "content": "ok", "name": "bad\x00"})
    [error] = raised.value.errors()
    assert error["loc"] == ("name",) and "NUL" in error["msg"]
    assert Message.model_validate({"role": "user", "content": "😀"}).content == "😀"
