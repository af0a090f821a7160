"""What a turn's messages may look like, per input format (app/api/message_schemas.py)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from app.api.message_schemas import AnthropicMessage, OpenAIMessage, ResponsesItem

OPENAI: TypeAdapter[Any] = TypeAdapter(OpenAIMessage)
ANTHROPIC: TypeAdapter[Any] = TypeAdapter(AnthropicMessage)
RESPONSES: TypeAdapter[Any] = TypeAdapter(ResponsesItem)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"role": "tool", "content": "r"}, "tool_call_id"),
        ({"role": "user", "content": "x", "tool_call_id": "c1"}, "only tool messages"),
        (
            {
                "role": "user",
                "content": "x",
                "tool_calls": [{"id": "c", "function": {"name": "f"}}],
            },
            "only assistant",
        ),
        ({"role": "assistant"}, "needs content, refusal, audio, tool_calls or reasoning"),
        ({"role": "function", "content": "x", "name": "f"}, "role must be one of"),
        ({"role": "user", "content": [{"type": "image_url", "image_url": {}}]}, "url"),
    ],
)
def test_an_openai_message_must_fit_its_role(fields: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        OPENAI.validate_python(fields)


def test_fields_and_parts_the_service_does_not_read_are_kept_key_for_key() -> None:
    posted = {
        "role": "assistant",
        "content": "ok",
        "refusal": None,
        "annotations": [],
        "provider_specific": {"x": 1},
    }
    assert OPENAI.validate_python(posted).posted() == posted
    part = {"type": "video_frame", "at": 3}
    user = OPENAI.validate_python({"role": "user", "content": [part]})
    assert user.posted()["content"] == [part]


def test_created_at_is_ebbtides_field_and_is_not_kept_in_the_posted_object() -> None:
    message = OPENAI.validate_python(
        {"role": "user", "content": "hi", "created_at": "2026-03-12T09:00:00+08:00"}
    )
    assert message.created_at is not None and message.posted() == {"role": "user", "content": "hi"}


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        (
            {
                "role": "user",
                "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
            },
            "user message cannot carry a tool_use",
        ),
        (
            {"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
            "assistant message cannot carry a tool_result",
        ),
        (
            {"role": "user", "content": [{"type": "image", "source": {"type": "pigeon"}}]},
            "source.type",
        ),
        ({"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}]}, "signature"),
        ({"role": "system", "content": "x"}, "role"),
    ],
)
def test_an_anthropic_message_must_fit_the_messages_api(
    message: dict[str, object], problem: str
) -> None:
    with pytest.raises(ValidationError, match=problem):
        ANTHROPIC.validate_python(message)


@pytest.mark.parametrize(
    ("item", "problem"),
    [
        ({"type": "function_call", "name": "f", "arguments": "{}"}, "call_id"),
        ({"type": "function_call_output", "call_id": "c"}, "output"),
        ({"role": "tool", "content": "x"}, "role"),
    ],
)
def test_a_responses_item_must_fit_its_type(item: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        RESPONSES.validate_python(item)


def test_a_responses_item_of_an_unknown_type_is_kept() -> None:
    item = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    assert RESPONSES.validate_python(item).posted() == item
