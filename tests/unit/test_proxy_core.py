"""What the proxy does to a request and takes from a reply, streamed or not
(app/core/proxy.py, app/core/sse.py)."""

from __future__ import annotations

import json
from typing import Any

from app.core.messages import Format
from app.core.proxy import (
    Provider,
    ProviderReply,
    ProviderUsage,
    ProxyRoute,
    UpstreamReply,
    anthropic_reply,
    anthropic_usage,
    openai_reply,
    openai_usage,
    provider_error,
    provider_reply,
    relayed_headers,
    responses_usage,
    upstream_body,
)
from app.core.sse import (
    AnthropicStream,
    OpenAIStream,
    ResponsesStream,
    SseReader,
    ends_stream,
    is_error_event,
    stream_cut_event,
    streamed_reply,
)


def events(*items: tuple[str | None, Any]) -> bytes:
    out = b""
    for name, data in items:
        head = f"event: {name}\n" if name else ""
        body = data if isinstance(data, str) else json.dumps(data)
        out += f"{head}data: {body}\n\n".encode()
    return out


def read_all(raw: bytes, step: int) -> list[Any]:
    """The events of `raw` fed in pieces of `step` bytes."""
    reader = SseReader()
    found = []
    for i in range(0, len(raw), step):
        found.extend(reader.feed(raw[i : i + step]))
    return found


def test_base_urls_are_read_as_each_sdk_writes_them() -> None:
    assert (
        ProxyRoute.CHAT_COMPLETIONS.upstream_url("http://h/v1/") == "http://h/v1/chat/completions"
    )
    assert ProxyRoute.MESSAGES.upstream_url("http://h") == "http://h/v1/messages"
    assert ProxyRoute.MESSAGES.message_format is Format.ANTHROPIC
    assert ProxyRoute.RESPONSES.upstream_url("http://h/v1") == "http://h/v1/responses"
    assert ProxyRoute.RESPONSES.message_format is Format.RESPONSES
    assert ProxyRoute.RESPONSES.provider is Provider.OPENAI
    assert Provider.ANTHROPIC.url("http://h/", "models") == "http://h/v1/models"
    assert Provider.OPENAI.url("http://h/v1", "models/x") == "http://h/v1/models/x"


def test_usage_is_the_whole_prompt_and_its_cached_share() -> None:
    assert openai_usage(
        {"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 60}}
    ) == ProviderUsage(100, 60)
    assert openai_usage({"prompt_tokens": 100}) == ProviderUsage(100, None)
    assert openai_usage(None) == ProviderUsage()
    # Anthropic counts cache reads and writes apart from input_tokens
    usage = {"input_tokens": 10, "cache_read_input_tokens": 80, "cache_creation_input_tokens": 5}
    assert anthropic_usage(usage) == ProviderUsage(95, 80)
    assert anthropic_usage({"output_tokens": 3}) == ProviderUsage()
    assert anthropic_usage({"input_tokens": True}) == ProviderUsage()
    # Responses counts like Chat Completions, under its own names
    details = {"cached_tokens": 30}
    assert responses_usage({"input_tokens": 70, "input_tokens_details": details}) == (
        ProviderUsage(70, 30)
    )
    assert responses_usage({"input_tokens": 70}) == ProviderUsage(70, None)
    assert responses_usage("no") == ProviderUsage()


def test_a_reply_is_the_first_choice_without_its_null_fields() -> None:
    body = {
        "choices": [
            {"message": {"role": "assistant", "content": "hi", "refusal": None, "annotations": []}}
        ],
        "usage": {"prompt_tokens": 5},
    }
    assert openai_reply(body) == ProviderReply(
        ({"role": "assistant", "content": "hi"},), ProviderUsage(5)
    )
    assert openai_reply({"choices": []}).posted == ()
    assert openai_reply({"choices": [{"message": "no"}]}).posted == ()
    assert openai_reply("not an object") == ProviderReply()
    message = {"content": [{"type": "text", "text": "hi", "citations": None}], "usage": {}}
    assert anthropic_reply(message).posted == (
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
    )
    assert anthropic_reply({"content": "x"}).posted == ()
    assert anthropic_reply([]) == ProviderReply()
    assert provider_reply(ProxyRoute.MESSAGES, message) == anthropic_reply(message)


def test_a_responses_reply_is_every_output_item_as_input_takes_it_back() -> None:
    said = {"type": "output_text", "text": "hi", "annotations": [], "logprobs": None}
    output = [
        {"id": "rs_1", "type": "reasoning", "summary": []},
        {"id": "msg_1", "type": "message", "role": "assistant", "content": [said]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
    ]
    reply = provider_reply(ProxyRoute.RESPONSES, {"output": output, "usage": {"input_tokens": 9}})
    assert len(reply.posted) == 3 and reply.usage == ProviderUsage(9)
    assert "logprobs" not in reply.posted[1]["content"][0]  # nulls left out, as elsewhere
    assert provider_reply(ProxyRoute.RESPONSES, {"output": "x"}).posted == ()
    assert provider_reply(ProxyRoute.RESPONSES, {"output": ["x"]}).posted == ()
    assert provider_reply(ProxyRoute.RESPONSES, None) == ProviderReply()


def test_the_upstream_gets_the_prompt_in_place_of_the_clients_messages() -> None:
    client = {"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 0}
    prompt = [{"role": "user", "content": "assembled"}]
    body, hides = upstream_body(ProxyRoute.CHAT_COMPLETIONS, client, prompt, None)
    assert body == {"model": "m", "messages": prompt, "temperature": 0} and not hides
    assert client["messages"] == [{"role": "user", "content": "x"}]  # the client's is untouched
    streamed, hides = upstream_body(
        ProxyRoute.CHAT_COMPLETIONS, {**client, "stream": True}, prompt, None
    )
    assert streamed["stream_options"] == {"include_usage": True} and hides
    asked = {**client, "stream": True, "stream_options": {"include_usage": False}}
    body, hides = upstream_body(ProxyRoute.CHAT_COMPLETIONS, asked, prompt, None)
    assert body["stream_options"] == {"include_usage": False} and not hides


def test_a_responses_call_goes_up_with_the_prompt_as_input_and_no_instructions() -> None:
    client = {"model": "m", "input": "hello", "instructions": "be brief", "stream": True}
    prompt = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]
    body, hides = upstream_body(ProxyRoute.RESPONSES, client, prompt, None)
    # the instructions are the prompt's first item by now: sent once, not twice
    assert body == {"model": "m", "input": prompt, "stream": True} and not hides


def test_a_messages_call_gets_the_prompts_system_blocks() -> None:
    client = {"model": "m", "system": "old", "messages": [], "max_tokens": 9}
    system = [{"type": "text", "text": "C0"}]
    body, _ = upstream_body(ProxyRoute.MESSAGES, client, [], system)
    assert body["system"] == system and body["max_tokens"] == 9
    body, _ = upstream_body(ProxyRoute.MESSAGES, client, [], None)
    assert "system" not in body


def test_only_the_headers_a_client_reads_are_relayed() -> None:
    reply = UpstreamReply(
        429,
        (
            ("content-type", "application/json"),
            ("content-length", "9"),
            ("Connection", "keep-alive"),
            ("retry-after", "3"),
            ("x-request-id", "req_1"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("anthropic-ratelimit-requests-reset", "2027-01-01T00:00:00Z"),
            ("Set-Cookie", "ebbtide_ui_key=stolen; Path=/ui"),
            ("strict-transport-security", "max-age=1"),
            ("x-upstream-debug", "internal"),
        ),
        b"{}",
    )
    assert relayed_headers(reply.headers) == {
        "content-type": "application/json",
        "retry-after": "3",
        "x-request-id": "req_1",
        "x-ratelimit-remaining-tokens": "0",
        "anthropic-ratelimit-requests-reset": "2027-01-01T00:00:00Z",
    }
    assert not reply.ok


def test_events_are_read_whole_however_the_bytes_are_split() -> None:
    raw = events((None, {"a": 1}), ("ping", {"type": "ping"})) + b"data: [DONE]\r\n\r\n"
    for step in (1, 7, len(raw)):
        found = read_all(raw, step)
        assert [e.name for e in found] == [None, "ping", None]
        assert b"".join(e.raw for e in found) == raw
        assert found[0].parsed == {"a": 1} and found[2].parsed is None
    reader = SseReader()
    assert reader.feed(b'data: {"x": 1}\ndata: 2') == []
    rest = reader.rest()
    assert rest is not None and rest.data == '{"x": 1}\n2'
    assert reader.rest() is None


def openai_chunk(
    delta: dict[str, Any], finish: str | None = None, index: int = 0
) -> dict[str, Any]:
    return {"choices": [{"index": index, "delta": delta, "finish_reason": finish}]}


def test_a_chat_completions_stream_adds_up_to_the_unstreamed_message() -> None:
    raw = events(
        (None, openai_chunk({"role": "assistant", "content": ""})),
        (None, openai_chunk({"content": "Hel"})),
        (None, openai_chunk({"content": "lo"}, index=1)),  # another choice: not recorded
        (None, openai_chunk({"content": "lo", "reasoning_content": "think"})),
        (
            None,
            openai_chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "c1", "function": {"name": "f", "arguments": '{"a"'}}
                    ]
                }
            ),
        ),
        (None, openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]})),
        (None, openai_chunk({"tool_calls": ["junk"]})),
        (None, {"choices": [{"index": 0, "delta": "junk"}]}),
        (None, openai_chunk({}, "tool_calls")),
        (None, {"choices": [], "usage": {"prompt_tokens": 12}}),
        (None, "[DONE]"),
    )
    stream = OpenAIStream()
    found = read_all(raw, 5)
    for event in found:
        stream.feed(event)
    assert stream.complete and stream.usage == ProviderUsage(12)
    assert OpenAIStream.usage_only(found[-2]) and not OpenAIStream.usage_only(found[0])
    assert stream.message() == {
        "role": "assistant",
        "content": "Hello",
        "reasoning_content": "think",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
        ],
    }


def test_an_empty_or_refused_stream_still_makes_a_message() -> None:
    stream = OpenAIStream()
    for event in read_all(
        events((None, openai_chunk({"refusal": "No."}, "stop")), (None, "[1]")), 64
    ):
        stream.feed(event)
    assert stream.complete and not stream.done
    assert stream.message() == {"role": "assistant", "content": "", "refusal": "No."}


def anthropic_events(*items: dict[str, Any]) -> list[Any]:
    return read_all(events(*((item["type"], item) for item in items)), 9)


def test_a_messages_stream_adds_up_text_thinking_and_tool_input() -> None:
    found = anthropic_events(
        {
            "type": "message_start",
            "message": {"usage": {"input_tokens": 20, "cache_read_input_tokens": 30}},
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "hm"},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "sig"},
        },
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "text", "text": "", "citations": None},
        },
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hi"}},
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "citations_delta", "citation": {"cited_text": "x"}},
        },
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"q":'},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": ' "x"}'},
        },
        {
            "type": "content_block_start",
            "index": 3,
            "content_block": {"type": "tool_use", "id": "t2", "name": "g", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 3,
            "delta": {"type": "input_json_delta", "partial_json": ""},
        },
        {
            "type": "content_block_start",
            "index": 4,
            "content_block": {"type": "tool_use", "id": "t3", "name": "h", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 4,
            "delta": {"type": "input_json_delta", "partial_json": "{broken"},
        },
        {
            "type": "content_block_delta",
            "index": 5,
            "delta": {"type": "text_delta", "text": "late"},
        },
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 4},
        },
        {"type": "message_stop"},
    )
    stream = AnthropicStream()
    for event in [*found, *read_all(b"data: [DONE]\n\n", 4)]:
        stream.feed(event)
    assert stream.complete and stream.usage == ProviderUsage(50, 30)
    assert stream.message()["content"] == [
        {"type": "thinking", "thinking": "hm", "signature": "sig"},
        {"type": "text", "text": "Hi", "citations": [{"cited_text": "x"}]},
        {"type": "tool_use", "id": "t1", "name": "f", "input": {"q": "x"}},
        {"type": "tool_use", "id": "t2", "name": "g", "input": {}},
        {"type": "tool_use", "id": "t3", "name": "h", "input": {"arguments": "{broken"}},
        {"type": "text", "text": "late"},
    ]


def test_a_cut_stream_ends_with_an_error_each_sdk_raises_on() -> None:
    (openai_event,) = read_all(stream_cut_event(Format.OPENAI), 100)
    assert openai_event.parsed["error"]["code"] == "stream_cut" and is_error_event(openai_event)
    (anthropic_event,) = read_all(stream_cut_event(Format.ANTHROPIC), 100)
    assert anthropic_event.name == "error" and anthropic_event.parsed["type"] == "error"
    assert is_error_event(anthropic_event)
    (overloaded,) = read_all(events((None, {"type": "error", "error": {}})), 100)
    assert is_error_event(overloaded)
    assert not is_error_event(read_all(events((None, openai_chunk({}))), 100)[0])
    (responses_event,) = read_all(stream_cut_event(Format.RESPONSES), 100)
    assert responses_event.name == "error" and responses_event.parsed["type"] == "error"
    assert responses_event.parsed["error"]["code"] == "stream_cut"  # what the SDK raises on
    (failed,) = read_all(events(("response.failed", {"type": "response.failed"})), 100)
    assert is_error_event(failed)


def test_a_responses_stream_is_whole_once_its_closing_event_came() -> None:
    item = {"type": "message", "role": "assistant", "content": [{"type": "output_text"}]}
    response = {"output": [item], "usage": {"input_tokens": 12}}
    raw = events(
        ("response.created", {"type": "response.created", "response": {"output": []}}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "delta": "h"}),
        ("response.completed", {"type": "response.completed", "response": response}),
    )
    stream = streamed_reply(Format.RESPONSES)
    assert isinstance(stream, ResponsesStream)
    found = read_all(raw, 7)
    for event in found[:2]:
        stream.feed(event)
        assert not stream.complete and not ends_stream(Format.RESPONSES, event)
    assert stream.posted() == () and stream.usage == ProviderUsage()
    stream.feed(found[2])
    assert stream.complete and ends_stream(Format.RESPONSES, found[2])
    assert stream.posted() == (item,) and stream.usage == ProviderUsage(12)
    # a response cut short by its token limit still says what the model said
    incomplete = {"type": "response.incomplete", "response": response}
    (closing,) = read_all(events(("response.incomplete", incomplete)), 100)
    assert ResponsesStream.closes(closing)
    assert isinstance(streamed_reply(Format.OPENAI), OpenAIStream)
    assert isinstance(streamed_reply(Format.ANTHROPIC), AnthropicStream)


def test_ebbtides_refusals_take_each_providers_error_shape() -> None:
    details = {"field": "n"}
    openai_body = provider_error(Provider.OPENAI, 422, "unsupported_parameter", "no", details)
    assert openai_body == {
        "error": {
            "message": "ebbtide unsupported_parameter: no",
            "type": "invalid_request_error",
            "param": "n",
            "code": "unsupported_parameter",
            "details": details,
        }
    }
    problems = {"problems": [{"field": "model", "problem": "missing"}]}
    assert provider_error(Provider.OPENAI, 422, "x", "y", problems)["error"]["param"] == "model"
    assert provider_error(Provider.OPENAI, 502, "x", "y", {})["error"]["type"] == "server_error"
    anthropic_body = provider_error(Provider.ANTHROPIC, 502, "upstream_unreachable", "down", {})
    assert anthropic_body["type"] == "error"
    assert anthropic_body["error"]["type"] == "api_error"
    assert anthropic_body["error"]["message"] == "ebbtide upstream_unreachable: down"
    assert provider_error(Provider.ANTHROPIC, 429, "x", "y", {})["error"]["type"] == (
        "rate_limit_error"
    )
