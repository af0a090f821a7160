"""Every message shape a client sends, read into the one model and rendered in every format.

Checks run against the providers' own request types (tests/sdk_types.py): a rendering counts
only when the SDK's type reads it back whole.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import TypeAdapter

from app.api.message_schemas import AnthropicMessage, OpenAIMessage, ResponsesItem
from app.core.formats import anthropic, openai, read_posted, responses, stubbed
from app.core.messages import Format, Media, Message, Opaque, Reasoning, Refusal, Text, ToolCall
from tests.sdk_types import (
    ANTHROPIC_MESSAGE,
    OPENAI_MESSAGE,
    RESPONSES_ITEM,
    all_conform,
    conforms,
)

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5E"
    "rkJggg=="
)
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="
PDF = "JVBERi0xLjQKJcOkw7zDtsOfCjIgMCBvYmoKPDwvTGVuZ3RoIDMgMCBSPj4Kc3RyZWFtCg=="

OPENAI_SHAPES: dict[str, dict[str, Any]] = {
    "user parts": {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is in these?"},
            {
                "type": "image_url",
                "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"},
            },
            {"type": "image_url", "image_url": {"url": "https://example.test/cat.jpg"}},
            {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
            {
                "type": "file",
                "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "a.pdf"},
            },
        ],
    },
    "developer": {"role": "developer", "content": "answer in French"},
    "system parts": {"role": "system", "content": [{"type": "text", "text": "be brief"}]},
    "refusal only": {"role": "assistant", "content": None, "refusal": "I can't help with that."},
    "audio only": {"role": "assistant", "content": None, "audio": {"id": "audio_abc"}},
    "assistant parts": {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "part one"},
            {"type": "refusal", "refusal": "not that"},
        ],
    },
    "tool parts": {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": [{"type": "text", "text": "42"}],
    },
    "named user": {"role": "user", "content": "hi", "name": "maya"},
}
# Fields OpenAI-compatible providers add that Chat Completions' own types do not declare.
PROVIDER_SHAPES: dict[str, dict[str, Any]] = {
    "deepseek reasoning": {
        "role": "assistant",
        "content": "It is 42.",
        "reasoning_content": "The user asks; 6 × 7.",
    },
    "litellm thinking blocks": {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "calc", "arguments": '{"x": 6}'},
            }
        ],
        "thinking_blocks": [{"type": "thinking", "thinking": "need calc", "signature": "sig-1"}],
        "reasoning_content": "need calc",
    },
    "unknown fields": {
        "role": "assistant",
        "content": "ok",
        "annotations": [],
        "provider_specific_fields": {"citations": None},
    },
}
ANTHROPIC_SHAPES: dict[str, dict[str, Any]] = {
    "text string": {"role": "user", "content": "hello"},
    "text with cache_control": {
        "role": "user",
        "content": [{"type": "text", "text": "long doc", "cache_control": {"type": "ephemeral"}}],
    },
    "image": {
        "role": "user",
        "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {"type": "text", "text": "describe"},
        ],
    },
    "document": {
        "role": "user",
        "content": [
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
                "title": "a.pdf",
            }
        ],
    },
    "thinking and tool_use": {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "look it up", "signature": "EqQBCkYIBBgC"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "tides"}},
        ],
    },
    "redacted thinking": {
        "role": "assistant",
        "content": [
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3"},
            {"type": "text", "text": "ok"},
        ],
    },
    "tool_result": {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "high tide 06:12"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "content": [{"type": "text", "text": "failed"}],
                "is_error": True,
            },
            {"type": "text", "text": "and tomorrow?"},
        ],
    },
}
RESPONSES_SHAPES: dict[str, dict[str, Any]] = {
    "easy message": {"role": "user", "content": "hi"},
    "input parts": {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "see"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"},
            {"type": "input_file", "file_id": "file-1"},
        ],
    },
    "output message": {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
    },
    "reasoning": {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "plan"}],
        "encrypted_content": "gAAAA",
    },
    "function_call": {
        "type": "function_call",
        "call_id": "call_1",
        "name": "calc",
        "arguments": '{"x": 6}',
    },
    "function_call_output": {"type": "function_call_output", "call_id": "call_1", "output": "42"},
}

OPENAI_INPUT: TypeAdapter[Any] = TypeAdapter(OpenAIMessage)
ANTHROPIC_INPUT: TypeAdapter[Any] = TypeAdapter(AnthropicMessage)
RESPONSES_INPUT: TypeAdapter[Any] = TypeAdapter(ResponsesItem)


def posted(adapter: TypeAdapter[Any], fmt: Format, raw: dict[str, Any]) -> Message:
    """A message as the turn route reads it: validated, then kept as posted."""
    return read_posted(fmt, adapter.validate_python(raw).posted())


def unposted(message: Message) -> Message:
    """The same parts, rendered as if the message had come in another format."""
    return Message(message.role, message.parts, message.name)


@pytest.mark.parametrize("name", sorted(OPENAI_SHAPES | PROVIDER_SHAPES))
def test_an_openai_message_comes_back_key_for_key(name: str) -> None:
    raw = (OPENAI_SHAPES | PROVIDER_SHAPES)[name]
    message = posted(OPENAI_INPUT, Format.OPENAI, raw)
    [again] = openai.render_message(message)
    assert json.dumps(again) == json.dumps(raw)


@pytest.mark.parametrize("name", sorted(OPENAI_SHAPES))
def test_an_openai_message_rendered_from_its_parts_is_a_chat_completions_message(
    name: str,
) -> None:
    message = posted(OPENAI_INPUT, Format.OPENAI, OPENAI_SHAPES[name])
    rendered = openai.render_message(unposted(message))
    assert all_conform(OPENAI_MESSAGE, rendered)


def test_openai_parts_are_read_into_their_kinds() -> None:
    message = posted(OPENAI_INPUT, Format.OPENAI, OPENAI_SHAPES["user parts"])
    kinds = [type(p).__name__ if not isinstance(p, Media) else p.kind for p in message.parts]
    assert kinds == ["Text", "image", "image", "audio", "file"]
    image, link, audio, pdf = message.media
    assert (image.media_type, image.data, image.detail) == ("image/png", PNG, "low")
    assert link.url == "https://example.test/cat.jpg" and link.data is None
    assert (audio.media_type, audio.data) == ("audio/wav", WAV)
    assert (pdf.media_type, pdf.filename) == ("application/pdf", "a.pdf")


def test_a_reply_keeps_its_reasoning_and_thinking_signatures() -> None:
    thinking = posted(OPENAI_INPUT, Format.OPENAI, PROVIDER_SHAPES["litellm thinking blocks"])
    assert thinking.parts[0] == Reasoning("need calc", signature="sig-1", provider="anthropic")
    assert thinking.calls == (ToolCall("call_1", "calc", '{"x": 6}'),)
    deepseek = posted(OPENAI_INPUT, Format.OPENAI, PROVIDER_SHAPES["deepseek reasoning"])
    assert deepseek.parts == (Reasoning("The user asks; 6 × 7."), Text("It is 42."))
    [claude] = anthropic.render_messages([Message.of("user", "go"), thinking])[1:]
    assert claude["content"][0] == {
        "type": "thinking",
        "thinking": "need calc",
        "signature": "sig-1",
    }


def test_refusal_and_audio_replies_are_parts() -> None:
    refusal = posted(OPENAI_INPUT, Format.OPENAI, OPENAI_SHAPES["refusal only"])
    assert refusal.parts == (Refusal("I can't help with that."),)
    audio = posted(OPENAI_INPUT, Format.OPENAI, OPENAI_SHAPES["audio only"])
    assert audio.media == (Media("audio", file_id="audio_abc"),)


@pytest.mark.parametrize("name", sorted(ANTHROPIC_SHAPES))
def test_an_anthropic_message_comes_back_key_for_key(name: str) -> None:
    raw = ANTHROPIC_SHAPES[name]
    message = posted(ANTHROPIC_INPUT, Format.ANTHROPIC, raw)
    opener = [] if raw["role"] == "user" else [Message.of("user", "go")]
    rendered = anthropic.render_messages([*opener, message])
    assert json.dumps(rendered[-1]) == json.dumps(raw)
    assert conforms(ANTHROPIC_MESSAGE, raw)


@pytest.mark.parametrize("name", sorted(ANTHROPIC_SHAPES))
def test_an_anthropic_message_rendered_from_its_parts_is_a_messages_api_message(
    name: str,
) -> None:
    message = unposted(posted(ANTHROPIC_INPUT, Format.ANTHROPIC, ANTHROPIC_SHAPES[name]))
    assert all_conform(ANTHROPIC_MESSAGE, anthropic.render_messages([message]))


# Where Chat Completions has no field for Claude's thinking, the LiteLLM convention carries it.
REASONING_FIELDS = ("reasoning_content", "thinking_blocks")


@pytest.mark.parametrize("name", sorted(ANTHROPIC_SHAPES))
def test_an_anthropic_message_in_openai_form_is_chat_completions_messages(name: str) -> None:
    message = posted(ANTHROPIC_INPUT, Format.ANTHROPIC, ANTHROPIC_SHAPES[name])
    rendered = openai.render_message(message)
    thinks = any(isinstance(p, Reasoning) for p in message.parts)
    assert all((REASONING_FIELDS[1] in m) == thinks for m in rendered)
    plain = [{k: v for k, v in m.items() if k not in REASONING_FIELDS} for m in rendered]
    assert all_conform(OPENAI_MESSAGE, plain)


def test_anthropic_tool_results_become_tool_messages_before_the_users_words() -> None:
    message = posted(ANTHROPIC_INPUT, Format.ANTHROPIC, ANTHROPIC_SHAPES["tool_result"])
    assert message.answered_ids == ("toolu_1", "toolu_2")
    assert message.words == "and tomorrow?"
    rendered = openai.render_message(message)
    assert [(m["role"], m.get("tool_call_id")) for m in rendered] == [
        ("tool", "toolu_1"),
        ("tool", "toolu_2"),
        ("user", None),
    ]


def test_tool_use_input_becomes_call_arguments_and_back() -> None:
    message = posted(ANTHROPIC_INPUT, Format.ANTHROPIC, ANTHROPIC_SHAPES["thinking and tool_use"])
    [call] = message.calls
    assert json.loads(call.arguments) == {"q": "tides"}
    [as_openai] = openai.render_message(message)
    assert as_openai["tool_calls"][0]["function"]["name"] == "search"
    assert as_openai["thinking_blocks"][0]["signature"] == "EqQBCkYIBBgC"


@pytest.mark.parametrize("name", sorted(RESPONSES_SHAPES))
def test_a_responses_item_comes_back_key_for_key(name: str) -> None:
    raw = RESPONSES_SHAPES[name]
    message = posted(RESPONSES_INPUT, Format.RESPONSES, raw)
    assert responses.render_message(message) == [raw]
    assert conforms(RESPONSES_ITEM, raw)


@pytest.mark.parametrize("name", sorted(RESPONSES_SHAPES))
def test_a_responses_item_rendered_from_its_parts_is_a_responses_item(name: str) -> None:
    message = unposted(posted(RESPONSES_INPUT, Format.RESPONSES, RESPONSES_SHAPES[name]))
    assert all_conform(RESPONSES_ITEM, responses.render_message(message))


def test_responses_calls_fold_into_one_chat_completions_assistant_message() -> None:
    items = [
        RESPONSES_SHAPES["reasoning"],
        RESPONSES_SHAPES["function_call"],
        {"type": "function_call", "call_id": "call_2", "name": "calc", "arguments": "{}"},
        RESPONSES_SHAPES["function_call_output"],
        {"type": "function_call_output", "call_id": "call_2", "output": "0"},
    ]
    messages = [posted(RESPONSES_INPUT, Format.RESPONSES, item) for item in items]
    merged = openai.merged_assistant_runs(messages)
    rendered = [out for m in merged for out in openai.render_message(m)]
    assert [m["role"] for m in rendered] == ["assistant", "tool", "tool"]
    assert [c["id"] for c in rendered[0]["tool_calls"]] == ["call_1", "call_2"]
    # The summary is words; the encrypted reasoning is OpenAI's and goes nowhere else.
    assert rendered[0]["reasoning_content"] == "plan" and "thinking_blocks" not in rendered[0]
    plain = [{k: v for k, v in m.items() if k not in REASONING_FIELDS} for m in rendered]
    assert all_conform(OPENAI_MESSAGE, plain)


def test_a_block_of_an_unknown_kind_is_kept_in_its_format_and_left_out_of_others() -> None:
    block = {"type": "search_result", "source": "kb", "title": "t", "content": []}
    message = posted(
        ANTHROPIC_INPUT,
        Format.ANTHROPIC,
        {"role": "user", "content": [block, {"type": "text", "text": "hi"}]},
    )
    assert message.parts[0] == Opaque(Format.ANTHROPIC, block)
    assert anthropic.render_messages([unposted(message)])[0]["content"][0] == block
    [as_openai] = openai.render_message(message)
    assert as_openai["content"] == [{"type": "text", "text": "hi"}]


def test_a_stubbed_message_keeps_its_format_and_its_structure() -> None:
    message = posted(ANTHROPIC_INPUT, Format.ANTHROPIC, ANTHROPIC_SHAPES["tool_result"])
    stub = stubbed(message, "[stored as chunk c1]")
    assert stub.posted is not None and stub.posted.format is Format.ANTHROPIC
    assert stub.answered_ids == message.answered_ids
    assert stub.text == "[stored as chunk c1]"
    assert conforms(ANTHROPIC_MESSAGE, stub.posted.raw)


def test_a_message_built_in_code_renders_as_one_message_in_every_format() -> None:
    reply = Message.of("assistant", "ok", calls=[ToolCall("c1", "f", "{}")])
    assert conforms(OPENAI_MESSAGE, openai.as_json(reply))
    assert conforms(ANTHROPIC_MESSAGE, anthropic.render_one(reply))
    assert all_conform(RESPONSES_ITEM, responses.render_message(reply))
    with pytest.raises(ValueError, match="not one OpenAI message"):
        openai.as_json(posted(ANTHROPIC_INPUT, Format.ANTHROPIC, ANTHROPIC_SHAPES["tool_result"]))
