from __future__ import annotations

from app.core.assemble import NOTES_HEADER, RECALL_HEADER, PromptParts, assemble
from tests.builders import assistant, make_window_message, tool, user


def test_prompt_order_is_system_notes_window_recall_then_newest_input() -> None:
    window = [
        make_window_message(seq=1, turn=1, message=user("old question")),
        make_window_message(seq=2, turn=2, message=assistant("old answer")),
        make_window_message(seq=3, turn=2, message=user("new question")),
    ]
    prompt = assemble(
        PromptParts(
            system="rules", notes="goal: x", window=window, current_turn=2, recalled="[chunk]"
        )
    )
    assert [m["role"] for m in prompt] == [
        "system",
        "system",
        "user",
        "assistant",
        "system",
        "user",
    ]
    assert prompt[1]["content"].startswith(NOTES_HEADER)
    assert prompt[4]["content"].startswith(RECALL_HEADER)
    assert prompt[5]["content"] == "new question"


def test_recall_block_goes_last_when_the_turn_has_no_user_message() -> None:
    window = [
        make_window_message(seq=1, turn=1, message=user("q")),
        make_window_message(seq=2, turn=2, message=assistant(None, [("c1", "f")])),
        make_window_message(seq=3, turn=2, message=tool("c1", "r")),
    ]
    prompt = assemble(
        PromptParts(system=None, notes=None, window=window, current_turn=2, recalled="[chunk]")
    )
    assert [m["role"] for m in prompt] == ["user", "assistant", "tool", "system"]


def test_without_extras_the_prompt_is_the_window_in_openai_format() -> None:
    window = [make_window_message(seq=1, turn=1, message=assistant(None, [("c1", "f")]))]
    prompt = assemble(PromptParts(system=None, notes=None, window=window, current_turn=1))
    assert prompt == [
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"q": 1}'}}
            ],
        }
    ]
