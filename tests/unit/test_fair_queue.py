"""How a batch of the embedding queue is shared (app/core/fair_queue.py)."""

from datetime import UTC, datetime, timedelta

from app.core.fair_queue import Waiting, batch_shares, batch_size_after

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def waiting(minutes: int, chunks: int) -> Waiting:
    return Waiting(T0 + timedelta(minutes=minutes), chunks)


def test_a_tenant_with_a_long_backlog_shares_each_batch_with_the_others() -> None:
    queue = {"big/s1": waiting(0, 80), "small/s1": waiting(5, 8), "other/s9": waiting(7, 1)}
    assert batch_shares(queue, 4) == [("big/s1", 2), ("small/s1", 1), ("other/s9", 1)]


def test_a_tenants_sessions_go_oldest_first_and_the_batch_never_passes_its_limit() -> None:
    queue = {"t/new": waiting(9, 5), "t/old": waiting(1, 2), "u/a": waiting(3, 1)}
    assert batch_shares(queue, 5) == [("t/old", 2), ("u/a", 1), ("t/new", 2)]
    assert batch_shares(queue, 100) == [("t/old", 2), ("u/a", 1), ("t/new", 5)]
    assert batch_shares({}, 4) == []


def test_the_sessions_a_recall_asks_for_go_ahead_of_the_line() -> None:
    queue = {"big/s1": waiting(0, 80), "small/s1": waiting(5, 3)}
    assert batch_shares(queue, 4, ["small/s1", "gone/s2"]) == [("small/s1", 3), ("big/s1", 1)]
    assert batch_shares(queue, 2, ["small/s1"]) == [("small/s1", 2)]


def test_a_batch_that_runs_long_or_fails_halves_the_next_and_quick_ones_grow_it_back() -> None:
    lease = 120.0
    assert batch_size_after(8, 8, 70.0, lease, troubled=False) == 4
    assert batch_size_after(4, 8, 1.0, lease, troubled=True) == 2
    assert batch_size_after(1, 8, 200.0, lease, troubled=True) == 1
    assert batch_size_after(2, 8, 3.0, lease, troubled=False) == 4
    assert batch_size_after(8, 8, 3.0, lease, troubled=False) == 8
    assert batch_size_after(4, 8, 30.0, lease, troubled=False) == 4
