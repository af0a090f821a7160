"""Operator use cases over all sessions: key rotation and the retention purge (docs/DESIGN.md §11).

Both work in bounded batches, one transaction each, so they can run beside live traffic and
be stopped and started again: a re-run re-seals what is left and purges what is still due.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import timedelta

from app import metrics
from app.core.lexical import distinct_terms
from app.core.ports import Progress, no_progress
from app.services.context import ServiceContext
from app.store import chunks as chunk_store
from app.store import maintenance as store
from app.store.models import ChunkRow

log = logging.getLogger(__name__)

RESEAL_BATCH = 200


@dataclass
class ResealReport:
    rows_by_table: dict[str, int] = field(default_factory=dict)
    chunks_reindexed: int = 0


async def reseal_all(
    ctx: ServiceContext, batch: int = RESEAL_BATCH, progress: Progress = no_progress
) -> ResealReport:
    """Rewrites every sealed column under the first configured key (or as plain text when
    no key is configured), then rebuilds the lexical index, whose hashes hang on that key.
    `progress` hears of every batch, per table."""
    report = ResealReport()
    for target in store.sealed_tables():
        stage = f"re-encrypt {target.table.name}"
        async with ctx.database.transaction() as db:
            progress(stage, 0, await store.count_rows(db, target.table))
        after = None
        total = 0
        while True:
            async with ctx.database.transaction() as db:
                count, after = await store.reseal_batch(db, target, after, batch)
            total += count
            progress(stage, count)
            if count < batch:
                break
        report.rows_by_table[target.table.name] = total
    report.chunks_reindexed = await _reindex_chunks(ctx, batch, progress)
    return report


async def _reindex_chunks(ctx: ServiceContext, batch: int, progress: Progress) -> int:
    stage = "rebuild the lexical index"
    async with ctx.database.transaction() as db:
        progress(stage, 0, await store.count_rows(db, ChunkRow.__table__))
    after: tuple[str, str] | None = None
    total = 0
    while True:
        async with ctx.database.transaction() as db:
            rows = await store.chunk_texts(db, after, batch)
            for session_id, chunk_id, raw_text in rows:
                await chunk_store.set_lexical_terms(
                    db, session_id, chunk_id, distinct_terms(raw_text)
                )
        total += len(rows)
        progress(stage, len(rows))
        if len(rows) < batch:
            return total
        after = (rows[-1][0], rows[-1][1])


async def purge_expired(
    ctx: ServiceContext, older_than_days: float | None = None, progress: Progress = no_progress
) -> int:
    """Deletes sessions idle for longer than the retention period; returns how many.
    Sessions in the middle of a turn are skipped (their row is locked) and go next time.
    `progress` hears of every batch (the total is counted first, for the command)."""
    days = older_than_days if older_than_days is not None else ctx.settings.retention.days
    if days is None:
        return 0
    idle_before = ctx.clock() - timedelta(days=days)
    batch = ctx.settings.retention.batch_size
    purged = 0
    if progress is not no_progress:
        async with ctx.database.transaction() as db:
            progress("purge idle sessions", 0, await store.count_expired(db, idle_before))
    while True:
        async with ctx.database.transaction() as db:
            expired = await store.expired_sessions(db, idle_before, batch)
            deleted = 0
            for session_id in expired:
                deleted += await store.delete_idle_session(db, session_id, idle_before)
        purged += deleted
        progress("purge idle sessions", deleted)
        if len(expired) < batch or deleted == 0:  # the rest, if any, are mid-turn
            break
    metrics.SESSIONS_PURGED.inc(purged)
    if purged:
        log.info("retention purge: %d sessions idle since before %s", purged, idle_before)
    return purged


async def purge_periodically(ctx: ServiceContext) -> None:
    """The server's timer: purges every `retention.interval_s` until cancelled. A failed run
    (the database away, say) is logged and tried again at the next tick."""
    interval = ctx.settings.retention.interval_s
    while True:
        try:
            await purge_expired(ctx)
        except Exception:
            log.exception("retention purge failed; retrying in %.0f s", interval)
        await asyncio.sleep(interval)
