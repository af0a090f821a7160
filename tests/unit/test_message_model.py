"""The one message model (app/core/messages.py) and the helpers every format shares."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.core.blobs import BLOB_REF_PREFIX, Blob, archived, blob_hash
from app.core.formats import (
    SystemPrompt,
    leading_system,
    posted_form,
    read_posted,
    render_single,
    split_results,
    stubbed,
    system_from_messages,
)
from app.core.messages import (
    Format,
    Media,
    Message,
    Opaque,
    Refusal,
    Text,
    ToolCall,
    ToolResult,
)
from tests.builders import make_window_message

PNG = "iVBORw0KGgo="


def test_words_text_calls_and_results_read_the_parts() -> None:
    message = Message(
        "user",
        (
            ToolResult("c1", (Text("42"), Media("image", data=PNG))),
            Text("and"),
            Refusal("no"),
            Opaque(Format.OPENAI, {"type": "x"}),
        ),
    )
    assert message.words == "and\nno"
    assert message.text == "42\nand\nno"
    assert message.answered_ids == ("c1",) and message.calls == ()
    assert message.media == (Media("image", data=PNG),)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ("", {}),
        ('{"q": 1}', {"q": 1}),
        ("[1, 2]", {"arguments": "[1, 2]"}),
        ("{broken", {"arguments": "{broken"}),
    ],
)
def test_call_arguments_become_an_object_for_anthropic(arguments: str, expected: object) -> None:
    assert ToolCall("c", "f", arguments).input_object() == expected


def test_a_stub_replaces_the_words_and_keeps_structure() -> None:
    said = Message("user", (Media("image", url="u"), Text("long"), Text("longer")))
    assert said.with_words("STUB").parts == (Media("image", url="u"), Text("STUB"))
    result = Message("tool", (ToolResult("c1", (Text("huge"), Media("image", url="u"))),))
    assert result.with_words("STUB").parts == (
        ToolResult("c1", (Text("STUB"), Media("image", url="u"))),
    )
    assert Message("assistant", (ToolCall("c", "f"),)).with_words("S").parts[0] == Text("S")
    stub = stubbed(Message.of("user", "long text"), "STUB")
    assert stub.posted is not None and stub.posted.raw == {"role": "user", "content": "STUB"}


def test_a_message_built_in_code_is_stored_as_openai_renders_it() -> None:
    built = Message.of("tool", "r", answers="c1")
    assert posted_form(built).raw == {"role": "tool", "tool_call_id": "c1", "content": "r"}
    assert render_single(Format.RESPONSES, built) == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": "r",
    }
    mixed = Message("user", (ToolResult("c1", (Text("r"),)), Text("and")))
    with pytest.raises(ValueError, match="not one"):
        render_single(Format.OPENAI, mixed)
    posted = read_posted(Format.OPENAI, {"role": "user", "content": "hi"})
    assert render_single(Format.OPENAI, posted) is posted.posted.raw  # type: ignore[union-attr]


def test_the_system_prompt_round_trips_through_its_json_column() -> None:
    leading = [
        read_posted(Format.OPENAI, {"role": "developer", "content": "a"}),
        read_posted(Format.OPENAI, {"role": "system", "content": [{"type": "text", "text": "b"}]}),
        read_posted(Format.OPENAI, {"role": "user", "content": "c"}),
    ]
    assert leading_system(leading) == 2
    system = system_from_messages(Format.OPENAI, leading[:2])
    assert system.text == "a\n\nb" and len(system.posted) == 2
    assert SystemPrompt.from_json(system.to_json()) == system
    assert SystemPrompt.from_json(SystemPrompt("plain").to_json()) == SystemPrompt("plain")


def test_results_split_from_the_words_that_follow_them() -> None:
    at = datetime(2026, 3, 1, tzinfo=UTC)
    mixed = Message("user", (ToolResult("c1"), Text("next")), created_at=at)
    tool, words = split_results(mixed)
    assert tool.role == "tool" and tool.answered_ids == ("c1",) and words.words == "next"
    assert split_results(Message("user", (ToolResult("c1"),))) == [
        Message("tool", (ToolResult("c1"),))
    ]
    plain = Message.of("user", "x")
    assert split_results(plain) == [plain]


def test_an_archived_message_names_its_payloads_by_hash_once() -> None:
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    raw = {"role": "user", "content": [image, image]}
    item = make_window_message(message=read_posted(Format.OPENAI, raw))
    sources, blobs = archived([item, make_window_message(seq=2)])
    assert blobs == [Blob(blob_hash(PNG), "image", "image/png", PNG)]
    url = sources[0]["posted"]["content"][0]["image_url"]["url"]
    assert url == f"data:image/png;base64,{BLOB_REF_PREFIX}{blob_hash(PNG)}"
    assert sources[1] == {
        "seq": 2,
        "format": "openai",
        "posted": {"role": "user", "content": "hello"},
    }
    assert blobs[0].size == 8
