from app.core.stats import percentiles


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]  # 1 … 100
    assert percentiles(values) == {"p50": 50.0, "p95": 95.0, "p99": 99.0, "n": 100}
    assert percentiles([3.0]) == {"p50": 3.0, "p95": 3.0, "p99": 3.0, "n": 1}
    assert percentiles([]) == {"p50": 0.0, "p95": 0.0, "p99": 0.0, "n": 0}
