"""The embedding worker (docs/DESIGN.md §3): it embeds what offloads queued, off the turn's
path. `ebbtide serve` runs one in its process by default; `ebbtide worker` runs one on its
own, and any number may run at once against one database.

A batch: claim up to `worker_batch_chunks` pending chunks (one short transaction), embed
their units with no transaction open, then write each chunk's vectors in one transaction,
only where the claim still holds (checked and locked by one statement per session of the
batch) (the chunk may have been forgotten, archived, or claimed
again after this worker was too slow). A failed embedder gives the claims back; a dead
worker's claims expire after `claim_timeout_s`. Nothing is lost either way: a chunk stays
in the queue, searchable by its words, until its vectors are written.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from app import metrics
from app.core.errors import DatabaseUnavailable
from app.core.fair_queue import batch_size_after
from app.core.ports import Embedder, Progress, no_progress
from app.core.types import UnitDraft
from app.services.context import ServiceContext
from app.store import chunks as chunk_store
from app.store import embedding_queue as queue_store
from app.store.models import ChunkRow

log = logging.getLogger("ebbtide.embedding")


@dataclass(frozen=True)
class BatchReport:
    claimed: int
    embedded: int  # chunks whose vectors were written
    units: int
    words: int
    lost_claims: int  # forgotten, archived or claimed again meanwhile
    failure: str | None = None  # the embedder's refusal: the claims were given back
    seconds: float = 0.0  # embedding the batch's units

    @property
    def troubled(self) -> bool:
        return self.failure is not None or self.lost_claims > 0


@dataclass(frozen=True)
class DrainReport:
    embedded: int
    units: int
    words: int
    seconds: float
    stopped_by: str | None  # the embedder's failure, if it stopped the drain


def _whole_text_unit(chunk: ChunkRow) -> UnitDraft:
    """A chunk written before units existed gets one unit over its whole text."""
    return UnitDraft(0, chunk.seq_start, chunk.first_ts, 0, len(chunk.raw_text))


async def embed_batch(ctx: ServiceContext, size: int | None = None) -> BatchReport | None:
    """One batch of the queue, of `size` chunks at most (default: the setting), the sessions
    a recall asked for first, then shared between tenants (core.fair_queue); None when
    nothing was there to claim."""
    settings = ctx.settings.embedder
    now = ctx.clock()
    lease = timedelta(seconds=settings.claim_timeout_s)
    asking = list(ctx.embedding_asked)
    async with ctx.database.transaction() as db:
        claimed = await queue_store.claim(
            db, size or settings.worker_batch_chunks, now, lease, asking
        )
        stored = await chunk_store.units_of(db, claimed)
    for session in set(asking) - {c.session_id for c in claimed}:
        ctx.embedding_asked.pop(session, None)  # nothing of it left to claim
    if not claimed:
        return None
    embedder = ctx.worker_embedder or ctx.embedder
    return await _embed_claimed(
        ctx, claimed, stored, now + lease, embedder, settings.passage_timeout_s
    )


async def embed_for_recall(ctx: ServiceContext, session_key: str) -> int:
    """A recall about to search `session_key`: up to `recall.inline_embed_chunks` of its
    queued chunks, oldest first, embedded now within `recall.inline_embed_timeout_s` (past it
    their claims go back and the search finds them by their words); the worker is asked to
    take the rest of the session's ahead of the line. Answers how many were embedded."""
    settings = ctx.settings
    limit = settings.recall.inline_embed_chunks
    if limit == 0:
        return 0
    now = ctx.clock()
    until = now + timedelta(seconds=settings.embedder.claim_timeout_s)
    async with ctx.database.transaction() as db:
        claimed = await queue_store.claim_in_session(db, session_key, limit, now, until)
        stored = await chunk_store.units_of(db, claimed)
    if not claimed:
        return 0
    if len(claimed) == limit:  # more may be waiting
        ask_worker_first(ctx, session_key)
    timeout = settings.recall.inline_embed_timeout_s
    report = await _embed_claimed(ctx, claimed, stored, until, ctx.embedder, timeout)
    metrics.RECALL_INLINE_EMBEDDED.inc(report.embedded)
    return report.embedded


def ask_worker_first(ctx: ServiceContext, session_key: str) -> None:
    """A recall met queued chunks of `session_key`: this process's worker takes them next."""
    ctx.embedding_asked[session_key] = None
    ctx.embedding_wakeup.set()


async def _embed_claimed(
    ctx: ServiceContext,
    claimed: list[ChunkRow],
    stored: Mapping[tuple[str, str], list[UnitDraft]],
    until: datetime,
    embedder: Embedder,
    timeout_s: float,
) -> BatchReport:
    settings = ctx.settings.embedder
    work = [(c, stored.get((c.session_id, c.id)) or [_whole_text_unit(c)]) for c in claimed]
    texts = [u.text(c.raw_text)[: settings.max_chars] for c, units in work for u in units]
    started = time.perf_counter()
    try:
        vectors, failure = await ctx.embedder_gate.passages(
            lambda: embedder.embed_passages(texts), timeout_s
        )
    except BaseException:  # an unexpected error, or the worker stopped: claims go back
        await _release(ctx, claimed, until)
        raise
    seconds = time.perf_counter() - started
    if vectors is None:
        await _release(ctx, claimed, until)
        metrics.EMBEDDING_BATCHES.labels(outcome="embedder_failed").inc()
        return BatchReport(len(claimed), 0, 0, 0, 0, failure, seconds)
    metrics.EMBEDDING_BATCH_SECONDS.observe(seconds)
    written = await _write_vectors(ctx, work, vectors, until)
    words = sum(len(text.split()) for text in texts)
    metrics.EMBEDDING_BATCHES.labels(outcome="embedded").inc()
    metrics.EMBEDDED_UNITS.inc(len(texts))
    metrics.EMBEDDED_WORDS.inc(words)
    lost = len(claimed) - written
    return BatchReport(len(claimed), written, len(texts), words, lost, None, seconds)


async def _release(ctx: ServiceContext, claimed: list[ChunkRow], until: datetime) -> None:
    async with ctx.database.transaction() as db:
        await queue_store.release(db, claimed, until)


async def _write_vectors(
    ctx: ServiceContext,
    work: list[tuple[ChunkRow, list[UnitDraft]]],
    vectors: list[list[float]],
    until: datetime,
) -> int:
    model = ctx.embedder.model_name
    written, at = 0, 0
    async with ctx.database.transaction() as db:
        held: set[tuple[str, str]] = set()
        for session_id, chunk_ids in queue_store.by_session([c for c, _ in work]).items():
            mine = await queue_store.still_ours(db, session_id, chunk_ids, until, ctx.clock())
            held |= {(session_id, chunk_id) for chunk_id in mine}
        for chunk, units in work:
            chunk_vectors, at = vectors[at : at + len(units)], at + len(units)
            if (chunk.session_id, chunk.id) not in held:
                continue
            await chunk_store.set_embedding(
                db, chunk.session_id, chunk.id, units, chunk_vectors, model
            )
            written += 1
    done = ctx.clock()
    for chunk, _ in work:
        metrics.EMBEDDING_LAG.observe(max(0.0, (done - chunk.created_at).total_seconds()))
    return written


async def drain(
    ctx: ServiceContext, progress: Progress = no_progress, total: int | None = None
) -> DrainReport:
    """Embeds batches until the queue is empty (or the embedder fails); `progress` hears of
    every batch's chunks (`total`: how many were pending, when known)."""
    started = time.perf_counter()
    embedded = units = words = 0
    progress(DRAIN_STAGE, 0, total)
    while True:
        report = await embed_batch(ctx)
        if report is None or report.failure is not None:
            stopped_by = report.failure if report is not None else None
            seconds = round(time.perf_counter() - started, 3)
            return DrainReport(embedded, units, words, seconds, stopped_by)
        progress(DRAIN_STAGE, report.embedded)
        embedded, units, words = (
            embedded + report.embedded,
            units + report.units,
            words + report.words,
        )


DRAIN_STAGE = "embed queued chunks"


async def observe_depth(ctx: ServiceContext) -> queue_store.QueueDepth:
    async with ctx.database.transaction() as db:
        depth = await queue_store.depth(db)
    metrics.EMBEDDING_QUEUE_CHUNKS.set(depth.chunks)
    age = 0.0 if depth.oldest is None else (ctx.clock() - depth.oldest).total_seconds()
    metrics.EMBEDDING_QUEUE_AGE.set(max(0.0, age))
    return depth


async def run_worker(ctx: ServiceContext, stop: asyncio.Event) -> None:
    """Embeds the queue until `stop` is set: batch after batch while there is work, each
    after a moment with no turn of this process in flight (at most `worker_yield_s`), then
    waits for a turn of this process to queue more (`ctx.embedding_wakeup`) or for
    `worker_idle_s` (another process may have). A failure (embedder, database) waits
    `worker_retry_s` and tries again; it never ends the worker. A batch that fails, loses
    claims or takes half its lease halves the next one (`core.fair_queue.batch_size_after`):
    under CPU contention the batches shrink until they finish, never repeating forever."""
    settings = ctx.settings.embedder
    size = settings.worker_batch_chunks
    while not stop.is_set():
        pause = settings.worker_idle_s
        await _yield_to_turns(ctx)
        try:
            report = await embed_batch(ctx, size)
            await observe_depth(ctx)
        except DatabaseUnavailable:
            log.warning("embedding worker: database unavailable; retrying")
            report, pause = None, settings.worker_retry_s
        except Exception as error:  # a worker that died would stall the queue for good
            log.warning("embedding worker: batch failed (%s); retrying", type(error).__name__)
            report, pause = None, settings.worker_retry_s
        if report is not None:
            size = batch_size_after(
                size,
                settings.worker_batch_chunks,
                report.seconds,
                settings.claim_timeout_s,
                troubled=report.troubled,
            )
            metrics.EMBEDDING_BATCH_SIZE.set(size)
        if report is not None and report.failure is not None:
            log.warning("embedding worker: %s; claims released, retrying", report.failure)
            pause = settings.worker_retry_s
        elif report is not None:
            continue  # more may be waiting
        await _sleep(ctx.embedding_wakeup, stop, pause)


async def _yield_to_turns(ctx: ServiceContext) -> None:
    """Waits (bounded) for this process's turns in flight: a batch started beside them takes
    a core from their query embeddings."""
    started = time.perf_counter()
    await ctx.turns_in_flight.wait_quiet(ctx.settings.embedder.worker_yield_s)
    metrics.EMBEDDING_WORKER_YIELD.inc(time.perf_counter() - started)


async def _sleep(wakeup: asyncio.Event, stop: asyncio.Event, seconds: float) -> None:
    """Until more work is announced, the worker is stopped, or `seconds` pass."""
    waits = [asyncio.ensure_future(wakeup.wait()), asyncio.ensure_future(stop.wait())]
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()
    wakeup.clear()
