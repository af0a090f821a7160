from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.core.types import Message


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"role": "tool", "content": "r"}, "needs the tool_call_id"),
        ({"role": "user", "content": "x", "tool_call_id": "c1"}, "only tool messages"),
        (
            {
                "role": "user",
                "content": "x",
                "tool_calls": [{"id": "c", "function": {"name": "f"}}],
            },
            "only assistant",
        ),
        ({"role": "assistant"}, "content is required"),
    ],
)
def test_message_shape_must_match_its_role(fields: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        Message.model_validate(fields)


def test_openai_form_omits_absent_fields() -> None:
    assert Message(role="user", content="hi").to_openai() == {"role": "user", "content": "hi"}


def test_fields_provider_sdks_add_to_replies_are_accepted_and_dropped() -> None:
    reply = Message.model_validate(
        {"role": "assistant", "content": "ok", "refusal": None, "annotations": []}
    )
    assert reply.to_openai() == {"role": "assistant", "content": "ok"}
