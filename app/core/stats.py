"""Latency summaries for benchmarks."""

from __future__ import annotations

from collections.abc import Sequence


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """Nearest-rank p50 / p95 / p99 and the count (all 0 for no values)."""
    ordered = sorted(values)
    if not ordered:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "n": 0}

    def rank(q: float) -> float:
        index = min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))
        return round(ordered[index], 3)

    return {"p50": rank(0.50), "p95": rank(0.95), "p99": rank(0.99), "n": len(ordered)}
