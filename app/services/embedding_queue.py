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
from dataclasses import dataclass
from datetime import datetime, timedelta

from app import metrics
from app.core.errors import DatabaseUnavailable
from app.core.ports import Progress, no_progress
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


async def embed_batch(ctx: ServiceContext) -> BatchReport | None:
    """One batch of the queue; None when nothing was there to claim."""
    settings = ctx.settings.embedder
    now = ctx.clock()
    lease = timedelta(seconds=settings.claim_timeout_s)
    async with ctx.database.transaction() as db:
        claimed = await queue_store.claim(db, settings.worker_batch_chunks, now, lease)
        stored = await chunk_store.units_of(db, claimed)
    if not claimed:
        return None
    until = now + lease
    work = [(c, stored.get((c.session_id, c.id)) or [_whole_text_unit(c)]) for c in claimed]
    texts = [u.text(c.raw_text)[: settings.max_chars] for c, units in work for u in units]
    started = time.perf_counter()
    embedder = ctx.worker_embedder or ctx.embedder
    try:
        vectors, failure = await ctx.embedder_gate.passages(
            lambda: embedder.embed_passages(texts), settings.passage_timeout_s
        )
    except BaseException:  # an unexpected error, or the worker stopped: claims go back
        await _release(ctx, claimed, until)
        raise
    if vectors is None:
        await _release(ctx, claimed, until)
        metrics.EMBEDDING_BATCHES.labels(outcome="embedder_failed").inc()
        return BatchReport(len(claimed), 0, 0, 0, 0, failure)
    metrics.EMBEDDING_BATCH_SECONDS.observe(time.perf_counter() - started)
    written = await _write_vectors(ctx, work, vectors, until)
    words = sum(len(text.split()) for text in texts)
    metrics.EMBEDDING_BATCHES.labels(outcome="embedded").inc()
    metrics.EMBEDDED_UNITS.inc(len(texts))
    metrics.EMBEDDED_WORDS.inc(words)
    return BatchReport(len(claimed), written, len(texts), words, len(claimed) - written)


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
            mine = await queue_store.still_claimed(db, session_id, chunk_ids, until)
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
    `worker_retry_s` and tries again; it never ends the worker."""
    settings = ctx.settings.embedder
    while not stop.is_set():
        pause = settings.worker_idle_s
        await _yield_to_turns(ctx)
        try:
            report = await embed_batch(ctx)
            await observe_depth(ctx)
        except DatabaseUnavailable:
            log.warning("embedding worker: database unavailable; retrying")
            report, pause = None, settings.worker_retry_s
        except Exception as error:  # a worker that died would stall the queue for good
            log.warning("embedding worker: batch failed (%s); retrying", type(error).__name__)
            report, pause = None, settings.worker_retry_s
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
