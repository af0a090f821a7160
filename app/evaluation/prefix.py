"""How much of each prompt a provider's prompt cache can reuse: the stable-prefix share.

A provider caches a prompt by its prefix, so what one turn can reuse of the last is the
run of leading messages the two prompts share. The share is that run's tokens over the new
prompt's tokens, message by message (a message that changed, however little, counts as
new from there on). Offload turns rewrite the notes and drop the oldest turns, so they are
reported apart: the target is the median of the other turns.

`CacheShare` adds a run up as a provider bills it: the tokens each prompt shares as a prefix
with the previous one, over all prompt tokens of the run, offload turns included.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from app.core.types import JsonObject


def stable_prefix_share(
    previous: Sequence[JsonObject], current: Sequence[JsonObject], count: Callable[[str], int]
) -> float:
    """Tokens of `current`'s leading messages equal to `previous`'s, over all of `current`."""
    shared, total = shared_prefix_tokens(previous, current, lambda m: _message_tokens(m, count))
    return shared / total if total else 1.0


def shared_prefix_tokens(
    previous: Sequence[JsonObject],
    current: Sequence[JsonObject],
    size: Callable[[JsonObject], int],
) -> tuple[int, int]:
    """(tokens of `current`'s leading messages equal to `previous`'s, tokens of `current`)."""
    sizes = [size(m) for m in current]
    return sum(sizes[: _common_messages(previous, current)]), sum(sizes)


def _message_tokens(message: JsonObject, count: Callable[[str], int]) -> int:
    return count(json.dumps(message, ensure_ascii=False))


def _common_messages(previous: Sequence[JsonObject], current: Sequence[JsonObject]) -> int:
    for index, (old, new) in enumerate(zip(previous, current, strict=False)):
        if old != new:
            return index
    return min(len(previous), len(current))


def extends(previous: Sequence[JsonObject], current: Sequence[JsonObject]) -> bool:
    """`current` starts with the whole of `previous`: it only added messages after it."""
    return len(current) >= len(previous) and _common_messages(previous, current) == len(previous)


@dataclass
class PrefixTracker:
    """Follows a session's prompts turn by turn (the first turn has nothing to reuse)."""

    count: Callable[[str], int]
    steady: list[float] = field(default_factory=list)  # turns without an offload
    offload: list[float] = field(default_factory=list)
    steady_extending: list[bool] = field(default_factory=list)  # whole previous prompt kept
    _previous: list[JsonObject] | None = None

    def record(self, prompt: Sequence[JsonObject], *, offloaded: bool) -> None:
        if self._previous is not None:
            share = stable_prefix_share(self._previous, prompt, self.count)
            (self.offload if offloaded else self.steady).append(share)
            if not offloaded:
                self.steady_extending.append(extends(self._previous, prompt))
        self._previous = list(prompt)

    def report(self) -> PrefixReport:
        return PrefixReport(
            steady_turns=len(self.steady),
            offload_turns=len(self.offload),
            steady_median=_median(self.steady),
            steady_p10=_quantile(self.steady, 0.10),
            steady_min=min(self.steady, default=None),
            steady_extending=(
                round(sum(self.steady_extending) / len(self.steady_extending), 4)
                if self.steady_extending
                else None
            ),
            offload_median=_median(self.offload),
        )


@dataclass(frozen=True)
class PrefixReport:
    steady_turns: int
    offload_turns: int
    steady_median: float | None
    steady_p10: float | None
    steady_min: float | None
    steady_extending: float | None  # turns whose prompt starts with the whole previous one
    offload_median: float | None


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def _quantile(values: Sequence[float], q: float) -> float | None:
    if len(values) < 2:
        return _median(values)
    return round(statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1], 4)


@dataclass(frozen=True)
class PromptShare:
    """One turn's prompt: its tokens, those it shares as a prefix with the previous prompt,
    and whether the turn offloaded."""

    shared: int
    total: int
    offloaded: bool


@dataclass
class CacheShare:
    """A run's prompts, turn by turn: what a prefix cache could serve of all of them. The
    first prompt counts too (nothing before it to share). Message sizes are counted once."""

    count: Callable[[str], int]
    turns: list[PromptShare] = field(default_factory=list)
    _previous: list[JsonObject] = field(default_factory=list)
    _sizes: dict[str, int] = field(default_factory=dict)

    def record(self, prompt: Sequence[JsonObject], *, offloaded: bool) -> None:
        shared, total = shared_prefix_tokens(self._previous, prompt, self._size)
        self.turns.append(PromptShare(shared, total, offloaded))
        self._previous = list(prompt)

    def whole_run(self, since_turn: int = 0) -> float:
        """Shared tokens over all prompt tokens, from the `since_turn`-th prompt (from 0)."""
        return _share(self.turns[since_turn:])

    def between_offloads(self) -> float | None:
        steady = [turn for turn in self.turns if not turn.offloaded]
        return _share(steady) if steady else None

    def _size(self, message: JsonObject) -> int:
        key = json.dumps(message, ensure_ascii=False, sort_keys=True)
        if key not in self._sizes:
            self._sizes[key] = self.count(key)
        return self._sizes[key]


def _share(turns: Sequence[PromptShare]) -> float:
    total = sum(turn.total for turn in turns)
    return round(sum(turn.shared for turn in turns) / total, 4) if total else 1.0
