"""Read-only use cases: a session's status, one offloaded chunk raw, the event log; and the
one tenant check every use case goes through."""

from __future__ import annotations

import base64
import binascii

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.budget import level_for
from app.core.errors import BlobNotFound, ChunkNotFound, SessionNotFound, UnreadableBlob
from app.core.plan import session_budget, session_policy
from app.core.results import (
    EventPage,
    LastOffload,
    NotesState,
    SessionEvent,
    SessionStatus,
    StoredBlob,
    StoredChunk,
    WatermarkLevels,
    WatermarkView,
)
from app.core.tokens import calibrated, window_for_model
from app.core.types import client_session_id, session_key
from app.services.context import ServiceContext
from app.services.notes import active_facts_view
from app.services.policies import plan_policy
from app.settings import Settings
from app.store import chunks as chunk_store
from app.store import events as event_store
from app.store import facts as fact_store
from app.store import sessions as session_store
from app.store.models import ChunkRow, EventRow, SessionRow


def owned(row: SessionRow | None, tenant_id: str, session_id: str) -> SessionRow:
    """The row, when the tenant owns it: another tenant's session is as unknown as a
    missing one (404, never its data)."""
    if row is None or row.tenant_id != tenant_id:
        raise SessionNotFound("no such session", session_id=session_id)
    return row


async def owned_session(db: AsyncSession, tenant_id: str, session_id: str) -> SessionRow:
    """The tenant's session; its `id` is the key every other table files the session under."""
    row = await session_store.get_session(db, session_key(tenant_id, session_id))
    return owned(row, tenant_id, session_id)


async def locked_session(db: AsyncSession, tenant_id: str, session_id: str) -> SessionRow:
    """The tenant's session under its row lock: writes outside a turn queue with the turns."""
    row = await session_store.lock_session(db, session_key(tenant_id, session_id))
    return owned(row, tenant_id, session_id)


def watermark_view(settings: Settings, row: SessionRow) -> WatermarkView | None:
    """Window, budget, prompt size and levels of a session, as its last turn left them;
    None while no window is known for its model."""
    window = row.context_window or window_for_model(row.model)
    if window is None:
        return None
    rules = plan_policy(settings)
    budget = session_budget(rules, window, row.reserve_tokens)
    policy = session_policy(rules, row.policy)
    # The watermark measures the prompt without recalled text (it has a reserve of its own).
    last = (
        row.last_window_estimate
        if row.last_window_estimate is not None
        else row.last_prompt_estimate
    )
    prompt = calibrated(last or 0, row.calibration_ratio)
    return WatermarkView(
        context_window=window,
        reserve_tokens=budget.reserve,
        recall_share_tokens=budget.recall_share,
        budget=budget.ceiling,
        watermark_base=budget.watermark_base,
        prompt_tokens=prompt,
        watermark=round(prompt / budget.watermark_base, 4),
        level=level_for(prompt, budget, policy),
        levels=WatermarkLevels(
            offload_at=budget.line(policy.offload_ratio),
            emergency_at=budget.line(policy.emergency_ratio),
            target=budget.line(policy.target_ratio),
        ),
        policy=policy,
        calibration_ratio=round(row.calibration_ratio, 4),
    )


def _last_offload(event: EventRow) -> LastOffload:
    """The offload part of a turn event (a JSON column) read back as a value."""
    offload = event.payload["offload"]
    turn_range = offload["turn_range"]
    return LastOffload(
        turn=event.turn,
        triggered=offload["triggered"],
        tokens_freed=offload["tokens_freed"],
        chunks_offloaded=offload["chunks_offloaded"],
        chunk_ids=tuple(offload.get("chunk_ids", ())),
        turn_range=(turn_range[0], turn_range[1]) if turn_range else None,
        floor_yielded=offload.get("floor_yielded", False),
        at=event.created_at,
    )


async def session_status(ctx: ServiceContext, tenant_id: str, session_id: str) -> SessionStatus:
    async with ctx.database.transaction() as db:
        row = await owned_session(db, tenant_id, session_id)
        counts = await session_store.counts(db, row.id)
        notes = await session_store.notes_for(db, row.id)
        last_offload = (
            await event_store.turn_event(db, row.id, row.last_offload_turn)
            if row.last_offload_turn is not None
            else None
        )
        facts = await fact_store.current_facts(db, row.id, ctx.settings.notes.recent_resolved)
    return SessionStatus(
        session_id=session_id,
        turns=row.turn_count,
        model=row.model,
        window=watermark_view(ctx.settings, row),
        counts=counts,
        notes=NotesState(notes.rendered, notes.tokens, notes.needs_rebuild) if notes else None,
        facts=active_facts_view(facts),
        last_offload=_last_offload(last_offload) if last_offload else None,
    )


def stored_chunk(chunk: ChunkRow) -> StoredChunk:
    return StoredChunk(
        chunk_id=chunk.id,
        session_id=client_session_id(chunk.session_id),
        kind=chunk.kind,
        turn_range=(chunk.turn_start, chunk.turn_end),
        roles=tuple(chunk.roles),
        first_ts=chunk.first_ts,
        last_ts=chunk.last_ts,
        tokens=chunk.tokens,
        summary_hint=chunk.summary_hint,
        embedding_model=chunk.embedding_model,
        needs_embedding=chunk.needs_embedding,
        content_hash=chunk.content_hash,
        raw_text=chunk.raw_text,
        messages=tuple(chunk.sources or ()),
        superseded_turn=chunk.superseded_turn,
    )


async def read_chunk(
    ctx: ServiceContext, tenant_id: str, session_id: str, chunk_id: str
) -> StoredChunk:
    async with ctx.database.transaction() as db:
        row = await owned_session(db, tenant_id, session_id)
        chunk = await chunk_store.get_chunk(db, row.id, chunk_id)
    if chunk is None:
        raise ChunkNotFound("no such chunk in this session", chunk_id=chunk_id)
    return stored_chunk(chunk)


async def read_blob(
    ctx: ServiceContext, tenant_id: str, session_id: str, blob_hash: str
) -> StoredBlob:
    """An offloaded payload by the hash its chunk names."""
    async with ctx.database.transaction() as db:
        row = await owned_session(db, tenant_id, session_id)
        found = await chunk_store.blob(db, row.id, blob_hash)
    if found is None:
        raise BlobNotFound("no such blob in this session", blob=blob_hash)
    try:
        data = base64.b64decode(found.data, validate=True)
    except (binascii.Error, ValueError) as error:
        raise UnreadableBlob(
            "this payload was stored before media were checked and its data is not base64",
            blob=blob_hash,
        ) from error
    return StoredBlob(found.media_type, found.kind, data)


async def list_events(
    ctx: ServiceContext,
    tenant_id: str,
    session_id: str,
    *,
    after: int,
    limit: int,
    kind: str | None,
) -> EventPage:
    """A page of the session's event log; `next_after` continues it (None: no more now)."""
    async with ctx.database.transaction() as db:
        row = await owned_session(db, tenant_id, session_id)
        events = await event_store.events_after(db, row.id, after, limit, kind)
    return EventPage(
        events=tuple(SessionEvent(e.id, e.turn, e.kind, e.created_at, e.payload) for e in events),
        next_after=events[-1].id if len(events) == limit else None,
    )
