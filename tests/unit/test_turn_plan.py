"""Planning a turn is pure: these run without a database."""

from __future__ import annotations

from dataclasses import replace
from itertools import count
from typing import Any

import pytest

from app.core.budget import Budget, Level
from app.core.errors import (
    InvalidPolicyOverride,
    InvalidWindow,
    OrphanToolResult,
    TurnExceedsBudget,
    UnknownModel,
)
from app.core.formats import SystemPrompt
from app.core.messages import Message
from app.core.plan import (
    RecallRoom,
    Snapshot,
    TurnInput,
    TurnPlan,
    plan_turn,
    recall_room,
    session_budget,
)
from app.providers.fakes import WhitespaceCounter
from app.services.policies import plan_policy
from app.settings import Settings
from tests.builders import T0, assistant, make_window_message, tool, user, words

COUNTER = WhitespaceCounter()
SETTINGS = Settings(database_url="postgresql://unused")
NEW = Snapshot(exists=False)


def make_input(*messages: Message, **fields: Any) -> TurnInput:
    return TurnInput(session_id="s", tenant_id="local", messages=list(messages), **fields)


def existing(**overrides: Any) -> Snapshot:
    """A session that already had a turn, on gpt-4o unless overridden."""
    values: dict[str, Any] = {
        "exists": True,
        "turn_count": 1,
        "next_seq": 2,
        "model": "gpt-4o",
    }
    values.update(overrides)
    return Snapshot(**values)


def plan(inp: TurnInput, snap: Snapshot = NEW, settings: Settings = SETTINGS) -> TurnPlan:
    numbers = count(1)
    return plan_turn(inp, snap, COUNTER, plan_policy(settings), T0, lambda: f"ck_{next(numbers)}")


def test_unknown_model_without_a_window_names_the_field() -> None:
    with pytest.raises(UnknownModel) as raised:
        plan(make_input(user("hi"), model="my-llm"))
    assert raised.value.details["field"] == "context_window"


def test_reserve_must_leave_room_in_the_window() -> None:
    with pytest.raises(InvalidWindow):
        plan(make_input(user("hi"), context_window=1000, reserve_tokens=1000))


def test_policy_override_must_keep_the_ratios_ordered() -> None:
    with pytest.raises(InvalidPolicyOverride):
        plan(make_input(user("hi"), model="gpt-4o", policy={"target_ratio": 0.9}))


def test_tool_result_without_its_call_is_rejected() -> None:
    with pytest.raises(OrphanToolResult) as raised:
        plan(make_input(user("hi"), tool("c404", "x"), model="gpt-4o"))
    assert raised.value.details["field"] == "messages[1]"


def test_tool_result_may_answer_a_call_already_in_the_window() -> None:
    snap = existing(window=[make_window_message(seq=1, message=assistant(None, [("c1", "f")]))])
    assert [m.seq for m in plan(make_input(tool("c1", "ok")), snap).new_messages] == [2]
    with pytest.raises(OrphanToolResult):  # the same call cannot be answered twice
        plan(make_input(tool("c1", "ok"), tool("c1", "again")), snap)


def test_session_settings_are_sticky_and_request_values_override() -> None:
    snap = existing(
        turn_count=3,
        next_seq=9,
        context_window=50_000,
        system_prompt=SystemPrompt("old"),
        c0_tokens=4,
    )
    kept = plan(make_input(user("hi")), snap)
    assert kept.config.budget.context_window == 50_000
    assert kept.config.system_prompt == SystemPrompt("old") and kept.config.c0_tokens == 4
    changed = plan(make_input(user("hi"), system=SystemPrompt("new rules here")), snap)
    assert changed.config.c0_tokens == 3 + 3
    assert changed.turn == 4 and changed.new_messages[0].seq == 9


def test_oversize_message_is_stubbed_and_stored_as_its_own_chunk() -> None:
    huge = "\n".join(words(50) for _ in range(40))  # 2,000 words
    result = plan(make_input(user("see log"), user(huge), context_window=8000))
    (draft,) = result.oversize_drafts
    stubbed = result.new_messages[1]
    assert stubbed.stub_chunk_id == draft.id
    assert huge in draft.raw_text
    assert huge not in stubbed.message.text
    assert draft.id in stubbed.message.text
    assert stubbed.tokens < draft.tokens / 4


def test_crossing_the_watermark_plans_a_batch_offload_below_target() -> None:
    window = [
        make_window_message(seq=i, turn=i, message=user(words(100)), tokens=103)
        for i in range(1, 40)
    ]
    snap = existing(
        turn_count=39,
        next_seq=40,
        model=None,
        context_window=4_000,
        reserve_tokens=0,
        window=window,
    )
    settings = Settings(
        database_url="postgresql://unused", budget={"floor_turns": 2, "floor_tokens": 0}
    )  # type: ignore[arg-type]
    result = plan(make_input(user("next")), snap, settings)
    assert result.level is Level.EMERGENCY
    assert result.offloaded
    assert result.prompt_tokens_after <= 0.65 * 4_000
    assert result.window_after[-1].message.text == "next"
    offloaded = {m.seq for unit in result.offload_units for m in unit}
    assert offloaded == set(range(1, 1 + len(offloaded)))  # the oldest ones


def test_an_offload_makes_room_for_the_notes_it_will_render() -> None:
    window = [
        make_window_message(seq=i, turn=i, message=user(words(100)), tokens=103)
        for i in range(1, 46)
    ]
    snap = existing(
        turn_count=45, next_seq=46, model=None, context_window=8_000, window=window, notes_tokens=50
    )
    rules = plan_policy(SETTINGS)

    def planned(notes_after: int | None) -> TurnPlan:
        inp = make_input(user("next"))
        return plan_turn(inp, snap, COUNTER, rules, T0, lambda: "ck_1", notes_after)

    unknown, drafted, unchanged = planned(None), planned(250), planned(50)
    target = rules.policy.target_ratio * unknown.config.budget.watermark_base
    assert unknown.offloaded and unknown.notes_cap == 400  # unknown: room at the cap
    for result, notes_after in ((unknown, 400), (drafted, 250), (unchanged, 50)):
        assert result.prompt_tokens_after - 50 + notes_after <= target
    moved = [sum(len(unit) for unit in p.offload_units) for p in (unknown, drafted, unchanged)]
    assert moved[0] > moved[1] > moved[2]  # no more than the notes need


def test_observed_prompt_tokens_update_the_calibration() -> None:
    snap = existing(last_prompt_estimate=1000)
    result = plan(make_input(user("hi"), observed_prompt_tokens=1300), snap)
    assert result.calibration_ratio == pytest.approx(1.09)


def tool_turn(results: int, lines: int, words_per_line: int) -> list[Message]:
    calls = [(f"c{i}", "search") for i in range(results)]
    body = "\n".join(words(words_per_line) for _ in range(lines))
    return [assistant(None, calls), *(tool(call_id, body) for call_id, _ in calls)]


def test_a_turn_too_large_for_the_window_has_its_largest_messages_stubbed_until_it_fits() -> None:
    # 2,000 tokens: r 500, R 225, base 1,275, emergency line 1,211, notes cap 225; each of the
    # five results (about 240 tokens) is under the single-message limit (318), not together
    messages = tool_turn(results=5, lines=20, words_per_line=12)
    result = plan(make_input(*messages, context_window=2_000))
    stubbed = [m for m in result.new_messages if m.stub_chunk_id is not None]
    assert 0 < len(stubbed) < 5 and len(result.oversize_drafts) == len(stubbed)
    assert {m.stub_chunk_id for m in stubbed} == {d.id for d in result.oversize_drafts}
    room = int(0.95 * 1_275) - 225  # no system prompt, no notes yet
    assert sum(m.tokens for m in result.new_messages) <= room


def test_stubs_shrink_to_the_id_and_size_when_their_lines_do_not_fit() -> None:
    # 1,000 tokens: base 638, room 606 − 112; a stub quoting eight 18-word lines is no smaller
    # than the 144-token result it stands for, so the stubs lose their lines
    messages = tool_turn(results=4, lines=8, words_per_line=18)
    result = plan(make_input(*messages, context_window=1_000))
    stubbed = [m for m in result.new_messages if m.stub_chunk_id is not None]
    assert stubbed and all("lorem" not in m.message.text for m in stubbed)
    assert all(m.stub_chunk_id in m.message.text for m in stubbed)
    assert sum(m.tokens for m in result.new_messages) <= int(0.95 * 638) - 112


def test_a_turn_that_cannot_fit_even_stubbed_is_refused_before_any_write() -> None:
    inp = make_input(user("hi"), context_window=1_000, system=SystemPrompt(words(800)))
    with pytest.raises(TurnExceedsBudget) as raised:
        plan(inp)
    assert raised.value.details["budget"] == 750
    assert raised.value.details["needed_tokens"] > 750


def test_the_notes_cap_fits_the_window() -> None:
    small = plan(make_input(user("hi"), context_window=2_000))
    assert small.notes_cap == int(0.15 * 1_500)  # the share of C − r, under the 400 cap
    large = plan(make_input(user("hi"), context_window=100_000))
    assert large.notes_cap == 400


def test_a_turn_with_recall_off_keeps_r_while_the_window_holds_recalled_blocks() -> None:
    rules = plan_policy(SETTINGS)
    assert session_budget(rules, 8_000, None, "off").recall_share == 0
    held = session_budget(rules, 8_000, None, "off", holds_recall=True)
    assert held.recall_share == session_budget(rules, 8_000, None, "auto").recall_share == 900


def test_a_turns_block_takes_at_most_r_and_all_recalled_text_stays_under_the_budget() -> None:
    budget = Budget(context_window=8_000, reserve=2_000, recall_share=900)  # base 5,100
    policy = plan_policy(SETTINGS).policy  # emergency line 4,845: recalled text up to 5,745
    assert recall_room(budget, policy, 3_000, 1.0) == RecallRoom(total=2_745, block=900)
    assert recall_room(budget, policy, 5_300, 1.0) == RecallRoom(total=445, block=445)
    assert recall_room(budget, policy, 6_500, 1.0) == RecallRoom(total=0, block=0)
    # calibrated: 4,500 estimated tokens are 5,400 real ones at 1.2
    room = recall_room(budget, policy, 4_500, 1.2)
    assert room == RecallRoom(total=287, block=287)
    assert 1.2 * (4_500 + room.total) <= 5_745
    at_the_top = replace(policy, emergency_ratio=1.0)  # 5,100 + 900: the budget itself
    assert recall_room(budget, at_the_top, 5_000, 1.0).total == 1_000
