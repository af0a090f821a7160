"""Which sessions' chunks the embedding queue's next batch takes (docs/DESIGN.md §3, "The
embedding queue").

One FIFO across tenants lets a tenant that offloads a long history hold every other tenant's
first chunk behind all of its own. A batch is shared instead:
- first the sessions a recall is waiting on (`asking`, in the order they asked): their
  chunks are searched by words alone until embedded;
- then a chunk per tenant in turn (round robin), tenants in the order of their oldest waiting
  chunk, and within a tenant its sessions oldest first.
So another tenant's first chunk waits at most one batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from app.core.types import tenant_of


@dataclass(frozen=True)
class Waiting:
    """A session's chunks in the queue that no live claim holds."""

    oldest: datetime
    chunks: int


def batch_shares(
    waiting: Mapping[str, Waiting], limit: int, asking: Sequence[str] = ()
) -> list[tuple[str, int]]:
    """(session key, chunks to claim) for a batch of at most `limit`, in claim order."""
    left = {key: entry.chunks for key, entry in waiting.items()}
    shares: dict[str, int] = {}

    def take(key: str, count: int) -> int:
        count = min(count, left[key], limit - sum(shares.values()))
        if count > 0:
            shares[key] = shares.get(key, 0) + count
            left[key] -= count
        return count

    for key in dict.fromkeys(asking):
        if key in left:
            take(key, left[key])
    by_tenant: dict[str, list[str]] = {}
    for key in sorted(waiting, key=lambda k: (waiting[k].oldest, k)):
        by_tenant.setdefault(tenant_of(key), []).append(key)
    while sum(shares.values()) < limit and any(left.values()):
        for sessions in by_tenant.values():
            session = next((key for key in sessions if left[key]), None)
            if session is not None:
                take(session, 1)
    return list(shares.items())


def batch_size_after(
    size: int, most: int, seconds: float, lease_s: float, *, troubled: bool
) -> int:
    """The worker's next batch size: halved (down to one chunk) after a batch that failed,
    lost claims or took half its lease, so that a slow machine never repeats a batch it
    cannot finish; doubled back (up to `most`) after one that took under a tenth of it."""
    if troubled or seconds > lease_s / 2:
        return max(1, size // 2)
    if seconds < lease_s / 10:
        return min(most, size * 2)
    return size
