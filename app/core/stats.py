"""Summaries for benchmarks and evaluations: latency percentiles, and the 95 % interval of a
share measured on a sample."""

from __future__ import annotations

import math
from collections.abc import Sequence

Z_95 = 1.959964  # the normal quantile of a two-sided 95 % interval


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """Nearest-rank p50 / p95 / p99 and the count (all 0 for no values)."""
    ordered = sorted(values)
    if not ordered:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "n": 0}

    def rank(q: float) -> float:
        index = min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))
        return round(ordered[index], 3)

    return {"p50": rank(0.50), "p95": rank(0.95), "p99": rank(0.99), "n": len(ordered)}


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a share `successes / n` (95 % by default). Unlike the
    normal approximation it stays inside [0, 1] and is not empty at 0 or n, which matters
    for the 20-question samples an evaluation has. (0, 1) for no sample."""
    if n <= 0:
        return 0.0, 1.0
    share = successes / n
    denominator = 1 + z * z / n
    centre = (share + z * z / (2 * n)) / denominator
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)
