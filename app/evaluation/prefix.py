"""How much of each prompt a provider's prompt cache can reuse: the stable-prefix share.

A provider caches a prompt by its prefix, so what one turn can reuse of the last is the
run of leading messages the two prompts share. The share is that run's tokens over the new
prompt's tokens, message by message (a message that changed, however little, counts as
new from there on). Offload turns rewrite the notes and drop the oldest turns, so they are
reported apart: the target is the median of the other turns.
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
    sizes = [count(json.dumps(m, ensure_ascii=False)) for m in current]
    shared = sum(sizes[: _common_messages(previous, current)])
    total = sum(sizes)
    return shared / total if total else 1.0


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
