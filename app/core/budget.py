"""Watermark policy (docs/DESIGN.md §2): levels, reserve, floor, cooldown and the offload plan.

With C the context window, r the reserve and R the share kept for automatic recall:
- the budget is C − r, the ceiling no prompt passes, recalled text and held blocks included;
- R is part of it: recalled text (held blocks and this turn's) never takes more than R;
- the watermark base is C − r − R, the rest, and the lines are shares of it; for a prompt
  of u tokens (recalled text aside):
  - normal     u <  offload_ratio   · base     nothing happens
  - offload    u >= offload_ratio   · base     one batch offload down to target_ratio · base
  - emergency  u >= emergency_ratio · base     offload even during the cooldown

Invariants of `plan_offload`:
- only whole units move (a unit is an assistant tool call with its results, or one message),
  oldest first, and never a pinned unit (the current turn, or a call awaiting its results);
- a batch stops at the target, never before it while anything unpinned is left: the floor
  (the newest `floor_turns` turns AND `floor_tokens` tokens, whichever keeps more, its token
  part capped at `floor_max_share` of the base so that it fits a small window) is what is
  kept when the target can be reached without it; otherwise it yields whole turns, oldest
  first, until the target is reached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class Level(StrEnum):
    NORMAL = "normal"
    OFFLOAD = "offload"
    EMERGENCY = "emergency"


class InvalidPolicy(ValueError):
    """The policy's ratios are not ordered target < offload < emergency ≤ 1, or a bound is
    out of range."""


@dataclass(frozen=True)
class Policy:
    offload_ratio: float
    emergency_ratio: float
    target_ratio: float
    floor_turns: int
    floor_tokens: int
    cooldown_turns: int
    floor_max_share: float

    def __post_init__(self) -> None:
        if not 0 < self.target_ratio < self.offload_ratio < self.emergency_ratio <= 1:
            raise InvalidPolicy(
                "ratios must satisfy 0 < target_ratio < offload_ratio < emergency_ratio <= 1"
            )
        if self.floor_turns < 1 or self.floor_tokens < 0 or self.cooldown_turns < 0:
            raise InvalidPolicy("floor_turns >= 1, floor_tokens >= 0, cooldown_turns >= 0")
        if not 0 <= self.floor_max_share <= self.target_ratio:
            raise InvalidPolicy("floor_max_share must be between 0 and target_ratio")


@dataclass(frozen=True)
class Budget:
    """C, the reply's reserve r and R, the share of C − r kept for automatic recall."""

    context_window: int
    reserve: int
    recall_share: int = 0

    @property
    def ceiling(self) -> int:
        """C − r: what `usage.budget` reports; no prompt is larger."""
        return self.context_window - self.reserve

    @property
    def watermark_base(self) -> int:
        """C − r − R: the watermark lines are shares of it, so an offload always leaves R
        free for recalled evidence on top."""
        return self.ceiling - self.recall_share

    def line(self, ratio: float) -> int:
        return int(ratio * self.watermark_base)


def resolve_reserve(
    context_window: int, requested: int | None, default: int, max_fraction: float
) -> int:
    """r: the caller's reserve if given, else the default capped at a share of the window so
    that small windows keep room for history."""
    if requested is not None:
        return requested
    return min(default, int(max_fraction * context_window))


def watermark(prompt_tokens: int, budget: Budget) -> float:
    return prompt_tokens / budget.watermark_base


def level_for(prompt_tokens: int, budget: Budget, policy: Policy) -> Level:
    if prompt_tokens >= budget.line(policy.emergency_ratio):
        return Level.EMERGENCY
    if prompt_tokens >= budget.line(policy.offload_ratio):
        return Level.OFFLOAD
    return Level.NORMAL


def in_cooldown(turn: int, last_offload_turn: int | None, policy: Policy) -> bool:
    return last_offload_turn is not None and turn - last_offload_turn <= policy.cooldown_turns


def should_offload(level: Level, cooling_down: bool) -> bool:
    return level is Level.EMERGENCY or (level is Level.OFFLOAD and not cooling_down)


@dataclass(frozen=True)
class Unit:
    """Messages that move together; `turn` is the turn of its first message. A pinned unit
    never moves: it holds a message of the current turn, or a tool call still waiting for
    its results."""

    seqs: tuple[int, ...]
    turn: int
    tokens: int
    pinned: bool


@dataclass(frozen=True)
class OffloadPlan:
    units: tuple[Unit, ...]
    tokens_freed: int
    prompt_tokens_after: int
    floor_yielded: bool


def floor_tokens(policy: Policy, budget: Budget) -> int:
    """The floor's token part: `floor_tokens`, at most `floor_max_share` of the base."""
    return min(policy.floor_tokens, int(policy.floor_max_share * budget.watermark_base))


def _floor_start(units: Sequence[Unit], policy: Policy, budget: Budget) -> int:
    """Index of the oldest unit the floor protects: it holds whole turns."""
    turns: set[int] = set()
    tokens = 0
    token_floor = floor_tokens(policy, budget)
    index = len(units)
    while index > 0 and (len(turns) < policy.floor_turns or tokens < token_floor):
        index -= 1
        turns.add(units[index].turn)
        tokens += units[index].tokens
    while 0 < index < len(units) and units[index - 1].turn == units[index].turn:
        index -= 1
    return index


def _step(units: Sequence[Unit], index: int, floor_start: int) -> int:
    """How many units move next from `index`: one, or past the floor the whole turn (its
    unpinned units)."""
    if index < floor_start:
        return 1
    end = index
    while end < len(units) and units[end].turn == units[index].turn and not units[end].pinned:
        end += 1
    return end - index


def plan_offload(
    units: Sequence[Unit],
    prompt_tokens: int,
    budget: Budget,
    policy: Policy,
    target_tokens: int | None = None,
) -> OffloadPlan:
    """Chooses the oldest units to move so the prompt lands at or below the target, in one
    batch: it stops short only at a pinned unit.

    `units` are the window's units oldest first; `prompt_tokens` is the whole prompt now.
    `target_tokens` is a manual offload's target, in place of the policy's: asked for on
    purpose, it moves unit by unit whatever the floor keeps; pinned units (the current turn)
    stay.
    """
    manual = target_tokens is not None
    target = target_tokens if target_tokens is not None else budget.line(policy.target_ratio)
    floor_start = len(units) if manual else _floor_start(units, policy, budget)
    chosen: list[Unit] = []
    remaining = prompt_tokens
    index = 0
    while index < len(units) and remaining > target and not units[index].pinned:
        step = units[index : index + _step(units, index, floor_start)]
        chosen.extend(step)
        remaining -= sum(unit.tokens for unit in step)
        index += len(step)
    return OffloadPlan(
        units=tuple(chosen),
        tokens_freed=prompt_tokens - remaining,
        prompt_tokens_after=remaining,
        floor_yielded=index > floor_start,
    )
