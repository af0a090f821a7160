"""Watermark policy (docs/DESIGN.md §2): levels, reserve, floor, cooldown and the offload plan.

With C the context window, r the reserve and R the room kept for automatic recall, the budget
is C − r − R and, for a prompt of u tokens (recalled text aside):
- normal     u <  offload_ratio   · budget       nothing happens
- offload    u >= offload_ratio   · budget       batch offload down to target_ratio · budget
- emergency  u >= emergency_ratio · budget       offload even during the cooldown

Invariants of `plan_offload`:
- only whole units move (a unit is an assistant tool call with its results, or one message),
  oldest first, and never a pinned unit (the current turn, or a call awaiting its results);
- the floor (the newest `floor_turns` turns AND `floor_tokens` tokens, whichever keeps more)
  stays, unless keeping it would leave u at or above the offload line: then the floor yields
  and offloading continues to the target, so a batch never ends above the offload line while
  anything older than the current turn is left to move.
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
    """The policy's ratios are not ordered target < offload < emergency ≤ 1."""


@dataclass(frozen=True)
class Policy:
    offload_ratio: float
    emergency_ratio: float
    target_ratio: float
    floor_turns: int
    floor_tokens: int
    cooldown_turns: int

    def __post_init__(self) -> None:
        if not 0 < self.target_ratio < self.offload_ratio < self.emergency_ratio <= 1:
            raise InvalidPolicy(
                "ratios must satisfy 0 < target_ratio < offload_ratio < emergency_ratio <= 1"
            )
        if self.floor_turns < 1 or self.floor_tokens < 0 or self.cooldown_turns < 0:
            raise InvalidPolicy("floor_turns >= 1, floor_tokens >= 0, cooldown_turns >= 0")


@dataclass(frozen=True)
class Budget:
    """C, the reply's reserve r and the room kept for automatic recall: the watermark lines
    are shares of what is left for the rest of the prompt, C − r − recall_reserve, so an
    offload always leaves room for recalled evidence on top."""

    context_window: int
    reserve: int
    recall_reserve: int = 0

    @property
    def available(self) -> int:
        return self.context_window - self.reserve - self.recall_reserve

    def line(self, ratio: float) -> int:
        return int(ratio * self.available)


def resolve_reserve(
    context_window: int, requested: int | None, default: int, max_fraction: float
) -> int:
    """r: the caller's reserve if given, else the default capped at a share of the window so
    that small windows keep room for history."""
    if requested is not None:
        return requested
    return min(default, int(max_fraction * context_window))


def watermark(prompt_tokens: int, budget: Budget) -> float:
    return prompt_tokens / budget.available


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


def _floor_start(units: Sequence[Unit], policy: Policy) -> int:
    """Index of the oldest unit the floor protects."""
    turns: set[int] = set()
    tokens = 0
    index = len(units)
    while index > 0 and (len(turns) < policy.floor_turns or tokens < policy.floor_tokens):
        index -= 1
        turns.add(units[index].turn)
        tokens += units[index].tokens
    return index


def plan_offload(
    units: Sequence[Unit],
    prompt_tokens: int,
    budget: Budget,
    policy: Policy,
    target_tokens: int | None = None,
) -> OffloadPlan:
    """Chooses the oldest units to move so the prompt lands at or below the target.

    `units` are the window's units oldest first; `prompt_tokens` is the whole prompt now.
    `target_tokens` is a manual offload's target, in place of the policy's: asked for on
    purpose, it may move what the floor would keep; pinned units (the current turn) stay.
    """
    target = budget.line(policy.target_ratio)
    floor_start = _floor_start(units, policy)
    if target_tokens is not None:
        target = target_tokens
        floor_start = len(units)
    offload_line = budget.line(policy.offload_ratio)
    chosen: list[Unit] = []
    remaining = prompt_tokens
    floor_yielded = False
    for index, unit in enumerate(units):
        if remaining <= target or unit.pinned:
            break
        if index >= floor_start:
            if remaining < offload_line:
                break
            floor_yielded = True
        chosen.append(unit)
        remaining -= unit.tokens
    return OffloadPlan(
        units=tuple(chosen),
        tokens_freed=prompt_tokens - remaining,
        prompt_tokens_after=remaining,
        floor_yielded=floor_yielded,
    )
