from __future__ import annotations

import pytest

from app.core.budget import (
    Budget,
    InvalidPolicy,
    Level,
    Policy,
    Unit,
    floor_tokens,
    in_cooldown,
    level_for,
    plan_offload,
    resolve_reserve,
    should_offload,
    watermark,
)

BUDGET = Budget(context_window=11_000, reserve=1_000)  # 10,000 tokens of budget


def make_policy(**overrides: float) -> Policy:
    values: dict[str, float] = {
        "offload_ratio": 0.80,
        "emergency_ratio": 0.95,
        "target_ratio": 0.65,
        "floor_turns": 2,
        "floor_tokens": 0,
        "cooldown_turns": 2,
        "floor_max_share": 0.4,
    }
    values.update(overrides)
    return Policy(**values)  # type: ignore[arg-type]


def units(*tokens: int, pinned_last: bool = True) -> list[Unit]:
    """One unit per turn, oldest first; the last is the current turn."""
    return [
        Unit(seqs=(i,), turn=i, tokens=t, pinned=pinned_last and i == len(tokens))
        for i, t in enumerate(tokens, start=1)
    ]


def test_levels_switch_at_080_and_095_of_the_budget() -> None:
    policy = make_policy()
    assert level_for(7_999, BUDGET, policy) is Level.NORMAL
    assert level_for(8_000, BUDGET, policy) is Level.OFFLOAD
    assert level_for(9_499, BUDGET, policy) is Level.OFFLOAD
    assert level_for(9_500, BUDGET, policy) is Level.EMERGENCY
    assert watermark(5_000, BUDGET) == 0.5


def test_reserve_default_is_capped_for_small_windows_and_explicit_reserve_wins() -> None:
    assert resolve_reserve(128_000, None, 4096, 0.25) == 4096
    assert resolve_reserve(8_000, None, 4096, 0.25) == 2000
    assert resolve_reserve(8_000, 500, 4096, 0.25) == 500


@pytest.mark.parametrize(
    "overrides",
    [
        {"target_ratio": 0.85},
        {"offload_ratio": 0.96},
        {"emergency_ratio": 0.7},
        {"floor_turns": 0},
        {"floor_tokens": -1},
        {"cooldown_turns": -1},
        {"floor_max_share": 0.7},
        {"floor_max_share": -0.1},
    ],
)
def test_policy_rejects_disordered_ratios_and_negative_bounds(overrides: dict[str, float]) -> None:
    with pytest.raises(InvalidPolicy):
        make_policy(**overrides)


def test_cooldown_holds_back_the_offload_level_but_not_emergency() -> None:
    policy = make_policy(cooldown_turns=2)
    assert in_cooldown(turn=11, last_offload_turn=10, policy=policy)
    assert in_cooldown(turn=12, last_offload_turn=10, policy=policy)
    assert not in_cooldown(turn=13, last_offload_turn=10, policy=policy)
    assert not in_cooldown(turn=1, last_offload_turn=None, policy=policy)
    assert not should_offload(Level.OFFLOAD, cooling_down=True)
    assert should_offload(Level.OFFLOAD, cooling_down=False)
    assert should_offload(Level.EMERGENCY, cooling_down=True)
    assert not should_offload(Level.NORMAL, cooling_down=False)


def test_offload_moves_oldest_units_until_at_or_below_target() -> None:
    window = units(2_000, 2_000, 2_000, 1_000, 1_000, 500)  # 8,500 in all
    plan = plan_offload(window, 8_500, BUDGET, make_policy())
    assert [u.turn for u in plan.units] == [1]
    assert plan.prompt_tokens_after == 6_500
    assert plan.tokens_freed == 2_000
    assert not plan.floor_yielded


def test_offload_is_a_batch_that_lands_in_the_safe_zone() -> None:
    window = units(*([500] * 18), 400)  # 9,400
    plan = plan_offload(window, 9_400, BUDGET, make_policy())
    assert plan.prompt_tokens_after <= BUDGET.line(0.65)
    assert [u.turn for u in plan.units] == list(range(1, 7))


def test_the_floor_yields_whole_turns_until_the_target_even_below_the_offload_line() -> None:
    # floor of 4 turns = 7,000 tokens: above the 6,500 target, so turn 2 goes too
    window = units(1_600, 1_750, 1_750, 1_750, 1_750)
    plan = plan_offload(window, 8_600, BUDGET, make_policy(floor_turns=4))
    assert [u.turn for u in plan.units] == [1, 2]
    assert plan.prompt_tokens_after == 5_250 <= BUDGET.line(0.65)
    assert plan.floor_yielded


def test_the_floor_stays_whole_when_the_target_is_reached_without_it() -> None:
    window = units(2_000, 1_000, 1_000, 1_000, 1_000)
    plan = plan_offload(window, 8_000, BUDGET, make_policy(floor_turns=4))
    assert [u.turn for u in plan.units] == [1]
    assert not plan.floor_yielded


def test_a_turn_the_floor_gives_up_moves_whole() -> None:
    # turn 2 has two units (a message, then a tool call with its result): once the floor
    # yields turn 2, both go, although the first alone would reach the target
    window = [
        Unit(seqs=(1,), turn=1, tokens=1_000, pinned=False),
        Unit(seqs=(2,), turn=2, tokens=2_000, pinned=False),
        Unit(seqs=(3, 4), turn=2, tokens=500, pinned=False),
        Unit(seqs=(5,), turn=3, tokens=4_000, pinned=True),
    ]
    plan = plan_offload(window, 8_500, BUDGET, make_policy(floor_turns=2))
    assert [u.seqs for u in plan.units] == [(1,), (2,), (3, 4)]
    assert plan.prompt_tokens_after == 5_000 and plan.floor_yielded


def test_a_manual_offload_goes_to_its_target_past_the_floor() -> None:
    window = units(1_600, 1_750, 1_750, 1_750, 1_750)
    plan = plan_offload(window, 8_600, BUDGET, make_policy(floor_turns=4), target_tokens=3_500)
    assert [u.turn for u in plan.units] == [1, 2, 3]
    assert plan.prompt_tokens_after == 3_500
    assert not plan.floor_yielded  # asked for on purpose: the floor does not apply


def test_floor_yields_when_keeping_it_would_stay_above_the_offload_line() -> None:
    window = units(500, 3_000, 3_000, 3_000)
    plan = plan_offload(window, 9_500, BUDGET, make_policy(floor_turns=3))
    assert [u.turn for u in plan.units] == [1, 2]
    assert plan.floor_yielded
    assert plan.prompt_tokens_after == 6_000


def test_floor_keeps_turns_and_tokens_whichever_keeps_more() -> None:
    window = units(3_000, 3_000, 200, 200, 200, 200)  # plus 3,000 of system prompt
    by_turns = plan_offload(window, 9_800, BUDGET, make_policy(floor_turns=4))
    assert [u.turn for u in by_turns.units] == [1, 2] and not by_turns.floor_yielded
    # 3,500 tokens reach back into turn 2, so moving it is the floor yielding
    by_tokens = plan_offload(window, 9_800, BUDGET, make_policy(floor_turns=1, floor_tokens=3_500))
    assert [u.turn for u in by_tokens.units] == [1, 2] and by_tokens.floor_yielded


def test_the_floors_token_part_is_capped_by_a_share_of_the_base() -> None:
    small = Budget(context_window=4_000, reserve=1_000, recall_share=450)  # base 2,550
    assert floor_tokens(make_policy(floor_tokens=6_000), small) == int(0.4 * 2_550)
    assert floor_tokens(make_policy(floor_tokens=500), small) == 500
    assert floor_tokens(make_policy(floor_tokens=6_000, floor_max_share=0.2), small) == 510
    # 12 turns of 60 tokens, then the current one: the 1,020-token floor keeps 17 of them
    window = units(*([60] * 40), 60)
    plan = plan_offload(window, 2_460, small, make_policy(floor_turns=12, floor_tokens=6_000))
    assert plan.prompt_tokens_after <= small.line(0.65) and not plan.floor_yielded


def test_the_budget_names_the_ceiling_and_the_watermark_base_apart() -> None:
    budget = Budget(context_window=8_000, reserve=2_000, recall_share=900)
    assert (budget.ceiling, budget.watermark_base) == (6_000, 5_100)
    assert budget.line(0.8) == 4_080


def test_pinned_units_never_move_even_in_emergency() -> None:
    window = [
        Unit(seqs=(1,), turn=1, tokens=9_000, pinned=True),
        Unit(seqs=(2,), turn=2, tokens=900, pinned=True),
    ]
    plan = plan_offload(window, 9_900, BUDGET, make_policy())
    assert plan.units == ()
    assert plan.tokens_freed == 0
