"""A 500-turn task conversation: the notes never pass their cap and keep every constraint
and every open pending action a correct scratchpad should hold, at every offload."""

from __future__ import annotations

from app.evaluation.scenarios import replay_task, task_scenario
from app.services.context import ServiceContext

TURNS = 500


async def test_notes_stay_under_the_cap_and_keep_constraints_over_500_turns(
    ctx: ServiceContext,
) -> None:
    scenario = task_scenario(turns=TURNS)
    checks = await replay_task(ctx, "long-task", scenario, context_window=4000)
    cap = ctx.settings.notes.cap_tokens
    assert len(checks) >= 20  # the notes were rendered at every one of many offloads
    assert max(c.tokens for c in checks) <= cap
    constraints = sum(c.constraints_kept for c in checks) / sum(
        c.constraints_expected for c in checks
    )
    open_items = sum(c.open_kept for c in checks) / max(1, sum(c.open_expected for c in checks))
    tokens = sorted(c.tokens for c in checks)
    print(
        f"\nnotes over {TURNS} turns: {len(checks)} renders, tokens min/median/max "
        f"{tokens[0]}/{tokens[len(tokens) // 2]}/{tokens[-1]} (cap {cap}), constraint "
        f"retention {constraints:.2%}, open-item retention {open_items:.2%}"
    )
    assert constraints == 1.0
    assert open_items == 1.0
