"""Planning a turn is pure: these run without a database."""

from __future__ import annotations

from itertools import count

import pytest

from app.core.budget import Level
from app.errors import InvalidPolicyOverride, InvalidWindow, OrphanToolResult, UnknownModel
from app.providers.fakes import WhitespaceCounter
from app.services.turn_plan import Snapshot, TurnInput, plan_turn
from app.settings import Settings
from tests.builders import T0, assistant, make_window_message, tool, user, words

COUNTER = WhitespaceCounter()
SETTINGS = Settings(database_url="postgresql://unused")


def new_ids() -> object:
    numbers = count(1)
    return lambda: f"ck_{next(numbers)}"


def make_input(*messages: object, **fields: object) -> TurnInput:
    values: dict[str, object] = {
        "session_id": "s",
        "tenant_id": "local",
        "messages": list(messages),
    }
    values.update(fields)
    return TurnInput(**values)  # type: ignore[arg-type]


NEW = Snapshot(exists=False, tenant_id="local")


def test_unknown_model_without_a_window_names_the_field() -> None:
    with pytest.raises(UnknownModel) as raised:
        plan_turn(make_input(user("hi"), model="my-llm"), NEW, COUNTER, SETTINGS, T0, new_ids())
    assert raised.value.details["field"] == "context_window"


def test_reserve_must_leave_room_in_the_window() -> None:
    with pytest.raises(InvalidWindow):
        plan_turn(
            make_input(user("hi"), context_window=1000, reserve_tokens=1000),
            NEW,
            COUNTER,
            SETTINGS,
            T0,
            new_ids(),
        )


def test_policy_override_must_keep_the_ratios_ordered() -> None:
    with pytest.raises(InvalidPolicyOverride):
        plan_turn(
            make_input(user("hi"), model="gpt-4o", policy={"target_ratio": 0.9}),
            NEW,
            COUNTER,
            SETTINGS,
            T0,
            new_ids(),
        )


def test_tool_result_without_its_call_is_rejected() -> None:
    with pytest.raises(OrphanToolResult) as raised:
        plan_turn(
            make_input(user("hi"), tool("c404", "x"), model="gpt-4o"),
            NEW,
            COUNTER,
            SETTINGS,
            T0,
            new_ids(),
        )
    assert raised.value.details["field"] == "messages[1].tool_call_id"


def test_tool_result_may_answer_a_call_already_in_the_window() -> None:
    snap = Snapshot(
        exists=True,
        tenant_id="local",
        turn_count=1,
        next_seq=2,
        model="gpt-4o",
        window=[make_window_message(seq=1, message=assistant(None, [("c1", "f")]))],
    )
    plan = plan_turn(make_input(tool("c1", "ok")), snap, COUNTER, SETTINGS, T0, new_ids())
    assert [m.seq for m in plan.new_messages] == [2]
    with pytest.raises(OrphanToolResult):  # the same call cannot be answered twice
        plan_turn(
            make_input(tool("c1", "ok"), tool("c1", "again")),
            snap,
            COUNTER,
            SETTINGS,
            T0,
            new_ids(),
        )


def test_session_settings_are_sticky_and_request_values_override() -> None:
    snap = Snapshot(
        exists=True,
        tenant_id="local",
        turn_count=3,
        next_seq=9,
        model="gpt-4o",
        context_window=50_000,
        system_prompt="old",
        c0_tokens=4,
    )
    plan = plan_turn(make_input(user("hi")), snap, COUNTER, SETTINGS, T0, new_ids())
    assert plan.config.budget.context_window == 50_000
    assert plan.config.system_prompt == "old" and plan.config.c0_tokens == 4
    changed = plan_turn(
        make_input(user("hi"), system="new rules here"), snap, COUNTER, SETTINGS, T0, new_ids()
    )
    assert changed.config.c0_tokens == 3 + 3
    assert changed.turn == 4 and changed.new_messages[0].seq == 9


def test_oversize_message_is_stubbed_and_stored_as_its_own_chunk() -> None:
    huge = "\n".join(words(50) for _ in range(40))  # 2,000 words
    plan = plan_turn(
        make_input(user("see log"), user(huge), context_window=8000),
        NEW,
        COUNTER,
        SETTINGS,
        T0,
        new_ids(),
    )
    (draft,) = plan.oversize_drafts
    stubbed = plan.new_messages[1]
    assert stubbed.stub_chunk_id == draft.id
    assert huge in draft.raw_text
    assert huge not in (stubbed.message.content or "")
    assert draft.id in (stubbed.message.content or "")
    assert stubbed.tokens < draft.tokens / 4


def test_crossing_the_watermark_plans_a_batch_offload_below_target() -> None:
    window = [
        make_window_message(seq=i, turn=i, message=user(words(100)), tokens=103)
        for i in range(1, 40)
    ]
    snap = Snapshot(
        exists=True,
        tenant_id="local",
        turn_count=39,
        next_seq=40,
        context_window=4_000,
        reserve_tokens=0,
        window=window,
    )
    settings = Settings(
        database_url="postgresql://unused", budget={"floor_turns": 2, "floor_tokens": 0}
    )  # type: ignore[arg-type]
    plan = plan_turn(make_input(user("next")), snap, COUNTER, settings, T0, new_ids())
    assert plan.level is Level.EMERGENCY
    assert plan.offloaded
    assert plan.prompt_tokens_after <= 0.65 * 4_000
    assert plan.window_after[-1].message.content == "next"
    offloaded = set(plan.chunk_of)
    assert offloaded == set(range(1, 1 + len(offloaded)))  # the oldest ones


def test_observed_prompt_tokens_update_the_calibration() -> None:
    snap = Snapshot(
        exists=True,
        tenant_id="local",
        turn_count=1,
        next_seq=2,
        model="gpt-4o",
        last_prompt_estimate=1000,
    )
    plan = plan_turn(
        make_input(user("hi"), observed_prompt_tokens=1300), snap, COUNTER, SETTINGS, T0, new_ids()
    )
    assert plan.calibration_ratio == pytest.approx(1.09)
