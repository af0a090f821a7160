"""Reconciling a client's whole history with the stored transcript (app/core/transcript.py)."""

from __future__ import annotations

from app.core.formats import read_posted
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
from app.core.transcript import StoredEntry, message_digest, reconcile


def user(text: str) -> Message:
    return Message.of("user", text)


def assistant(text: str) -> Message:
    return Message.of("assistant", text)


def stored(
    *messages: Message, turns: list[int] | None = None, chunks: dict[int, int] | None = None
) -> list[StoredEntry]:
    """Entries for `messages` at seqs 1.., one turn each unless `turns` says otherwise;
    `chunks` maps a seq to the first seq of the chunk it was offloaded into."""
    turns = turns or list(range(1, len(messages) + 1))
    chunks = chunks or {}
    return [
        StoredEntry(seq, turn, message_digest(message), chunks.get(seq))
        for seq, (turn, message) in enumerate(zip(turns, messages, strict=True), start=1)
    ]


U1, A1, U2, A2, U3 = (
    user("plan a trip"),
    assistant("where to?"),
    user("Oslo"),
    assistant("ok"),
    user("when?"),
)


def test_a_history_that_repeats_the_transcript_adds_only_its_suffix() -> None:
    found = reconcile(stored(U1, A1), [U1, A1, U2])
    assert found.new == (U2,) and found.matched == 2 and not found.archived


def test_a_retry_with_the_same_history_adds_nothing() -> None:
    found = reconcile(stored(U1, A1, U2), [U1, A1, U2])
    assert found.new == () and found.branch_from is None


def test_an_empty_history_or_an_empty_transcript() -> None:
    assert reconcile(stored(U1), []).new == ()
    assert reconcile([], [U1, A1]).new == (U1, A1)


def test_a_history_missing_the_stored_reply_archives_it_as_a_branch() -> None:
    # regenerate: the client dropped the reply it got (or never got it) and asks again
    found = reconcile(stored(U1, A1, U2, A2, turns=[1, 2, 2, 3]), [U1, A1, U2])
    assert found.branch_from == 4 and found.new == ()


def test_an_edited_message_wins_from_the_start_of_its_turn() -> None:
    edited = user("Bergen")
    found = reconcile(stored(U1, A1, U2, A2, turns=[1, 2, 2, 3]), [U1, A1, edited])
    # U2 is turn 2, which A1 opened: the branch starts at A1, stored again from the client
    assert found.branch_from == 2
    assert found.new == (A1, edited) and found.matched == 1


def test_a_divergence_inside_an_offloaded_chunk_moves_to_the_chunk_start() -> None:
    entries = stored(U1, A1, U2, A2, U3, turns=[1, 2, 3, 4, 5], chunks={1: 1, 2: 1, 3: 1})
    found = reconcile(entries, [U1, A1, user("changed")])
    assert found.branch_from == 1 and found.new == (U1, A1, user("changed"))


def test_a_client_that_trims_its_own_history_is_matched_from_its_first_message() -> None:
    found = reconcile(stored(U1, A1, U2, A2), [U2, A2, U3])
    assert found.new == (U3,) and found.matched == 2 and not found.archived


def test_a_trimmed_history_never_branches_before_its_first_message() -> None:
    entries = stored(U1, A1, U2, A2, turns=[1, 1, 1, 1])
    found = reconcile(entries, [A1, user("other")])
    # the turn started before the client's first message: the branch starts at that message
    assert found.branch_from == 2 and found.new == (A1, user("other"))


def test_a_history_whose_first_message_is_unknown_replaces_the_conversation() -> None:
    found = reconcile(stored(U1, A1), [user("plan a trip, by train"), A1])
    assert found.branch_from == 1 and found.new == (user("plan a trip, by train"), A1)


def test_repeated_messages_line_up_where_the_run_reaches_the_end() -> None:
    ok = user("ok")
    entries = stored(ok, A1, ok, A2)
    assert reconcile(entries, [ok, A2, U3]).new == (U3,)
    # no run reaches the end: the longest one decides where the client diverged
    longest = reconcile(stored(ok, A1, U2, ok, A2), [ok, A1, U3])
    assert longest.branch_from == 3 and longest.new == (U3,)


def test_a_legacy_message_without_a_digest_matches_nothing() -> None:
    found = reconcile([StoredEntry(1, 1, None, 1)], [U1])
    assert found.new == (U1,) and found.branch_from == 1


def test_the_digest_ignores_reasoning_nulls_and_key_order() -> None:
    recorded = read_posted(
        Format.OPENAI,
        {
            "role": "assistant",
            "content": "Sunny.",
            "reasoning_content": "The user asked about the weather.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"a": 1, "b": 2}'},
                }
            ],
        },
    )
    echoed = read_posted(
        Format.OPENAI,
        {
            "tool_calls": [
                {
                    "type": "function",
                    "id": "c1",
                    "function": {"arguments": '{"b":2,"a":1}', "name": "f"},
                }
            ],
            "content": "Sunny.",
            "role": "assistant",
            "refusal": None,
        },
    )
    assert message_digest(recorded) == message_digest(echoed)


def test_the_digest_joins_text_blocks_as_a_string_would_say_them() -> None:
    split = read_posted(
        Format.ANTHROPIC,
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}],
        },
    )
    whole = read_posted(Format.ANTHROPIC, {"role": "assistant", "content": "Hello there"})
    assert message_digest(split) == message_digest(whole)


def test_the_digest_tells_apart_what_a_message_says() -> None:
    call = Message("assistant", (ToolCall("c1", "f", "not json"),))
    other_call = Message("assistant", (ToolCall("c1", "f", "not json either"),))
    result = Message(
        "tool", (ToolResult("c1", (Text("4 °C"), Media("image", "image/png", data="AAAA"))),)
    )
    other_result = Message("tool", (ToolResult("c1", (Text("4 °C"),), is_error=True),))
    refusal = Message("assistant", (Refusal("no"),))
    opaque = Message(
        "assistant", (Opaque(Format.ANTHROPIC, {"type": "server_tool_use", "id": "s"}),)
    )
    image = Message("user", (Text("look"), Media("image", url="https://example.org/a.png")))
    thinking_then_text = Message("assistant", (Reasoning("hmm"), Text("ok")))
    digests = {
        message_digest(m)
        for m in (
            user("x"),
            assistant("x"),
            call,
            other_call,
            result,
            other_result,
            refusal,
            opaque,
            image,
        )
    }
    assert len(digests) == 9
    assert message_digest(thinking_then_text) == message_digest(assistant("ok"))
