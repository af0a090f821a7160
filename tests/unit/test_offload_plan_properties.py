"""`plan_offload` on random windows: one batch to the target, whole units, oldest first."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.core.budget import Budget, Policy, Unit, plan_offload


@st.composite
def windows(draw: st.DrawFn) -> tuple[list[Unit], Budget, Policy, int]:
    context = draw(st.integers(1_000, 200_000))
    reserve = draw(st.integers(0, context // 4))
    budget = Budget(context, reserve, recall_share=int(0.15 * (context - reserve)))
    target = draw(st.floats(0.3, 0.7))
    policy = Policy(
        offload_ratio=target + 0.1,
        emergency_ratio=target + 0.2,
        target_ratio=target,
        floor_turns=draw(st.integers(1, 20)),
        floor_tokens=draw(st.integers(0, 10_000)),
        cooldown_turns=2,
        floor_max_share=draw(st.floats(0, 0.3)),
    )
    sizes = draw(st.lists(st.integers(1, max(2, context // 10)), min_size=1, max_size=60))
    turns = sorted(draw(st.lists(st.integers(1, 30), min_size=len(sizes), max_size=len(sizes))))
    current = turns[-1]
    units = [
        Unit(seqs=(i,), turn=turn, tokens=size, pinned=turn == current)
        for i, (turn, size) in enumerate(zip(turns, sizes, strict=True))
    ]
    overhead = draw(st.integers(0, context // 10))  # C0 and the notes
    return units, budget, policy, overhead + sum(sizes)


@given(windows())
def test_a_batch_lands_at_the_target_unless_only_pinned_units_are_left(
    case: tuple[list[Unit], Budget, Policy, int],
) -> None:
    units, budget, policy, prompt = case
    plan = plan_offload(units, prompt, budget, policy)
    moved = len(plan.units)
    assert list(plan.units) == units[:moved], "the oldest units, in order"
    assert not any(unit.pinned for unit in plan.units)
    assert plan.tokens_freed == sum(unit.tokens for unit in plan.units)
    assert plan.prompt_tokens_after == prompt - plan.tokens_freed
    target = budget.line(policy.target_ratio)
    if plan.prompt_tokens_after > target:
        assert moved == len(units) or units[moved].pinned, "stopped short of the target"
    elif moved:
        # the last step was needed: before it the prompt was above the target
        last_turn = plan.units[-1].turn
        step = [u for u in plan.units if u.turn == last_turn] if plan.floor_yielded else []
        before = plan.prompt_tokens_after + sum(u.tokens for u in step or plan.units[-1:])
        assert before > target
