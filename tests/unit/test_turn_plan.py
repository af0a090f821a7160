"""Planning a turn is pure: these run without a database."""

from __future__ import annotations

from itertools import count
from typing import Any

import pytest

from app.core.budget import Level
from app.core.errors import InvalidPolicyOverride, InvalidWindow, OrphanToolResult, UnknownModel
from app.core.formats import SystemPrompt
from app.core.messages import Message
from app.core.plan import Snapshot, TurnInput, TurnPlan, plan_turn
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


def test_observed_prompt_tokens_update_the_calibration() -> None:
    snap = existing(last_prompt_estimate=1000)
    result = plan(make_input(user("hi"), observed_prompt_tokens=1300), snap)
    assert result.calibration_ratio == pytest.approx(1.09)
