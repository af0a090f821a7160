"""The turn use case (DESIGN §2–3, §6): store the new messages, offload when the watermark is
crossed, answer with the assembled prompt.

Flow: read a snapshot → plan (pure) → embed the planned chunks → one write transaction that
locks the session row, checks the version and writes everything. No lock or transaction is
held across the embedder call. A version mismatch re-plans; a crash anywhere before commit
leaves the session as it was.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app import metrics
from app.core.assemble import PromptParts, assemble
from app.core.ports import EmbedderUnavailable
from app.core.types import ChunkDraft
from app.errors import IdempotencyKeyReused, SessionBusy, SessionNotFound
from app.services.context import ServiceContext
from app.services.turn_plan import Snapshot, TurnInput, TurnPlan, plan_turn
from app.store import chunks as chunk_store
from app.store import events as event_store
from app.store import sessions as session_store
from app.store.models import SessionRow

EMBEDDER_UNAVAILABLE = "embedder_unavailable"


class VersionConflict(Exception):
    """Another turn of the session committed after our snapshot."""


class ReplayResponse(Exception):
    """The turn was already answered under this Idempotency-Key."""

    def __init__(self, response: dict[str, Any]) -> None:
        super().__init__("replay")
        self.response = response


async def load_snapshot(ctx: ServiceContext, inp: TurnInput) -> Snapshot:
    async with ctx.database.transaction() as db:
        row = await session_store.get_session(db, inp.session_id)
        if row is None:
            return Snapshot(exists=False, tenant_id=inp.tenant_id)
        if row.tenant_id != inp.tenant_id:
            raise SessionNotFound("no such session", session_id=inp.session_id)
        if inp.idempotency_key:
            await _check_replay(db, inp)
        window = await session_store.window_messages(db, inp.session_id)
        notes = await session_store.notes_for(db, inp.session_id)
        has_chunks = await chunk_store.has_chunks(db, inp.session_id)
    return Snapshot(
        exists=True,
        tenant_id=row.tenant_id,
        version=row.version,
        turn_count=row.turn_count,
        next_seq=row.next_seq,
        model=row.model,
        context_window=row.context_window,
        reserve_tokens=row.reserve_tokens,
        system_prompt=row.system_prompt,
        tools=row.tools,
        c0_tokens=row.c0_tokens,
        policy=dict(row.policy),
        calibration_ratio=row.calibration_ratio,
        last_prompt_estimate=row.last_prompt_estimate,
        last_offload_turn=row.last_offload_turn,
        window=window,
        notes_text=notes.rendered if notes and notes.rendered else None,
        notes_tokens=notes.tokens if notes else 0,
        has_chunks=has_chunks,
    )


async def _check_replay(db: AsyncSession, inp: TurnInput) -> None:
    assert inp.idempotency_key is not None
    found = await event_store.find_idempotent(db, inp.session_id, inp.idempotency_key)
    if found is None:
        return
    if found.request_hash != inp.request_hash:
        raise IdempotencyKeyReused(
            "this Idempotency-Key was used for a different request body",
            header="Idempotency-Key",
        )
    raise ReplayResponse(found.response)


async def _embed(
    ctx: ServiceContext, drafts: list[ChunkDraft]
) -> tuple[list[list[float] | None], str | None]:
    """Vectors for the chunks, or Nones and the fallback reason when the embedder is down."""
    if not drafts:
        return [], None
    try:
        vectors = await ctx.embedder.embed_passages([d.raw_text for d in drafts])
    except EmbedderUnavailable:
        return [None] * len(drafts), EMBEDDER_UNAVAILABLE
    return list(vectors), None


async def run_turn(ctx: ServiceContext, inp: TurnInput) -> dict[str, Any]:
    async with ctx.locks.for_session(inp.session_id):
        for _ in range(ctx.settings.db.turn_retries):
            try:
                return await _attempt(ctx, inp)
            except ReplayResponse as replay:
                return replay.response
            except VersionConflict:
                continue
    raise SessionBusy("other turns of this session kept committing first; retry the turn")


async def _attempt(ctx: ServiceContext, inp: TurnInput) -> dict[str, Any]:
    timings: dict[str, float] = {}
    started = time.perf_counter()
    snap = await load_snapshot(ctx, inp)
    timings["db_read"] = _ms_since(started)
    mark = time.perf_counter()
    plan = plan_turn(inp, snap, ctx.counter, ctx.settings, ctx.clock(), ctx.new_id)
    timings["plan"] = _ms_since(mark)
    mark = time.perf_counter()
    drafts = [*plan.oversize_drafts, *plan.offload_drafts]
    vectors, fallback = await _embed(ctx, drafts)
    timings["embed"] = _ms_since(mark)
    mark = time.perf_counter()
    prompt = assemble(
        PromptParts(
            system=plan.config.system_prompt,
            notes=snap.notes_text,
            window=plan.window_after,
            current_turn=plan.turn,
        )
    )
    timings["assemble"] = _ms_since(mark)
    response = _response(inp, snap, plan, prompt, fallback, timings)
    clock = Stopwatch(started=started, write_started=time.perf_counter())
    await commit_turn(ctx, inp, snap, plan, drafts, vectors, fallback, response, clock)
    record_metrics(response)
    return response


@dataclass(frozen=True)
class Stopwatch:
    """Closes the turn's timings just before the response is stored for replays, so a retry
    with the same Idempotency-Key gets exactly the first response (the COMMIT round trip is
    the only part not counted)."""

    started: float
    write_started: float

    def finish(self, response: dict[str, Any]) -> None:
        response["timings_ms"]["db_write"] = _ms_since(self.write_started)
        response["timings_ms"]["total"] = _ms_since(self.started)


def _ms_since(mark: float) -> float:
    return round((time.perf_counter() - mark) * 1000, 3)


def _offload_section(plan: TurnPlan, fallback: str | None) -> dict[str, Any]:
    drafts = plan.offload_drafts
    return {
        "triggered": plan.offloaded,
        "chunk_ids": [d.id for d in drafts],
        "tokens_freed": plan.prompt_tokens_before - plan.prompt_tokens_after,
        "turn_range": [min(d.turn_start for d in drafts), max(d.turn_end for d in drafts)]
        if drafts
        else None,
        "messages_offloaded": len(plan.chunk_of),
        "floor_yielded": plan.floor_yielded,
        "oversize_chunk_ids": [d.id for d in plan.oversize_drafts],
        "fallback": fallback,
    }


def _usage_section(plan: TurnPlan) -> dict[str, Any]:
    budget = plan.config.budget
    return {
        "prompt_tokens": plan.prompt_tokens_after,
        "estimated_prompt_tokens": plan.estimate_after,
        "calibration_ratio": round(plan.calibration_ratio, 4),
        "context_window": budget.context_window,
        "reserve_tokens": budget.reserve,
        "budget": budget.available,
        "watermark": round(plan.prompt_tokens_after / budget.available, 4),
        "trigger_ratio": round(plan.prompt_tokens_before / budget.available, 4),
        "level": plan.level.value,
    }


def _recall_section(inp: TurnInput, snap: Snapshot, plan: TurnPlan) -> dict[str, Any]:
    """Recall arrives with the recall issue; until then the turn says why it did none."""
    archive_empty = not (snap.has_chunks or plan.offload_drafts or plan.oversize_drafts)
    reason = (
        "off"
        if inp.recall == "off"
        else ("archive_empty" if archive_empty else "recall_not_available")
    )
    return {
        "mode": inp.recall,
        "query_raw": None,
        "query_rewritten": None,
        "hits": [],
        "skipped_reason": reason,
        "fallback": None,
    }


def _response(
    inp: TurnInput,
    snap: Snapshot,
    plan: TurnPlan,
    prompt: list[dict[str, Any]],
    fallback: str | None,
    timings: dict[str, float],
) -> dict[str, Any]:
    return {
        "session_id": inp.session_id,
        "turn": plan.turn,
        "messages": prompt,
        "usage": _usage_section(plan),
        "offload": _offload_section(plan, fallback),
        "recall": _recall_section(inp, snap, plan),
        "notes": {"text": snap.notes_text, "tokens": snap.notes_tokens}
        if snap.notes_text
        else None,
        "timings_ms": timings,
    }


def _event_payload(plan: TurnPlan, response: dict[str, Any]) -> dict[str, Any]:
    offload = response["offload"]
    return {
        "level": plan.level.value,
        "trigger_ratio": response["usage"]["trigger_ratio"],
        "watermark": response["usage"]["watermark"],
        "prompt_tokens": plan.prompt_tokens_after,
        "messages_added": len(plan.new_messages),
        "offload": {
            "triggered": offload["triggered"],
            "tokens_freed": offload["tokens_freed"],
            "chunks_offloaded": len(offload["chunk_ids"]),
            "chunk_ids": offload["chunk_ids"],
            "turn_range": offload["turn_range"],
            "floor_yielded": offload["floor_yielded"],
        },
        "oversize_chunk_ids": offload["oversize_chunk_ids"],
        "fallback_flag": offload["fallback"],
        "timings_ms": response["timings_ms"],
    }


async def commit_turn(
    ctx: ServiceContext,
    inp: TurnInput,
    snap: Snapshot,
    plan: TurnPlan,
    drafts: list[ChunkDraft],
    vectors: list[list[float] | None],
    fallback: str | None,
    response: dict[str, Any],
    clock: Stopwatch,
) -> None:
    async with ctx.database.transaction() as db:
        if not snap.exists:
            await session_store.create_session(db, inp.session_id, inp.tenant_id)
        row = await session_store.lock_session(db, inp.session_id)
        if row is None or row.tenant_id != inp.tenant_id:
            raise SessionNotFound("no such session", session_id=inp.session_id)
        if inp.idempotency_key:
            await _check_replay(db, inp)
        if row.version != snap.version:
            raise VersionConflict
        await session_store.insert_messages(db, inp.session_id, plan.new_messages)
        embedding_model = ctx.embedder.model_name if fallback is None else None
        await chunk_store.insert_chunks(db, inp.session_id, drafts, vectors, embedding_model)
        await session_store.mark_offloaded(db, inp.session_id, plan.chunk_of)
        _update_session_row(row, plan)
        clock.finish(response)
        await event_store.record_event(
            db, inp.session_id, plan.turn, "turn", _event_payload(plan, response)
        )
        if inp.idempotency_key:
            await event_store.save_idempotent(
                db, inp.session_id, inp.idempotency_key, inp.request_hash, response
            )


def _update_session_row(row: SessionRow, plan: TurnPlan) -> None:
    config = plan.config
    row.version += 1
    row.turn_count = plan.turn
    row.next_seq += len(plan.new_messages)
    row.model = config.model
    row.context_window = config.context_window_override
    row.reserve_tokens = config.reserve_tokens
    row.system_prompt = config.system_prompt
    row.tools = config.tools
    row.c0_tokens = config.c0_tokens
    row.policy = config.policy_overrides
    row.calibration_ratio = plan.calibration_ratio
    row.last_prompt_estimate = plan.estimate_after
    if plan.offloaded:
        row.last_offload_turn = plan.turn


def record_metrics(response: dict[str, Any]) -> None:
    usage, offload = response["usage"], response["offload"]
    metrics.TURNS.labels(level=usage["level"]).inc()
    metrics.WATERMARK.observe(usage["trigger_ratio"])
    metrics.TURN_SECONDS.observe(response["timings_ms"].get("total", 0.0) / 1000)
    if offload["triggered"]:
        metrics.OFFLOADS.inc()
        metrics.CHUNKS_OFFLOADED.inc(len(offload["chunk_ids"]))
        metrics.TOKENS_FREED.inc(offload["tokens_freed"])
    if offload["fallback"]:
        metrics.FALLBACKS.labels(reason=offload["fallback"]).inc()
