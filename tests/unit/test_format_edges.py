"""The less common shapes of each format, and the assembly rules they meet."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from app.core.assemble import (
    PromptFormat,
    PromptParts,
    anchor_seq,
    assemble,
    recall_insert_index,
    recalled_block,
)
from app.core.blobs import archived
from app.core.chunker import media_stub, render_message
from app.core.formats import anthropic, openai, read_posted, responses
from app.core.messages import (
    Format,
    Media,
    Message,
    Opaque,
    Reasoning,
    Refusal,
    Text,
    ToolCall,
    ToolResult,
)
from app.core.tokens import count_message
from app.core.types import RecalledText
from app.providers.fakes import WhitespaceCounter
from tests.builders import make_window_message, user


def test_each_input_format_has_its_prompt_format() -> None:
    assert [PromptFormat.of_input(f) for f in Format] == [
        PromptFormat.OPENAI,
        PromptFormat.ANTHROPIC,
        PromptFormat.RESPONSES,
    ]
    assert recalled_block(None) is None


def test_the_block_anchors_on_this_turns_last_user_message_with_words() -> None:
    window = [
        make_window_message(seq=1, turn=1, message=user("old")),
        make_window_message(seq=2, turn=2, message=user("new")),
        make_window_message(seq=3, turn=2, message=Message.of("tool", "r", answers="c")),
    ]
    assert recall_insert_index(window, 2) == 1 and anchor_seq(window, 2) == 2
    assert anchor_seq(window, 3) is None  # no message of that turn


def test_single_system_puts_a_block_into_a_user_message_given_as_parts() -> None:
    parts = {"role": "user", "content": [{"type": "text", "text": "q"}]}
    block = RecalledText("[block]", 3, ("c1",))
    window = [make_window_message(seq=1, message=read_posted(Format.OPENAI, parts), recalled=block)]
    prompt = assemble(PromptParts(None, None, window, 1, PromptFormat.OPENAI_SINGLE_SYSTEM))
    assert prompt.messages == [
        {"role": "user", "content": [{"type": "text", "text": "[block]"}, parts["content"][0]]}
    ]


def test_a_block_before_a_tool_result_only_message_still_reaches_a_user_message() -> None:
    call = Message.of("assistant", None, calls=[ToolCall("c1", "f", "{}")])
    answer = Message.of("tool", "r", answers="c1")
    block = RecalledText("[block]", 3, ())
    window = [
        make_window_message(seq=1, message=call),
        make_window_message(seq=2, message=answer, recalled=block),
    ]
    prompt = assemble(PromptParts(None, None, window, 1, PromptFormat.OPENAI_SINGLE_SYSTEM))
    assert prompt.messages[-1] == {"role": "user", "content": "[block]"}
    assert [m["role"] for m in prompt.messages[:-1]] == ["user", "assistant", "tool"]


def test_anthropic_client_markers_on_messages_give_way_and_an_empty_window_has_none() -> None:
    marked = {"role": "user", "content": [{"type": "text", "text": "q", "cache_control": {}}]}
    window = [make_window_message(seq=1, message=read_posted(Format.ANTHROPIC, marked))]
    prompt = assemble(PromptParts(None, None, window, 1, PromptFormat.ANTHROPIC))
    assert prompt.messages[0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    empty = assemble(PromptParts(None, None, [], 1, PromptFormat.ANTHROPIC))
    assert empty.messages == [] and empty.system == []


def test_anthropic_reads_every_source_and_system_form() -> None:
    message = read_posted(
        Format.ANTHROPIC,
        {
            "role": "user",
            "content": [
                {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
                {"type": "document", "source": {"type": "file", "file_id": "f1"}},
                {"type": "document", "source": {"type": "text", "data": "plain words"}},
                {"type": "tool_result", "tool_use_id": "t1"},
            ],
        },
    )
    link, file, words, result = message.parts
    assert link == Media("image", url="https://x.test/a.png")
    assert file == Media("file", file_id="f1") and words == Text("plain words")
    assert result == ToolResult("t1")
    assert anthropic.system_text(None) == ""
    assert anthropic.system_text([{"type": "text", "text": "a"}, {"type": "x"}]) == "a"


def test_anthropic_leaves_out_what_it_cannot_take_and_puts_results_first() -> None:
    parts = (
        Media("audio", data="AAAA"),
        Media("image"),  # no source at all
        Reasoning("thought", provider=None),
        Opaque(Format.OPENAI, {"type": "x"}),
        Text("words"),
        ToolResult("t1", (Text("r"),)),
    )
    [rendered] = anthropic.render_messages([Message("user", parts)])
    assert [b["type"] for b in rendered["content"]] == ["tool_result", "text"]
    posted = read_posted(Format.ANTHROPIC, {"role": "user", "content": "plain"})
    merged = anthropic.render_messages([Message.of("user", "first"), posted])
    assert merged == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "plain"}],
        }
    ]


def test_openai_reads_custom_calls_and_unknown_parts_and_renders_them_back() -> None:
    raw = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "custom", "custom": {"name": "sh", "input": "ls"}}],
    }
    assert read_posted(Format.OPENAI, raw).calls == (ToolCall("c1", "sh", "ls"),)
    unknown = {"type": "video", "frames": 3}
    message = read_posted(Format.OPENAI, {"role": "user", "content": [unknown]})
    assert message.parts == (Opaque(Format.OPENAI, unknown),)
    built = Message(
        "user",
        (
            Refusal("no"),
            Opaque(Format.OPENAI, unknown),
            Media("file", file_id="file-1"),
            Media("audio", file_id="a1"),  # a reference to an earlier reply's audio only
        ),
        created_at=datetime(2026, 3, 1, tzinfo=UTC),
    )
    rendered = openai.as_json(built)
    assert rendered["content"] == [
        {"type": "refusal", "refusal": "no"},
        unknown,
        {"type": "file", "file": {"file_id": "file-1"}},
    ]
    assert rendered["created_at"] == "2026-03-01T00:00:00+00:00"


def test_responses_reads_and_renders_its_rarer_parts() -> None:
    item = read_posted(
        Format.RESPONSES,
        {
            "role": "assistant",
            "content": [
                {"type": "input_image", "image_url": "https://x.test/a.png"},
                {"type": "refusal", "refusal": "no"},
                {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "mp3"}},
                {"type": "computer_screenshot", "image_url": "x"},
            ],
        },
    )
    assert [type(p).__name__ for p in item.parts] == ["Media", "Refusal", "Media", "Opaque"]
    assert item.parts[2] == Media("audio", media_type="audio/mp3", data="AAAA")
    other = {"type": "web_search_call", "id": "ws_1"}
    assert read_posted(Format.RESPONSES, other).parts == (Opaque(Format.RESPONSES, other),)
    built = Message(
        "user",
        (
            Media("image", file_id="file-1"),
            Media("file", media_type="application/pdf", data="JVBE"),
            Media("audio", data="AAAA"),
            Opaque(Format.RESPONSES, other),
            Opaque(Format.OPENAI, other),
        ),
    )
    [rendered] = responses.render_message(built)
    assert rendered["content"] == [
        {"type": "input_image", "detail": "auto", "file_id": "file-1"},
        {"type": "input_file", "file_data": "data:application/pdf;base64,JVBE"},
        other,
    ]


def test_a_chunk_names_media_thinking_and_unknown_blocks_in_words() -> None:
    assert media_stub(Media("image", url="https://x.test/a.png")) == "[image, https://x.test/a.png]"
    assert media_stub(Media("file", filename="a.pdf", file_id="f1")) == "[file, a.pdf, file f1]"
    message = Message(
        "assistant",
        (
            Reasoning("because"),
            Media("image", media_type="image/png", data="AAAA"),
            Opaque(Format.ANTHROPIC, {"type": "server_tool_use"}),
        ),
    )
    text = render_message(make_window_message(message=message))
    assert "thinking: because" in text and "3 bytes, sha256 " in text
    assert 'block {"type": "server_tool_use"}' in text
    assert count_message(WhitespaceCounter(), message) > 3


def test_archived_sources_keep_numbers_and_nested_lists_as_they_are() -> None:
    raw = {"role": "user", "content": [{"type": "text", "text": "n", "weight": 2}], "n": [1, None]}
    [source], blobs = archived([make_window_message(message=read_posted(Format.OPENAI, raw))])
    assert source["posted"] == raw and blobs == []
    assert json.dumps(source) is not None


def test_anthropic_renders_linked_and_stored_files_and_reads_a_string_system() -> None:
    parts = (Media("image", url="https://x.test/a.png"), Media("file", file_id="f1"))
    [rendered] = anthropic.render_messages([Message("user", parts)])
    assert rendered["content"] == [
        {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
        {"type": "document", "source": {"type": "file", "file_id": "f1"}},
    ]
    assert anthropic.system_text("be brief") == "be brief"


def test_an_archived_payload_is_replaced_and_everything_else_kept() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}, "n": 2}
    raw = {"role": "user", "content": [image], "flags": [True, None]}
    [source], [blob] = archived([make_window_message(message=read_posted(Format.OPENAI, raw))])
    assert source["posted"]["flags"] == [True, None] and source["posted"]["content"][0]["n"] == 2
    assert blob.data == "AAAA"
