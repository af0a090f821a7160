from __future__ import annotations

from app.core.assemble import NOTES_HEADER, RECALL_HEADER, PromptParts, assemble
from app.core.formats import SystemPrompt
from app.core.formats.anthropic import ARCHIVED_OPENING
from app.core.types import RecalledText
from tests.builders import assistant, make_window_message, user


def test_prompt_order_is_system_notes_window_recall_then_newest_input() -> None:
    window = [
        make_window_message(seq=1, turn=1, message=user("old question")),
        make_window_message(seq=2, turn=2, message=assistant("old answer")),
        make_window_message(
            seq=3,
            turn=2,
            message=user("new question"),
            recalled=RecalledText(f"{RECALL_HEADER}\n[chunk]", 8, ("c1",)),
        ),
    ]
    prompt = assemble(
        PromptParts(system=SystemPrompt("rules"), notes="goal: x", window=window, current_turn=2)
    ).messages
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


def test_a_block_injected_in_an_earlier_turn_stays_where_it_was() -> None:
    window = [
        make_window_message(
            seq=1, turn=1, message=user("q1"), recalled=RecalledText("[block one]", 5, ("c1",))
        ),
        make_window_message(seq=2, turn=1, message=assistant("a1")),
        make_window_message(seq=3, turn=2, message=user("q2")),
    ]
    earlier = assemble(PromptParts(None, None, window[:2], current_turn=1)).messages
    later = assemble(PromptParts(None, None, window, current_turn=2)).messages
    assert later[: len(earlier)] == earlier  # the new prompt extends the old one
    assert [m["content"] for m in later] == ["[block one]", "q1", "a1", "q2"]


def test_without_extras_the_prompt_is_the_window_in_openai_format() -> None:
    window = [make_window_message(seq=1, turn=1, message=assistant(None, [("c1", "f")]))]
    prompt = assemble(PromptParts(system=None, notes=None, window=window, current_turn=1)).messages
    assert prompt == [
        {"role": "user", "content": ARCHIVED_OPENING},  # no prompt opens with the model's turn
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"q": 1}'}}
            ],
        },
    ]


def test_a_prompt_of_system_messages_only_gets_no_opening_line() -> None:
    # A window emptied by offload leaves the system prompt and the notes: there is no turn of
    # the model's to precede, so no placeholder user line is added.
    prompt = assemble(
        PromptParts(system=SystemPrompt("rules"), notes="goal: x", window=[], current_turn=1)
    ).messages
    assert [m["role"] for m in prompt] == ["system", "system"]
