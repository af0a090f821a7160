"""Re-embedding (`ebbtide reembed`): chunks with no vectors, or vectors of another model than
the configured one, go into the embedding queue (app/services/embedding_queue.py), where the
worker of `ebbtide serve` or `ebbtide worker` embeds them; `now` drains the queue in this
process instead."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.ports import Progress, no_progress
from app.services.context import ServiceContext
from app.services.embedding_queue import drain
from app.store import embedding_queue as queue_store


@dataclass(frozen=True)
class ReembedReport:
    queued: int  # chunks pending after the enqueue (those already pending included)
    embedded: int  # by this call (with `now`)
    stopped_by: str | None


async def reembed(
    ctx: ServiceContext,
    session_key: str | None = None,
    *,
    now: bool = False,
    progress: Progress = no_progress,
) -> ReembedReport:
    """`progress` hears of every batch embedded (with `now`)."""
    async with ctx.database.transaction() as db:
        queued = await queue_store.enqueue_stale(db, ctx.embedder.model_name, session_key)
    if not now:
        return ReembedReport(queued, 0, None)
    drained = await drain(ctx, progress, total=queued)
    return ReembedReport(queued, drained.embedded, drained.stopped_by)
